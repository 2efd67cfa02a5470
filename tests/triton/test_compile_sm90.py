"""Each kernel specialisation the launchers use compiles for an H100 (sm_90) with the
installed Triton, no GPU needed (the interpreter tests cannot see compile errors), and its
PTX keeps the contract's arithmetic: correctly rounded divisions and square roots (no
div.full / div.approx / sqrt.approx), no fused multiply-add and no multiply whose result
feeds an add directly (which ptxas may contract), with Triton's default compile options, the
ones Inductor compiles user-defined kernels with (``_common.mul``), and the
round-half-to-even adds of the int8 stores.

Triton cannot compile in a process that imported it to interpret, so the checks run in a
child process (``python tests/triton/test_compile_sm90.py``)."""

import inspect
import re
import sys

import pytest

from tests.triton.child import run_module

OFF = dict(ADD=False, NORM=False, BETA=False, Y=False, YF=False, XO=False, RSTD=False, QUANT=0,
           Q1=False, Q2=False, S1=False, S2=False, Z1=False, Z2=False, DIV=True, F16=False,
           DST=0, GROUPS=False)
# the switches each launcher of op_sdk/triton_kernels/norm.py sets (norm._launch's keywords)
ROWS = {
    "rms_norm": dict(NORM=True, Y=True, RSTD=True),
    "add_rms_norm": dict(ADD=True, NORM=True, Y=True, RSTD=True, XO=True),
    "add_rms_norm_cast": dict(ADD=True, NORM=True, Y=True, YF=True, RSTD=True, XO=True),
    "add_rms_norm_quant_div": dict(ADD=True, NORM=True, XO=True, QUANT=1, Q1=True, Z1=True),
    "add_rms_norm_quant_mul_two_beta": dict(ADD=True, NORM=True, XO=True, BETA=True, QUANT=1,
                                            Q1=True, Q2=True, Z1=True, Z2=True, DIV=False),
    "add_rms_norm_dynamic_quant": dict(ADD=True, NORM=True, XO=True, BETA=True, QUANT=2,
                                       Q1=True, Q2=True, S1=True, S2=True),
    "dynamic_quant": dict(QUANT=2, Q1=True, S1=True),
    "rms_norm_quant": dict(NORM=True, BETA=True, QUANT=1, Q1=True, Z1=True, DIV=False, F16=True),
}


# a tiled kernel's tile (``_common.tiled``: 2048 elements, 4 rows of 512 here)
TILE = {"BLOCK_R": 4, "BLOCK_C": 512}


def _compile(fn, types, constexprs):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    params = list(inspect.signature(fn.fn).parameters)
    sig = {p: "constexpr" if p in constexprs else types[p] for p in params}
    src = ASTSource(fn, sig, constexprs={(params.index(k),): v for k, v in constexprs.items()})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32))


def _rows_types(x):
    t = {p: f"*{x}" for p in ("x1_ptr", "x2_ptr", "g_ptr", "b_ptr", "y_ptr", "xo_ptr")}
    t.update({"yf_ptr": "*fp32", "rstd_ptr": "*fp32", "s1_ptr": "*fp32", "z1_ptr": "*i32",
              "q1_ptr": "*i8", "c1_ptr": "*fp32", "s2_ptr": "*fp32", "z2_ptr": "*i32",
              "q2_ptr": "*i8", "c2_ptr": "*fp32", "rows": "i32", "n": "i32", "nf": "fp32",
              "eps": "fp32", "finv": "fp32", "programs": "i32", "grp_ptr": "*i64"})
    return t


def _compile_mx(x, code, alg, rmode, norm, add, beta, scalars="fp32"):
    from op_sdk.ops._mx import kernel_form
    from op_sdk.triton_kernels import mx

    dst, alg, rmode, emax, top = kernel_form(code, alg, rmode)
    types = {p: f"*{x}" for p in ("x1_ptr", "x2_ptr", "g_ptr", "b_ptr", "xo_ptr")}
    types.update({"y_ptr": "*u8", "s_ptr": "*u8", "rstd_ptr": "*fp32", "rows": "i32",
                  "n": "i32", "nf": scalars, "eps": scalars, "inv_max_bits": "i32",
                  "programs": "i32"})
    return _compile(mx._mx_rows, types,
                    {"NORM": norm, "ADD": add, "BETA": beta, "DST": dst, "ALG": alg,
                     "ROUND_MODE": rmode, "EMAX": emax, "TOP": top,
                     "BLOCKS": 128})


def _mx_problems(k):
    """_problems, and no flush of subnormals (the MX values scaled by 2^(127 - code) can be
    fp32 subnormals, and the contract keeps them)."""
    ptx = k.asm["ptx"]
    return _problems(ptx) + (["subnormals flushed (.ftz)"] if ".ftz" in ptx else [])


def _contractible(ptx):
    """Whether a ``mul.f32`` result feeds an ``add.f32`` / ``sub.f32`` directly: ptxas may
    contract such a pair into one fma (PTX ISA: mul / add without a rounding modifier)."""
    products = set()
    for op, dst, srcs in re.findall(r"\b(mul|add|sub)\.f32\s+(%\w+),\s*([^;]*);", ptx):
        if op == "mul":
            products.add(dst)
        elif products & {a.strip() for a in srcs.split(",")}:
            return True
    return False


def _fp64_arithmetic(ptx):
    """fp64 instructions other than the conversion of an fp64 argument to fp32."""
    ops = set(re.findall(r"\b[a-z]+(?:\.[a-z0-9]+)*\.f64\b", ptx)) - {"cvt.rn.f32.f64"}
    return [f"fp64 arithmetic ({', '.join(sorted(ops))})"] if ops else []


def _problems(ptx, rne=None):
    out = []
    if re.search(r"\b(div\.full|div\.approx|sqrt\.approx|rcp\.approx)", ptx):
        out.append("an approximate division or square root")
    if re.search(r"\bfma\.", ptx) or _contractible(ptx):
        out.append("a fused (or fusable) multiply-add")
    if rne is not None and ("0f4B400000" in ptx) != rne:
        out.append("the int8 stores' round-half-to-even adds " + ("missing" if rne else "present"))
    return out


def main() -> int:
    import torch

    from op_sdk.triton_kernels import norm, quant_matmul, quantize, rotary, swiglu

    failed = 0
    for dtype in ("bf16", "fp16", "fp32"):
        for name, switches in ROWS.items():
            k = _compile(norm._rows, _rows_types(dtype), dict(OFF, **switches, BLOCK=4096))
            bad = _problems(k.asm["ptx"], rne=switches.get("QUANT", 0) > 0)
            print(f"_rows {name} {dtype}: {', '.join(bad) or 'ok'}")
            failed += bool(bad)
        # the dynamic branch's int4 (packed int32) and both branches' float8 / HiFloat8 (uint8
        # bits) outputs
        for name, dst, q in (("dynamic_quant_int4", 1, "*i32"), ("dynamic_quant_e4m3", 2, "*u8"),
                             ("dynamic_quant_hif8", 4, "*u8"),
                             ("add_rms_norm_quant_div_hif8", 4, "*u8"),
                             ("add_rms_norm_dynamic_quant_e5m2", 3, "*u8"),
                             ("add_rms_norm_dynamic_quant_int4", 1, "*i32"),
                             ("add_rms_norm_quant_div_e4m3", 2, "*u8"),
                             ("add_rms_norm_quant_mul_two_beta_e5m2", 3, "*u8"),
                             ("rms_norm_quant_int4", 1, "*i32"),
                             ("dynamic_quant_moe", 0, "*i8")):
            switches = dict(ROWS[name.rsplit("_", 1)[0]], DST=dst, GROUPS=name.endswith("moe"))
            k = _compile(norm._rows, dict(_rows_types(dtype), q1_ptr=q, q2_ptr=q),
                         dict(OFF, **switches, BLOCK=4096))
            bad = _problems(k.asm["ptx"], rne=dst < 2)  # (float8: bit arithmetic)
            print(f"_rows {name} {dtype}: {', '.join(bad) or 'ok'}")
            failed += bool(bad)
        # npu_dynamic_quant per tensor / per channel: the amax pass and the quantising pass
        x = f"*{dtype}"
        for per_channel in (True, False):
            flags = {"HAS_M": True, "M_ROW": per_channel, "PER_CHANNEL": per_channel,
                     "BLOCK": 4096}
            k = _compile(norm._amax_parts, {"x_ptr": x, "m_ptr": x, "p_ptr": "*i32", "R": "i32",
                                            "n": "i32", "chunk": "i32", "chunks": "i32"}, flags)
            bad = _problems(k.asm["ptx"])
            print(f"_amax_parts {per_channel} {dtype}: {', '.join(bad) or 'ok'}")
            failed += bool(bad)
            for dst, q in ((0, "*i8"), (1, "*i32"), (2, "*u8"), (4, "*u8")):
                k = _compile(norm._by_amax, {"x_ptr": x, "m_ptr": x, "a_ptr": "*fp32", "q_ptr": q,
                                             "c_ptr": "*fp32", "R": "i32", "n": "i32",
                                             "chunk": "i32", "finv": "fp32"},
                             dict(flags, DST=dst))
                bad = _problems(k.asm["ptx"], rne=dst < 2)
                print(f"_by_amax {per_channel} {dst} {dtype}: {', '.join(bad) or 'ok'}")
                failed += bool(bad)
        for fn, types in ((swiglu._swiglu, {"x_ptr": x, "y_ptr": x}),
                          (swiglu._swiglu_backward, {"g_ptr": x, "x_ptr": x, "dx_ptr": x})):
            k = _compile(fn, dict(types, outer="i64", inner="i64"), dict(TILE, WIDE=True))
            bad = _problems(k.asm["ptx"])
            print(f"{fn.__name__} {dtype}: {', '.join(bad) or 'ok'}")
            failed += bool(bad)
        for interleaved in (True, False):
            k = _compile(swiglu._clipped_swiglu,
                         {"x_ptr": x, "y_ptr": x, "pre": "i64", "half": "i64", "rows": "i64",
                          "neg_alpha": "fp32", "limit": "fp32", "bias": "fp32"},
                         dict(TILE, INTERLEAVED=interleaved, WIDE=True))
            bad = _problems(k.asm["ptx"])
            print(f"_clipped_swiglu {interleaved} {dtype}: {', '.join(bad) or 'ok'}")
            failed += bool(bad)
        for q, per, has_z, div_mode in (("i8", True, True, True), ("u8", False, False, False)):
            for last in (True, False):
                k = _compile(quantize._quantize, {"x_ptr": x, "s_ptr": "*fp32", "z_ptr": "*i32",
                                                  "q_ptr": f"*{q}", "rows": "i64", "cols": "i64",
                                                  "channels": "i64", "lo": "fp32", "hi": "fp32"},
                             {"S_PER": per, "Z_PER": per, "HAS_Z": has_z, "DIV": div_mode,
                              "LAST": last, **TILE, "WIDE": True})
                bad = _problems(k.asm["ptx"], rne=True)
                print(f"_quantize {q} {last} {dtype}: {', '.join(bad) or 'ok'}")
                failed += bool(bad)
        for mode in range(4):
            k = _compile(rotary._rotary, {"x_ptr": x, "r1_ptr": x, "r2_ptr": x, "y_ptr": x,
                                          "rows": "i64", "s1": "i64", "s2": "i64",
                                          "st0": "i64", "st1": "i64", "st2": "i64", "st3": "i64"},
                         {"MODE": mode, "D": 128, "BLOCK_R": 16, "BLOCK_C": 64, "WIDE": True})
            bad = _problems(k.asm["ptx"])
            print(f"_rotary {mode} {dtype}: {', '.join(bad) or 'ok'}")
            failed += bool(bad)
        # npu_dtype_cast: to a float (through fp32), to an integer (NaN 0), to bool, int -> int
        from op_sdk.triton_kernels import cast

        for src, dst, kind in ((x, "*fp16", 0), (x, "*i8", 1), (x, "*i1", 2), ("*i64", x, 0),
                               ("*i32", "*u8", 1)):
            k = _compile(cast._cast, {"x_ptr": src, "y_ptr": dst, "n": "i32"},
                         {"SRC_FLOAT": src == x, "DST": kind, "BLOCK": cast.BLOCK,
                          "WIDE": False})
            bad = _problems(k.asm["ptx"])
            print(f"_cast {src} {dst} {dtype}: {', '.join(bad) or 'ok'}")
            failed += bool(bad)
        if dtype == "fp32":  # npu_transpose_batchmatmul's epilogue (its product is fp32)
            from op_sdk.triton_kernels import bmm

            k = _compile(bmm._requant, {"acc_ptr": "*fp32", "s_ptr": "*fp32", "q_ptr": "*i8",
                                        "rows": "i32", "m": "i32", "n": "i32"},
                         {**TILE, "WIDE": False})
            bad = _problems(k.asm["ptx"], rne=True)
            print(f"_requant: {', '.join(bad) or 'ok'}")
            failed += bool(bad)
        for mode, p in ((0, "*fp32"), (1, x), (2, "*fp32"), (3, x)):
            k = _compile(rotary._rotary_backward,
                         {"g_ptr": x, "x_ptr": x, "r1_ptr": x, "r2_ptr": x, "dx_ptr": x,
                          "pa_ptr": p, "pb_ptr": p, "rows": "i64", "s1": "i64", "s2": "i64",
                          "st0": "i64", "st1": "i64", "st2": "i64", "st3": "i64"},
                         {"MODE": mode, "D": 128, "BLOCK_R": 16, "BLOCK_C": 64, "WIDE": True})
            bad = _problems(k.asm["ptx"])
            print(f"_rotary_backward {mode} {p} {dtype}: {', '.join(bad) or 'ok'}")
            failed += bool(bad)
        k = _compile(rotary._rms_norm_rope, {"x_ptr": x, "g_ptr": "*fp32", "r1_ptr": x, "r2_ptr": x,
                                             "y_ptr": x, "rows": "i64", "s1": "i64", "s2": "i64",
                                             "xt0": "i64", "xt1": "i64", "xt2": "i64", "st0": "i64",
                                             "st1": "i64", "st2": "i64", "st3": "i64", "eps": "fp32"},
                     {"D": 128, "BLOCK_R": 16, "BLOCK_C": 64, "WIDE": True})
        bad = _problems(k.asm["ptx"])
        print(f"_rms_norm_rope {dtype}: {', '.join(bad) or 'ok'}")
        failed += bool(bad)
        for left, smooth, offset, dynamic, groups in (
                (True, 0, 0, True, False), (False, 1, 0, True, False),
                (True, 1, 1, False, False), (False, 2, 2, False, False),
                (True, 1, 0, True, True), (False, 2, 2, False, True)):
            k = _compile(swiglu._swiglu_quant, {"x_ptr": x, "sm_ptr": "*fp32", "of_ptr": "*fp32",
                                                "g_ptr": "*i64", "q_ptr": "*i8",
                                                "scale_ptr": "*fp32", "rows": "i32", "n": "i32",
                                                "programs": "i32"},
                         {"LEFT": left, "SMOOTH": smooth, "OFFSET": offset, "DYNAMIC": dynamic,
                          "GROUPS": groups, "BLOCK": 2048})
            bad = _problems(k.asm["ptx"], rne=True)
            print(f"_swiglu_quant {left} {smooth} {offset} {dynamic} {groups} {dtype}: "
                  f"{', '.join(bad) or 'ok'}")
            failed += bool(bad)
    # npu_kv_rmsnorm_rope_cache: float / int8 caches, row-major / FRACTAL_NZ
    from op_sdk.triton_kernels import kv_cache

    for dtype in ("bf16", "fp16"):
        x = f"*{dtype}"
        for quant, nz in ((False, False), (False, True), (True, False), (True, True)):
            cache, scale = ("*i8", "*fp32") if quant else (x, x)
            types = {"kv_ptr": x, "g_ptr": x, "r1_ptr": x, "r2_ptr": x, "dst_ptr": "*i64",
                     "ks_ptr": scale, "vs_ptr": scale, "kr_ptr": x, "ckv_ptr": x,
                     "kc_ptr": cache, "vc_ptr": cache, "rows": "i32", "s": "i32", "ct0": "i32",
                     "ct2": "i32", "ct3": "i32", "inv_dv": "fp32", "eps": "fp32", "bs": "i32"}
            k = _compile(kv_cache._kv_rmsnorm_rope_cache, types,
                         {"DV": 512, "DK": 64, "BLOCK_R": 4, "BLOCK_V": 512, "BLOCK_P": 32,
                          "K_QUANT": quant, "V_QUANT": quant, "NZ": nz, "K_C0": 32 if quant else 16,
                          "V_C0": 32 if quant else 16, "WIDE": False})
            bad = _problems(k.asm["ptx"], rne=quant)
            print(f"_kv_rmsnorm_rope_cache {quant} {nz} {dtype}: {', '.join(bad) or 'ok'}")
            failed += bool(bad)
    # npu_qkv_rms_norm_rope_cache: float / int8 caches (with offsets), q / k / v out or not
    for dtype in ("bf16", "fp16"):
        x = f"*{dtype}"
        for quant, off, out in ((False, False, False), (False, False, True), (True, False, False),
                                (True, True, True)):
            cache, scale = ("*i8", "*fp32") if quant else (x, x)
            types = {**{p: x for p in ("x_ptr", "qg_ptr", "kg_ptr", "c_ptr", "s_ptr", "qo_ptr",
                                       "qr_ptr", "kr_ptr", "vr_ptr")},
                     "dst_ptr": "*i64", "ks_ptr": scale, "vs_ptr": scale, "ko_ptr": scale,
                     "vo_ptr": scale, "kc_ptr": cache, "vc_ptr": cache, "rows": "i32",
                     "per": "i32", "ct0": "i32", "ct1": "i32", "eps": "fp32", "bs": "i32"}
            k = _compile(kv_cache._qkv_rms_norm_rope_cache, types,
                         {"NQ": 16, "NK": 2, "NV": 2, "D": 128, "BLOCK_R": 32, "BLOCK_P": 64,
                          "K_QUANT": quant, "V_QUANT": quant, "K_OFF": off, "V_OFF": off,
                          "OUT_QKV": out, "K_C0": 32 if quant else 16, "V_C0": 32 if quant else 16,
                          "WIDE": False})
            bad = _problems(k.asm["ptx"], rne=quant)
            print(f"_qkv_rms_norm_rope_cache {quant} {off} {out} {dtype}: {', '.join(bad) or 'ok'}")
            failed += bool(bad)
    # npu_fused_infer_attention_score: the flash-attention kernel's forms (it compiles; its
    # arithmetic is the dtype's tolerance, not the separately rounded products checked above)
    from op_sdk.triton_kernels import attention

    att_ints = ("n1", "group", "band_lo", "band_hi", "block_size", "D", "DV", "DR")
    att_strides = [p for p in inspect.signature(attention._attention.fn).parameters
                   if re.fullmatch(r"s[a-z]{1,2}[bsndkc0-9]", p) or p in ("stb", "stc")]
    for dtype in ("bf16", "fp16"):
        x = f"*{dtype}"
        types = {"q_ptr": x, "k_ptr": x, "v_ptr": x, "qr_ptr": x, "kr_ptr": x, "out_ptr": x,
                 "lse_ptr": "*fp32", "mask_ptr": "*u8", "pse_ptr": x, "sink_ptr": x,
                 "table_ptr": "*i32", "q_start_ptr": "*i32", "q_len_ptr": "*i32",
                 "k_start_ptr": "*i32", "k_len_ptr": "*i32", "scale": "fp32",
                 **{p: "i32" for p in att_ints + tuple(att_strides)}}
        for rope, mask, band, shift, pse, sink, paged in (
                (False, False, False, False, False, False, False),
                (False, True, True, False, True, False, False),
                (True, False, True, True, False, False, True),
                (False, False, True, True, False, True, False)):
            k = _compile(attention._attention, types,
                         {"BLOCK_M": attention.BLOCK_M, "BLOCK_N": attention.BLOCK_N,
                          "BLOCK_D": 128, "BLOCK_DV": 128, "BLOCK_DR": 64, "ROPE": rope,
                          "MASK": mask, "BAND": band, "SHIFT": shift, "PSE": pse, "SINK": sink,
                          "PAGED": paged, "F32_DOT": False})
            ok = ".version" in k.asm["ptx"]
            print(f"_attention {rope} {mask} {band} {shift} {pse} {sink} {paged} {dtype}: "
                  f"{'ok' if ok else 'no PTX'}")
            failed += not ok
    # npu_dequant_swiglu_quant: int32 x with its scales and either bias, float x; each mode
    dq_types = {"ws_ptr": "*fp32", "act_ptr": "*fp32", "bi_ptr": "*i32", "bf_ptr": "*fp32",
                "qs_ptr": "*fp32", "qo_ptr": "*fp32", "q_ptr": "*i8", "scale_ptr": "*fp32",
                "rows": "i32", "n": "i32", "programs": "i32", "neg_alpha": "fp32",
                "limit": "fp32", "glu_bias": "fp32", "g_ptr": "*i64", "ws_g": "i32",
                "bi_g": "i32", "qs_g": "i32", "qo_g": "i32"}
    for x, mode, left, dq, bias, qs, qo, dynamic, groups in (
            ("i32", 0, True, True, 1, 1, 0, True, False),
            ("i32", 1, False, True, 2, 0, 0, True, False),
            ("i32", 2, True, True, 0, 1, 1, False, False),
            ("i32", 0, False, True, 2, 0, 2, False, False),
            ("bf16", 1, True, False, 0, 2, 2, False, False),
            ("fp16", 2, False, False, 0, 1, 0, True, False),
            ("i32", 0, True, True, 1, 1, 0, True, True),
            ("i32", 1, False, True, 2, 2, 2, False, True)):
        k = _compile(swiglu._dequant_swiglu_quant, dict(dq_types, x_ptr=f"*{x}"),
                     {"MODE": mode, "LEFT": left, "WS": dq, "ACT": dq, "BIAS": bias, "QS": qs,
                      "QO": qo, "DYNAMIC": dynamic, "GROUPS": groups, "BLOCK": 2048})
        bad = _problems(k.asm["ptx"], rne=True)
        print(f"_dequant_swiglu_quant {x} {mode} {bias} {qs} {qo} {dynamic} {groups}: "
              f"{', '.join(bad) or 'ok'}")
        failed += bool(bad)
    # the MX operators: npu_dynamic_mx_quant's destinations, scale_algs and float4 round
    # modes, then the fused norms (op_sdk/triton_kernels/mx.py)
    for dtype in ("bf16", "fp16", "fp32"):
        for code, alg, rmode in ((292, 0, "rint"), (291, 1, "rint"), (296, 0, "rint"),
                                 (297, 0, "floor")):
            bad = _mx_problems(_compile_mx(dtype, code, alg, rmode, False, False, False))
            print(f"_mx_rows {dtype} {code} {alg} {rmode}: {', '.join(bad) or 'ok'}")
            failed += bool(bad)
    for dtype in ("bf16", "fp16"):
        for code, alg, rmode, add, beta in ((292, 1, "rint", False, False),
                                            (296, 0, "round", True, True)):
            bad = _mx_problems(_compile_mx(dtype, code, alg, rmode, True, add, beta))
            print(f"_mx_rows norm {dtype} {code} {alg} {rmode} {add}: {', '.join(bad) or 'ok'}")
            failed += bool(bad)
    k = _compile_mx("bf16", 292, 0, "rint", True, True, True, scalars="fp64")
    bad = _mx_problems(k) + _fp64_arithmetic(k.asm["ptx"])
    print(f"_mx_rows fp64 scalars: {', '.join(bad) or 'ok'}")
    failed += bool(bad)
    # npu_quant_matmul's int8 GEMM with each epilogue (decode and prefill tiles)
    qmm_types = {"a_ptr": "*i8", "w_ptr": "*i8", "s_ptr": "*fp32", "p_ptr": "*fp32",
                 "o_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32", "rows_per_batch": "i32",
                 "sab": "i32", "sam": "i32", "sak": "i32", "swb": "i32", "swk": "i32",
                 "swn": "i32"}
    cpu = torch.device("cpu")  # the tiles for an H100's 132 SMs
    # (and the A4W4 form: int32-packed x1 and weight, along n (1) or along k (2))
    for out, y, bias, cfg, pack in (
            (0, "*bf16", ("*bf16", 2), quant_matmul.tiles(1, 4096, 4096, cpu), 0),
            (1, "*i32", ("*i32", 1), quant_matmul.tiles(512, 4096, 2048, cpu), 0),
            (2, "*i8", ("*i32", 1), quant_matmul.tiles(4096, 4096, 4096, cpu), 0),
            (0, "*fp16", ("*i32", 1), quant_matmul.tiles(1, 4096, 4096, cpu), 1),
            (0, "*bf16", ("*bf16", 2), quant_matmul.tiles(4096, 4096, 4096, cpu), 2),
            (0, "*bf16", ("*i32", 0), quant_matmul.tiles(16, 4096, 4096, cpu), "a8w4"),
            (0, "*fp16", ("*i32", 0), quant_matmul.tiles(512, 4096, 4096, cpu), "a4w4_group"),
            (0, "*bf16", ("*fp32", 2), quant_matmul.tiles(4096, 4096, 4096, cpu), "g-b"),
            (0, "*fp16", ("*fp32", 0), quant_matmul.tiles(16, 4096, 4096, cpu), "fp8e4nv g-b"),
            (0, "*bf16", ("*fp32", 0), quant_matmul.tiles(4096, 4096, 4096, cpu), "fp8e5 b-b")):
        # the grouped forms (a scale row per 256 of k): A8W4 (int8 x1, int4 weights along n),
        # per-group A4W4 (int4 x1, weights along k, float16 zero points); int8 G-B (a scale
        # per row's group of 128 of k and per 128 x 128 block, a float bias)
        a8w4, a4g = pack == "a8w4", pack == "a4w4_group"
        fp8 = pack.split()[0] if isinstance(pack, str) and pack.startswith("fp8") else None
        gb = pack == "g-b" or fp8 is not None
        flags = dict(S_PER=True, HAS_P=out == 0, BIAS=bias[1],
                     BIAS_BATCH=out == 0 and not pack, O_PER=2 if out == 2 or a8w4 else 0,
                     OUT=out, PACK_A=pack in (1, 2) or a4g,
                     PACK_W=1 if a8w4 else 2 if a4g else 0 if gb else pack,
                     GROUP=quant_matmul.GROUP_K if a8w4 or a4g else
                     quant_matmul.BLOCK_K_GB if gb else 0, ZERO_W=a4g, BLOCK_SCALE=gb,
                     FLOAT_IN=fp8 is not None,
                     ROW_GROUP=quant_matmul.BLOCK_K_GB if str(pack).endswith("b-b") else 1)
        cfg = {k: v for k, v in cfg.items() if k.startswith("BLOCK")}
        packed = ({"w_ptr": "*i32"} if a8w4 else {} if gb or not pack
                  else {"a_ptr": "*i32", "w_ptr": "*i32"})
        if a4g:
            packed["o_ptr"] = "*fp16"
        if fp8:
            packed.update(a_ptr=f"*{fp8}", w_ptr=f"*{fp8}")
        k = _compile(quant_matmul._qmm, dict(qmm_types, b_ptr=bias[0], y_ptr=y, **packed),
                     dict(flags, **cfg, GROUP_M=8, WIDE=False))
        ptx = k.asm["ptx"]
        bad = _problems(ptx, rne=out == 2)
        if "mma" not in ptx:
            bad.append("no tensor-core product")
        print(f"_qmm out {out} pack {pack}: {', '.join(bad) or 'ok'}")
        failed += bool(bad)
    # npu_scatter_nd_update's row copy (the values as their bits)
    from op_sdk.triton_kernels import scatter

    k = _compile(scatter._scatter_rows, {"out_ptr": "*i16", "upd_ptr": "*i16", "rows_ptr": "*i64",
                                         "inner": "i64"},
                 {"BLOCK": scatter.BLOCK, "CHUNKS": scatter._CHUNKS})
    bad = _problems(k.asm["ptx"])
    print(f"_scatter_rows: {', '.join(bad) or 'ok'}")
    failed += bool(bad)
    # Inductor's launcher passes Python floats as fp64 (user-defined kernels under
    # torch.compile): the kernels round in fp32 all the same
    fp64 = {"nf": "fp64", "eps": "fp64", "finv": "fp64"}
    k = _compile(norm._rows, dict(_rows_types("bf16"), **fp64),
                 dict(OFF, **ROWS["add_rms_norm_quant_div"], BLOCK=4096))
    bad = _problems(k.asm["ptx"], rne=True) + _fp64_arithmetic(k.asm["ptx"])
    print(f"_rows add_rms_norm_quant_div fp64 scalars: {', '.join(bad) or 'ok'}")
    failed += bool(bad)
    k = _compile(quantize._quantize, {"x_ptr": "*bf16", "s_ptr": "*fp32", "z_ptr": "*i32",
                                      "q_ptr": "*i8", "rows": "i64", "cols": "i64",
                                      "channels": "i64", "lo": "fp64", "hi": "fp64"},
                 {"S_PER": True, "Z_PER": True, "HAS_Z": True, "DIV": True, "LAST": False,
                  **TILE, "WIDE": True})
    bad = _problems(k.asm["ptx"], rne=True) + _fp64_arithmetic(k.asm["ptx"])
    print(f"_quantize fp64 scalars: {', '.join(bad) or 'ok'}")
    failed += bool(bad)
    # tensors under 2^31 elements: 32-bit indices (the launchers' usual specialisation)
    i32 = {"outer": "i32", "inner": "i32"}
    narrow = (
        ("_swiglu", swiglu._swiglu, {"x_ptr": "*bf16", "y_ptr": "*bf16", **i32}, TILE),
        ("_swiglu_backward", swiglu._swiglu_backward,
         {"g_ptr": "*bf16", "x_ptr": "*bf16", "dx_ptr": "*bf16", **i32}, TILE),
        ("_quantize", quantize._quantize,
         {"x_ptr": "*bf16", "s_ptr": "*fp32", "z_ptr": "*i32", "q_ptr": "*i8", "rows": "i32",
          "cols": "i32", "channels": "i32", "lo": "fp32", "hi": "fp32"},
         {"S_PER": True, "Z_PER": True, "HAS_Z": True, "DIV": False, "LAST": False, **TILE}),
        ("_rotary", rotary._rotary,
         {"x_ptr": "*bf16", "r1_ptr": "*bf16", "r2_ptr": "*bf16", "y_ptr": "*bf16",
          "rows": "i32", "s1": "i32", "s2": "i32", "st0": "i32", "st1": "i32", "st2": "i32",
          "st3": "i32"},
         {"MODE": 2, "D": 96, "BLOCK_R": 16, "BLOCK_C": 64}),
        ("_rms_norm_rope", rotary._rms_norm_rope,
         {"x_ptr": "*bf16", "g_ptr": "*bf16", "r1_ptr": "*bf16", "r2_ptr": "*bf16", "y_ptr": "*bf16",
          "rows": "i32", "s1": "i32", "s2": "i32", "xt0": "i32", "xt1": "i32", "xt2": "i32",
          "st0": "i32", "st1": "i32", "st2": "i32", "st3": "i32", "eps": "fp32"},
         {"D": 128, "BLOCK_R": 16, "BLOCK_C": 64}),
    )
    for name, fn, types, switches in narrow:
        k = _compile(fn, types, dict(switches, WIDE=False))
        ptx = k.asm["ptx"]
        bad = _problems(ptx, rne=True if name == "_quantize" else None)
        if re.search(r"\b(div|rem)\.s64", ptx):
            bad.append("64-bit index division")
        print(f"{name} 32-bit indices: {', '.join(bad) or 'ok'}")
        failed += bool(bad)
    return 1 if failed else 0


def test_kernels_compile_for_sm90_with_the_contracts_arithmetic():
    pytest.importorskip("triton")
    r = run_module(__file__)
    assert r.returncode == 0 and r.stdout.count(": ok") == 236, r.stdout + r.stderr[-4000:]


if __name__ == "__main__":
    sys.exit(main())
