"""``op-sdk new-op NAME --schema "..."``: the deliverables of a new fused operator, written
as a starting point that builds and passes its tests before any edit.

From the schema alone op_sdk cannot know what the operator computes, so the files start
from the simplest computation every schema can have: each output is a copy of the first
tensor input (its shape and dtype). Every deliverable implements that same computation, so
the generated tests pass as written; the author then replaces it, deliverable by
deliverable, with the operator's real computation, and the tests keep them in agreement:

* ``<name>.py``: the schema, its reference (the ground truth), fake / Meta function, CPU
  kernel, the GE converter declared (``ge=GeIr(...)``), and, for an in-place schema
  (``Tensor(a!)``), its functional twin and functionalization (``functional=``);
* ``ascendc/<name>/``: the Ascend C kernel in CANN's layout (op_host tiling + def +
  infershape, op_kernel, op_graph prototype) with a CMakeLists.txt for CANN's build, and
  ``ascendc/driver.cpp``, which runs the kernel on op_sdk's CPU model of the Ascend C API;
* ``npu/<name>_opplugin.cpp``: the OpPlugin eager binding (``EXEC_NPU_CMD_EXT`` of
  ``aclnn<Name>``), for a build with torch_npu;
* ``test_<name>.py``: the checks (reference vs. CPU kernel and fake; the Ascend C kernel on
  the CPU model vs. the reference over odd sizes and multi-block splits; the GE converter
  against its prototype; the functional twin), run with pytest.
"""

from __future__ import annotations

import keyword
import os
import re
import textwrap

import torch

__all__ = ["plan", "write", "NewOpError"]


class NewOpError(ValueError):
    pass


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.strip("_").split("_") if p)


def _is_tensor(t) -> bool:
    if isinstance(t, torch.OptionalType):
        t = t.getElementType()
    return t.kind() == "TensorType"


def _py_default(arg) -> str | None:
    if not arg.has_default_value():
        return None
    v = arg.default_value
    return repr(v)


def plan(name: str, schema: str, namespace: str) -> dict:
    """What the generator needs from the schema; raises NewOpError naming the rule."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or keyword.iskeyword(name):
        raise NewOpError(f"new-op: NAME {name!r} must be a lower-case identifier "
                         f"(letters, digits, underscores)")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", namespace):
        raise NewOpError(f"new-op: --namespace {namespace!r} must be a lower-case identifier")
    try:
        s = torch._C.parse_schema(schema)
    except RuntimeError as e:
        raise NewOpError(f"new-op: --schema does not parse: {str(e).splitlines()[0]}") from None
    if s.name != name:
        raise NewOpError(f"new-op: the schema names the operator {s.name!r}, NAME is {name!r}")
    args = list(s.arguments)
    if not args or args[0].type.kind() != "TensorType":
        raise NewOpError("new-op: the schema's first argument must be a Tensor (the generated "
                         "kernels start as copies of it)")
    if not s.returns or not all(r.type.kind() == "TensorType" for r in s.returns):
        raise NewOpError("new-op: the schema must return one or more Tensors")
    for a in args[1:]:
        if a.alias_info is not None:
            raise NewOpError(f"new-op: --schema: only the first argument may be written in "
                             f"place, not '{a.name}'")
    inplace = any(a.alias_info is not None and a.alias_info.is_write for a in args)
    if inplace:
        if not name.endswith("_") or args[0].alias_info is None or len(s.returns) != 1:
            raise NewOpError("new-op: --schema: an in-place schema writes its first argument "
                             "(Tensor(a!)), returns it, and its name ends with '_'")
    tensors = [a.name for a in args if _is_tensor(a.type)]
    return {"name": name, "namespace": namespace, "schema": schema, "parsed": s,
            "camel": _camel(name), "inplace": inplace,
            "functional": name[:-1] if inplace else None,
            "functional_schema": re.sub(r"\(\w!?\)", "", schema.replace(f"{name}(", f"{name[:-1]}(", 1))
            if inplace else None,
            "tensors": tensors, "args": args, "returns": list(s.returns),
            "first": args[0].name}


def _files(p: dict) -> dict[str, str]:
    name, ns, first = p["name"], p["namespace"], p["first"]
    base = p["functional"] or name  # the operator whose kernels are written
    kname = base  # Ascend C / binding / IR are those of the functional operator
    kcamel = _camel(kname)
    n_out = len(p["returns"])
    params = ", ".join(a.name if _py_default(a) is None else f"{a.name}={_py_default(a)}"
                       for a in p["args"])
    call = ", ".join(a.name for a in p["args"])
    others = [a.name for a in p["args"][1:]]
    outs = ", ".join(f"{first}.clone()" for _ in range(n_out))
    outs_empty = ", ".join(f"torch.empty_like({first})" for _ in range(n_out))
    ret = outs if n_out == 1 else f"({outs})"
    ret_empty = outs_empty if n_out == 1 else f"({outs_empty})"
    unpack = ""
    out_names = [f"y{i}" if n_out > 1 else "y" for i in range(n_out)]
    files = {}

    body = (f"    del {', '.join(others)}  # not used by the starting computation\n"
            if others else "")
    lines = []
    if p["inplace"]:
        lines += [f"FUNCTIONAL_SCHEMA = {p['functional_schema']!r}", f"SCHEMA = {p['schema']!r}"]
    else:
        lines += [f"SCHEMA = {p['schema']!r}"]
    lines += ["", "",
              f"def reference({params}):",
              f'    """The ground truth (plain PyTorch). Starts as: every output a copy of '
              f"'{first}'.\"\"\"",
              body + f"    return {ret}{unpack}", "", "",
              f"def fake({params}):",
              '    """Shapes and dtypes only (FakeTensor / Meta)."""',
              body + f"    return {ret_empty}{unpack}", "", "",
              f"def cpu_kernel({params}):",
              '    """The CPU kernel (replace with a faster one; the tests compare it with the '
              'reference)."""',
              f"    return reference({call})", "", ""]
    schema_var = "FUNCTIONAL_SCHEMA" if p["inplace"] else "SCHEMA"
    lines += [f"{base} = op_sdk.define_op(",
              f"    {schema_var}, namespace={ns!r}, reference=reference, fake=fake,",
              '    kernels={"cpu": cpu_kernel},',
              f"    ge=GeIr({kcamel!r}, outputs={tuple(out_names)!r}),", ")"]
    if p["inplace"]:
        lines += ["# the in-place form: kernels, fake and functionalization derived from the twin",
                  f"{name} = op_sdk.define_op(SCHEMA, namespace={ns!r}, reference=reference,",
                  f"                          functional={base!r})"]
    ops_py = "\n".join(lines) + "\n"
    files[f"{name}.py"] = (
        f'"""{ns}::{name}: a fused operator of op_sdk, plugin style (generated by `op-sdk '
        f'new-op`).\n\nImporting this file defines torch.ops.{ns}.{name}. Its deliverables:'
        f' this file (schema, reference,\nfake, CPU kernel, GE converter), ascendc/{kname}/ '
        f'(Ascend C kernel), npu/{kname}_opplugin.cpp\n(OpPlugin binding), test_{name}.py.\n"""'
        f"\n\nimport torch\n\nimport op_sdk\nfrom op_sdk.converters import GeIr\n"
        + "\n\n" + ops_py)

    # -- Ascend C ------------------------------------------------------------------------
    guard = f"OPSDK_{kname.upper()}"
    files[f"ascendc/{kname}/op_host/{kname}_tiling.h"] = textwrap.dedent(f'''\
        // Tiling of {kcamel}: rows of numCols elements (the last dim) split over the vector
        // cores; a tile holds rowsPerLoop whole rows (key 1) or one chunk of a row (key 2).
        #pragma once

        #include <cstdint>

        #include "common/tiling_common.h"

        struct {kcamel}TilingData {{
            uint64_t numRows;
            uint32_t numCols;
            uint32_t blockDim;
            uint64_t rowsPerBlock;
            uint32_t formerBlocks;
            uint32_t tilingKey;  // TILING_KEY_WHOLE_ROW or TILING_KEY_SPLIT_ROW (0: none fits)
            uint32_t rowsPerLoop;
            uint32_t chunkCols;
            uint32_t numChunks;
            uint32_t lastChunkCols;
        }};

        #ifndef __CCE_AICORE__
        // xSize: element bytes of {first}; the unified buffer holds the input and {n_out} output
        // tile(s), each double-buffered.
        inline {kcamel}TilingData Tiling{kcamel}(uint64_t numRows, uint32_t numCols, uint32_t xSize,
                                                uint32_t coreNum, uint32_t ubSize)
        {{
            using namespace opsdk_ascendc;
            {kcamel}TilingData t{{}};
            BlockSplit s = SetRowSplit(t, numRows, numCols, coreNum);
            if (numCols == 0) return t;
            auto whole = [&](uint64_t rows) {{ return 2 * (1 + {n_out}) * rows * AlignElems(numCols, xSize) * xSize; }};
            uint64_t maxRows = s.rowsPerBlock + (s.formerBlocks ? 1 : 0);
            uint32_t rows = FitRows(ubSize, maxRows, whole);
            if (rows >= 1) {{
                t.tilingKey = TILING_KEY_WHOLE_ROW;
                t.rowsPerLoop = rows;
                return t;
            }}
            auto split = [&](uint64_t n) {{ return 2 * (1 + {n_out}) * AlignElems(n, xSize) * xSize; }};
            uint32_t chunk = FitChunk(ubSize, numCols, BLOCK_BYTES / xSize, split);
            if (chunk == 0) return t;
            t.tilingKey = TILING_KEY_SPLIT_ROW;
            t.chunkCols = chunk;
            t.numChunks = static_cast<uint32_t>(CeilDiv(numCols, chunk));
            t.lastChunkCols = numCols - (t.numChunks - 1) * chunk;
            return t;
        }}
        #endif
        ''')
    files[f"ascendc/{kname}/op_host/{kname}_tiling.cpp"] = textwrap.dedent(f'''\
        // CANN tiling callback of {kcamel}: calls the plain Tiling{kcamel} ({kname}_tiling.h).
        #include "common/tiling_host_common.h"
        #include "{kname}_tiling.h"

        namespace optiling {{
        static ge::graphStatus Tiling{kcamel}Callback(gert::TilingContext *context)
        {{
            const gert::StorageShape *x = context->GetInputShape(0);
            if (x == nullptr) return ge::GRAPH_FAILED;
            const gert::Shape &xs = x->GetStorageShape();
            if (xs.GetDimNum() < 1) return ge::GRAPH_FAILED;
            uint64_t cols = static_cast<uint64_t>(xs.GetDim(xs.GetDimNum() - 1));
            if (cols == 0) return ge::GRAPH_FAILED;
            uint64_t total = static_cast<uint64_t>(xs.GetShapeSize());
            uint32_t xSize = ge::GetSizeByDataType(context->GetInputDesc(0)->GetDataType());
            auto facts = opsdk_ascendc::GetPlatformFacts(context);
            {kcamel}TilingData td = Tiling{kcamel}(total / cols, static_cast<uint32_t>(cols), xSize, facts.coreNum,
                                                  facts.ubSize);
            return opsdk_ascendc::CommitTiling(context, td);
        }}

        IMPL_OP_OPTILING({kcamel})
            .Tiling(Tiling{kcamel}Callback)
            .TilingParse<opsdk_ascendc::EmptyCompileInfo>(opsdk_ascendc::TilingPrepareNothing);
        }}  // namespace optiling
        ''')
    ins = [a for a in p["args"] if _is_tensor(a.type)]
    dts = "{ge::DT_FLOAT16, ge::DT_BF16, ge::DT_FLOAT}"
    fmts = "{ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND}"
    def_lines = []
    for a in ins:
        kind = "OPTIONAL" if isinstance(a.type, torch.OptionalType) else "REQUIRED"
        def_lines.append(f'        this->Input("{a.name}").ParamType({kind}).DataType({dts})'
                         f'.Format({fmts}).UnknownShapeFormat({fmts});')
    for o in out_names:
        def_lines.append(f'        this->Output("{o}").ParamType(REQUIRED).DataType({dts})'
                         f'.Format({fmts}).UnknownShapeFormat({fmts});')
    files[f"ascendc/{kname}/op_host/{kname}_def.cpp"] = (
        f"// OpDef of {kcamel}: the inputs and outputs of its IR prototype (op_graph/{kname}_"
        f"proto.h), the dtypes the kernel is\n// built for (column i of every list is one "
        f"binary), ND format, ascend910b / ascend910_93 vector cores.\n"
        f'#include "register/op_def_registry.h"\n\nnamespace ops {{\nclass {kcamel} : public '
        f"OpDef {{\npublic:\n    explicit {kcamel}(const char *name) : OpDef(name)\n    {{\n"
        + "\n".join(def_lines) + "\n"
        + "        this->AICore().AddConfig(\"ascend910b\");\n"
          "        this->AICore().AddConfig(\"ascend910_93\");\n    }\n};\n"
        + f"OP_ADD({kcamel});\n}}  // namespace ops\n")
    shape_lines = "\n".join(
        f"    gert::Shape *y{i} = context->GetOutputShape({i});\n"
        f"    if (y{i} == nullptr) return ge::GRAPH_FAILED;\n    *y{i} = *x;" for i in range(n_out))
    dtype_lines = "\n".join(f"    context->SetOutputDataType({i}, context->GetInputDataType(0));"
                            for i in range(n_out))
    files[f"ascendc/{kname}/op_host/{kname}_infershape.cpp"] = (
        f"// Shape / dtype inference of {kcamel}: every output like '{first}'.\n"
        f'#include "register/op_impl_registry.h"\n\nnamespace ops {{\n'
        f"static ge::graphStatus InferShape{kcamel}(gert::InferShapeContext *context)\n{{\n"
        f"    const gert::Shape *x = context->GetInputShape(0);\n"
        f"    if (x == nullptr) return ge::GRAPH_FAILED;\n{shape_lines}\n"
        f"    return ge::GRAPH_SUCCESS;\n}}\n\n"
        f"static ge::graphStatus InferDataType{kcamel}(gert::InferDataTypeContext *context)\n{{\n"
        f"{dtype_lines}\n    return ge::GRAPH_SUCCESS;\n}}\n\n"
        f"IMPL_OP_INFERSHAPE({kcamel}).InferShape(InferShape{kcamel}).InferDataType(InferDataType"
        f"{kcamel});\n}}  // namespace ops\n")
    gm_params = ", ".join([f"GM_ADDR {a.name}" for a in ins] + [f"GM_ADDR {o}" for o in out_names])
    set_out = "\n".join(
        f"        yGm[{i}].SetGlobalBuffer((__gm__ T *){o} + r.start * n, r.count * n);"
        for i, o in enumerate(out_names))
    init_args = ", ".join([first] + out_names)
    init_params = ", ".join([f"GM_ADDR {first}"] + [f"GM_ADDR {o}" for o in out_names])
    unused = "".join(f"    (void){a.name};\n" for a in ins[1:])
    files[f"ascendc/{kname}/op_kernel/{kname}.cpp"] = textwrap.dedent(f'''\
        // {kcamel} for the vector cores. Starts as: each output a copy of '{first}' (the
        // generated reference); replace Compute() with the operator's computation.
        // T: half, bfloat16_t or float. Tiling keys: 1 whole rows per tile, 2 a row in chunks.
        #include "kernel_operator.h"
        #include "common/kernel_common.h"
        #include "../op_host/{kname}_tiling.h"

        namespace {{
        using namespace AscendC;
        using namespace opsdk_ascendc;

        constexpr int32_t BUFFER_NUM = 2;
        constexpr int32_t OUTPUTS = {n_out};

        template <typename T>
        class Kernel{kcamel} {{
        public:
            __aicore__ inline void Init({init_params}, const {kcamel}TilingData &td)
            {{
                td_ = td;
                RowRange r = BlockRows(td.rowsPerBlock, td.formerBlocks);
                rowCount_ = r.count;
                uint64_t n = td.numCols;
                xGm.SetGlobalBuffer((__gm__ T *){first} + r.start * n, r.count * n);
        {set_out}
                bool whole = td.tilingKey == TILING_KEY_WHOLE_ROW;
                uint32_t work = whole ? td.numCols : td.chunkCols;
                rows_ = whole ? td.rowsPerLoop : 1;
                pitch_ = Align(work, 32 / sizeof(T));
                pipe.InitBuffer(inQueueX, BUFFER_NUM, rows_ * pitch_ * sizeof(T));
                for (int32_t k = 0; k < OUTPUTS; ++k) pipe.InitBuffer(outQueueY[k], BUFFER_NUM, rows_ * pitch_ * sizeof(T));
            }}

            __aicore__ inline void Process()
            {{
                if (rowCount_ == 0) return;
                if (td_.tilingKey == TILING_KEY_WHOLE_ROW) {{
                    uint64_t loops = (rowCount_ + td_.rowsPerLoop - 1) / td_.rowsPerLoop;
                    for (uint64_t i = 0; i < loops; ++i) {{
                        uint64_t row0 = i * td_.rowsPerLoop;
                        uint64_t left = rowCount_ - row0;
                        uint32_t rows = static_cast<uint32_t>(left < td_.rowsPerLoop ? left : td_.rowsPerLoop);
                        Tile(row0 * td_.numCols, rows, td_.numCols);
                    }}
                }} else if (td_.tilingKey == TILING_KEY_SPLIT_ROW) {{
                    for (uint64_t row = 0; row < rowCount_; ++row) {{
                        for (uint32_t c = 0; c < td_.numChunks; ++c) {{
                            uint32_t len = c + 1 == td_.numChunks ? td_.lastChunkCols : td_.chunkCols;
                            Tile(row * td_.numCols + static_cast<uint64_t>(c) * td_.chunkCols, 1, len);
                        }}
                    }}
                }}
            }}

        private:
            // one tile: rows x cols elements at element offset off
            __aicore__ inline void Tile(uint64_t off, uint32_t rows, uint32_t cols)
            {{
                LocalTensor<T> x = inQueueX.AllocTensor<T>();
                CopyRowsIn(x, xGm[off], rows, cols);
                inQueueX.EnQue(x);
                x = inQueueX.DeQue<T>();
                for (int32_t k = 0; k < OUTPUTS; ++k) {{
                    LocalTensor<T> y = outQueueY[k].AllocTensor<T>();
                    Compute(y, x, rows * pitch_);
                    outQueueY[k].EnQue(y);
                    y = outQueueY[k].DeQue<T>();
                    CopyRowsOut(yGm[k][off], y, rows, cols);
                    outQueueY[k].FreeTensor(y);
                }}
                inQueueX.FreeTensor(x);
            }}

            // the computation of one tile (count elements, a whole number of 32-byte blocks)
            __aicore__ inline void Compute(const LocalTensor<T> &y, const LocalTensor<T> &x, uint32_t count)
            {{
                DataCopy(y, x, count);
            }}

            TPipe pipe;
            TQue<QuePosition::VECIN, BUFFER_NUM> inQueueX;
            TQue<QuePosition::VECOUT, BUFFER_NUM> outQueueY[OUTPUTS];
            GlobalTensor<T> xGm;
            GlobalTensor<T> yGm[OUTPUTS];
            {kcamel}TilingData td_{{}};
            uint64_t rowCount_ = 0;
            uint32_t rows_ = 0, pitch_ = 0;
        }};
        }}  // namespace

        #ifndef DTYPE_X
        #define DTYPE_X half
        #endif

        extern "C" __global__ __aicore__ void {kname}({gm_params}, GM_ADDR workspace, GM_ADDR tiling)
        {{
            KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
            REGISTER_TILING_DEFAULT({kcamel}TilingData);
            GET_TILING_DATA_WITH_STRUCT({kcamel}TilingData, tilingData, tiling);
            (void)workspace;
        {unused}    Kernel{kcamel}<DTYPE_X> op;
            op.Init({init_args}, tilingData);
            op.Process();
        }}
        ''')  # noqa: E501
    proto_lines = []
    for a in ins:
        kind = "OPTIONAL_INPUT" if isinstance(a.type, torch.OptionalType) else "INPUT"
        proto_lines.append(f"    .{kind}({a.name}, TensorType({{DT_FLOAT16, DT_BF16, DT_FLOAT}}))")
    for o in out_names:
        proto_lines.append(f"    .OUTPUT({o}, TensorType({{DT_FLOAT16, DT_BF16, DT_FLOAT}}))")
    from op_sdk.converters.spec import GeIr, prototype_of

    class _Def:  # what prototype_of reads of an OpDef
        schema = p["functional_schema"] or p["schema"]
        qualname = f"{ns}::{kname}"

    proto = prototype_of(_Def, GeIr(kcamel, outputs=tuple(out_names)))
    for a in proto.attrs:
        if a.required:
            proto_lines.append(f"    .REQUIRED_ATTR({a.name}, {a.type})")
        else:
            d = a.default
            text = ("true" if d else "false") if isinstance(d, bool) else \
                f'"{d}"' if isinstance(d, str) else "{}" if isinstance(d, list) else \
                f"{d!r}f" if isinstance(d, float) else str(d)
            proto_lines.append(f"    .ATTR({a.name}, {a.type}, {text})")
    files[f"ascendc/{kname}/op_graph/{kname}_proto.h"] = (
        f"// Ascend IR prototype of {kcamel} ({ns}::{kname}); op_sdk's converter builds it "
        f"(GeIr in {name}.py).\n#ifndef {guard}_PROTO_H_\n#define {guard}_PROTO_H_\n\n"
        f'#include "graph/operator_reg.h"\n\nnamespace ge {{\nREG_OP({kcamel})\n'
        + "\n".join(proto_lines) + f"\n    .OP_END_FACTORY_REG({kcamel})\n}}  // namespace ge\n\n"
        f"#endif  // {guard}_PROTO_H_\n")
    files["ascendc/CMakeLists.txt"] = textwrap.dedent(f'''\
        # CANN's custom-operator build of {kcamel} (ascendc_library / the op project
        # template of the CANN toolkit): set ASCEND_CANN_PACKAGE_PATH to the toolkit.
        # Needs the CANN toolkit, which this project's machines do not have: not built here.
        cmake_minimum_required(VERSION 3.16)
        project({kname}_ascendc LANGUAGES CXX)
        set(ASCEND_CANN_PACKAGE_PATH "$ENV{{ASCEND_HOME_PATH}}" CACHE PATH "CANN toolkit")
        set(SOC_VERSION "Ascend910B1" CACHE STRING "SoC")
        include(${{ASCEND_CANN_PACKAGE_PATH}}/tools/tikcpp/ascendc_kernel_cmake/ascendc.cmake)
        ascendc_library({kname}_kernels STATIC {kname}/op_kernel/{kname}.cpp)
        target_include_directories({kname}_kernels PRIVATE ${{CMAKE_CURRENT_SOURCE_DIR}}
                                   ${{OPSDK_ASCENDC_ROOT}})
        add_library({kname}_host SHARED {kname}/op_host/{kname}_tiling.cpp {kname}/op_host/{kname}_def.cpp
                    {kname}/op_host/{kname}_infershape.cpp)
        target_include_directories({kname}_host PRIVATE ${{CMAKE_CURRENT_SOURCE_DIR}} ${{OPSDK_ASCENDC_ROOT}}
                                   ${{ASCEND_CANN_PACKAGE_PATH}}/include)
        ''')
    gm_regs = "\n".join(
        [f'    OPSDK_GM({a.name}, n * xSize, "{a.name}");' for a in ins[:1]]
        + [f'    if ({a.name}) OPSDK_GM({a.name}, {a.name}Bytes, "{a.name}");' for a in ins[1:]]
        + [f'    OPSDK_GM({o}, n * xSize, "{o}");' for o in out_names])
    drv_params = ", ".join([f"void *{a.name}" for a in ins]
                           + [f"uint64_t {a.name}Bytes" for a in ins[1:]]
                           + [f"void *{o}" for o in out_names])
    kcall = ", ".join([f"(GM_ADDR){a.name}" for a in ins] + [f"(GM_ADDR){o}" for o in out_names])
    files["ascendc/driver.cpp"] = textwrap.dedent(f'''\
        // ctypes entry of the {kcamel} kernel on op_sdk's CPU model of the Ascend C API:
        // computes the tiling with the kernel's plain tiling function and runs the kernel once
        // per block index. -DDTYPE_X=half|bfloat16_t|float.
        #include "opsdk_model_driver.h"
        #include "{kname}/op_kernel/{kname}.cpp"

        extern "C" int opsdk_run({drv_params}, uint64_t rows, uint32_t cols,
                                 uint32_t coreNum, uint32_t ubBytes, uint32_t *keyOut, char *err, int errLen)
        {{
            const uint32_t xSize = sizeof(DTYPE_X);
            {kcamel}TilingData td = Tiling{kcamel}(rows, cols, xSize, coreNum, ubBytes);
            *keyOut = td.tilingKey;
            if (td.tilingKey == opsdk_ascendc::TILING_KEY_INVALID) {{
                opsdk_driver::SetError(err, errLen, "tiling: no tiling fits the unified buffer");
                return 2;
            }}
            uint64_t n = rows * cols;
        {gm_regs}
            OPSDK_GM(&td, sizeof(td), "tiling");
            return opsdk_driver::RunBlocks(td.blockDim, ubBytes, err, errLen, [&] {{
                {kname}({kcall}, nullptr, (GM_ADDR)&td);
            }});
        }}
        ''')
    files.update(_binding(p, kname, kcamel, ins, out_names))
    files[f"test_{name}.py"] = _test(p, kname, kcamel, ins, out_names)
    return files


def _binding(p, kname, kcamel, ins, out_names) -> dict[str, str]:
    attrs = [a for a in p["args"] if not _is_tensor(a.type)]
    cpp_type = {"FloatType": "double", "IntType": "int64_t", "BoolType": "bool",
                "StringType": "c10::string_view", "SymIntType": "int64_t"}

    def arg_decl(a):
        t = a.type
        opt = isinstance(t, torch.OptionalType)
        inner = t.getElementType() if opt else t
        k = inner.kind()
        if k == "TensorType":
            return f"const c10::optional<at::Tensor> &{a.name}" if opt else f"const at::Tensor &{a.name}"
        if k == "ListType":
            el = inner.getElementType().kind()
            base = {"IntType": "at::IntArrayRef", "FloatType": "at::ArrayRef<double>",
                    "BoolType": "at::ArrayRef<bool>", "SymIntType": "c10::SymIntArrayRef"}.get(el, "at::IntArrayRef")
            return f"c10::optional<{base}> {a.name}" if opt else f"{base} {a.name}"
        base = cpp_type.get(k, "int64_t")
        return f"c10::optional<{base}> {a.name}" if opt else f"{base} {a.name}"

    decls = ", ".join(arg_decl(a) for a in p["args"])
    outs = "\n".join(f"    at::Tensor {o} = at::empty_like({p['first']});" for o in out_names)
    exec_args = ", ".join([a.name for a in ins] + [a.name for a in attrs] + out_names)
    ret_t = "at::Tensor" if len(out_names) == 1 else \
        "std::tuple<" + ", ".join(["at::Tensor"] * len(out_names)) + ">"
    ret = out_names[0] if len(out_names) == 1 else "std::make_tuple(" + ", ".join(out_names) + ")"
    ns = p["namespace"]
    text = textwrap.dedent(f'''\
        // OpPlugin eager binding of {ns}::{kname}: allocates the outputs (like '{p["first"]}') and
        // calls CANN's two-phase aclnn{kcamel} (GetWorkspaceSize + launch) through op-plugin's
        // EXEC_NPU_CMD_EXT, in the order of aclnn{kcamel}'s prototype: inputs, attributes, outputs.
        // Built only with torch_npu (its headers: torch_npu/include); registered for PrivateUse1.
        #include <torch/library.h>

        #include "op_plugin/utils/op_api_common.h"

        namespace opsdk_npu {{
        {ret_t} {kname}({decls})
        {{
        {outs}
            EXEC_NPU_CMD_EXT(aclnn{kcamel}, {exec_args});
            return {ret};
        }}
        }}  // namespace opsdk_npu

        TORCH_LIBRARY_IMPL({ns}, PrivateUse1, m)
        {{
            m.impl("{kname}", TORCH_FN(opsdk_npu::{kname}));
        }}
        ''')
    return {f"npu/{kname}_opplugin.cpp": text}


def _test(p, kname, kcamel, ins, out_names) -> str:
    name, ns = p["name"], p["namespace"]
    n_out = len(out_names)
    tensor_args = [a for a in p["args"] if _is_tensor(a.type)]
    # sample arguments: every tensor like the first (or None when optional), defaults else
    sample_parts = []
    for a in p["args"][1:]:
        if _is_tensor(a.type):
            sample_parts.append(f"{a.name}=x.clone()")
        elif not a.has_default_value():
            k = a.type.kind()
            v = {"FloatType": "0.5", "IntType": "1", "BoolType": "False", "StringType": "'a'"}.get(k, "[1]")
            sample_parts.append(f"{a.name}={v}")
    sample_kw = ", ".join(sample_parts)
    drv_extra = ", ".join([f"{a.name}.data_ptr() if {a.name} is not None else None"
                           for a in tensor_args[1:]]
                          + [f"({a.name}.numel() * {a.name}.element_size()) if {a.name} is not None else 0"
                             for a in tensor_args[1:]])
    drv_extra = (drv_extra + ", ") if drv_extra else ""
    mod = name
    call_op = f"torch.ops.{ns}.{p['functional'] or name}"
    inplace_test = ""
    if p["inplace"]:
        inplace_test = f'''

def test_inplace_form_writes_its_input_and_compiles():
    x = torch.randn(5, 33)
    want = mod.reference(x.clone(), {sample_kw})
    y = x.clone()
    out = torch.ops.{ns}.{name}(y, {sample_kw})
    assert out is y and torch.equal(y, want)

    @torch.compile(backend="aot_eager", fullgraph=True)
    def f(t):
        torch.ops.{ns}.{name}(t, {sample_kw})
        return t * 2

    z = x.clone()
    assert torch.equal(f(z), want * 2) and torch.equal(z, want)
'''
    return f'''"""Tests of {ns}::{name} (generated by `op-sdk new-op`): they must pass after every edit.

* the CPU kernel and the fake against the reference (opcheck, dtypes, odd and 3-D shapes,
  non-contiguous inputs);
* the Ascend C kernel (ascendc/{kname}) compiled with g++ against op_sdk's CPU model of the
  Ascend C API and run against the reference, over both tiling keys, tails and multi-block
  splits (skipped without g++);
* the GE converter: the operator converts to {kcamel} with its prototype's names;
* the OpPlugin binding compiles against torch_npu's headers (skipped without torch_npu).
"""

import ctypes
import importlib.util
import os
import pathlib
import sys

import pytest
import torch

from op_sdk.app import ascendc_run

HERE = pathlib.Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("{mod}", HERE / "{mod}.py")
mod = sys.modules.get("{mod}") or importlib.util.module_from_spec(spec)
if "{mod}" not in sys.modules:
    sys.modules["{mod}"] = mod
    spec.loader.exec_module(mod)

OP = {call_op}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SHAPES = [(1, 1), (7, 33), (2, 5, 129), (64, 1000)]


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_cpu_kernel_matches_reference(dtype, shape):
    x = torch.randn(shape).to(dtype)
    got = _as_tuple(OP(x, {sample_kw}))
    want = _as_tuple(mod.reference(x, {sample_kw}))
    assert len(got) == len(want) == {n_out}
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g, w, rtol=0, atol=0)


def test_non_contiguous_input():
    x = torch.randn(40, 30).t()
    for g, w in zip(_as_tuple(OP(x, {sample_kw})), _as_tuple(mod.reference(x.contiguous(), {sample_kw}))):
        torch.testing.assert_close(g, w, rtol=0, atol=0)


def test_opcheck():
    x = torch.randn(7, 33)
    torch.library.opcheck(OP.default, (x,), {{{", ".join(f"{part.split('=')[0]!r}: {part.split('=', 1)[1]}" for part in sample_parts)}}},
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_static"))


def test_compiles_with_dynamic_shapes():
    @torch.compile(backend="aot_eager", dynamic=True, fullgraph=True)
    def f(t):
        return _as_tuple(OP(t, {sample_kw}))[0] * 2

    for rows in (3, 9):
        x = torch.randn(rows, 17)
        torch.testing.assert_close(f(x), _as_tuple(mod.reference(x, {sample_kw}))[0] * 2)


# -- the Ascend C kernel on the CPU model ---------------------------------------------------------

CTYPE = {{torch.float16: "half", torch.bfloat16: "bfloat16_t", torch.float32: "float"}}


@pytest.fixture(scope="module")
def builder(tmp_path_factory):
    b = ascendc_run.Builder(HERE / "ascendc", tmp_path_factory.mktemp("{kname}_ascendc"))
    if b.cxx is None:
        pytest.skip("g++ not found: the Ascend C kernel runs on the CPU model compiled with g++")
    return b


def _run(builder, x, {", ".join(a.name + "=None" for a in tensor_args[1:]) + (", " if tensor_args[1:] else "")}cores=8, ub=192 * 1024):
    lib = builder.library(HERE / "ascendc" / "driver.cpp", DTYPE_X=CTYPE[x.dtype])
    x = x.contiguous()
    rows, cols = x.numel() // x.shape[-1], x.shape[-1]
    outs = [torch.empty_like(x) for _ in range({n_out})]
    key = ctypes.c_uint32(0)
    err = ctypes.create_string_buffer(512)
    rc = lib.opsdk_run(ctypes.c_void_p(x.data_ptr()), {drv_extra}*[ctypes.c_void_p(o.data_ptr()) for o in outs],
                       ctypes.c_uint64(rows), ctypes.c_uint32(cols), ctypes.c_uint32(cores),
                       ctypes.c_uint32(ub), ctypes.byref(key), err, ctypes.c_int(len(err)))
    assert rc == 0, err.value.decode()
    return outs, key.value


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape,cores,ub,key", [
    ((1, 1), 8, 192 * 1024, 1), ((7, 33), 3, 192 * 1024, 1), ((2, 5, 129), 40, 192 * 1024, 1),
    ((64, 1000), 8, 192 * 1024, 1), ((3, 5000), 2, 8 * 1024, 2), ((4, 4099), 3, 4 * 1024, 2)])
def test_ascendc_kernel_matches_reference(builder, dtype, shape, cores, ub, key):
    x = torch.randn(shape).to(dtype)
    outs, got_key = _run(builder, x, cores=cores, ub=ub)
    assert got_key == key
    for g, w in zip(outs, _as_tuple(mod.reference(x, {sample_kw}))):
        torch.testing.assert_close(g, w, rtol=0, atol=0)


def test_ascendc_kernel_reports_no_tiling(builder):
    x = torch.randn(2, 64)
    lib = builder.library(HERE / "ascendc" / "driver.cpp", DTYPE_X="float")
    err = ctypes.create_string_buffer(512)
    key = ctypes.c_uint32(7)
    outs = [torch.empty_like(x) for _ in range({n_out})]
    rc = lib.opsdk_run(ctypes.c_void_p(x.data_ptr()), {", ".join(["None"] * len(tensor_args[1:]) + ["0"] * len(tensor_args[1:])) + (", " if tensor_args[1:] else "")}*[ctypes.c_void_p(o.data_ptr()) for o in outs],
                       ctypes.c_uint64(2), ctypes.c_uint32(64), ctypes.c_uint32(1), ctypes.c_uint32(16),
                       ctypes.byref(key), err, ctypes.c_int(len(err)))
    assert rc == 2 and key.value == 0 and b"no tiling" in err.value


# -- the GE converter --------------------------------------------------------------------------------

def test_ge_converter():
    from torch.fx.experimental.proxy_tensor import make_fx

    from op_sdk.converters import convert_fx, ir

    x = torch.randn(4, 16, dtype=torch.float16)
    gm = make_fx(lambda x: OP(x, {sample_kw}), tracing_mode="fake")(x)
    graph = convert_fx(gm)
    (op,) = [o for o in graph.ops if o.type == "{kcamel}"]
    proto = ir.prototype("{kcamel}")
    assert [d.name for d in op.input_desc] == [i.name for i in proto.inputs
                                               if i.name in {{d.name for d in op.input_desc}}]
    assert [d.name for d in op.output_desc] == {out_names!r}
    assert graph.model_pbtxt("{kname}").count('type: "{kcamel}"') == 1


# -- the OpPlugin binding ------------------------------------------------------------------------------

def test_opplugin_binding_compiles_against_torch_npu():
    include = ascendc_run.torch_npu_include()
    if include is None:
        pytest.skip("torch_npu is not installed: its headers build the OpPlugin binding")
    ascendc_run.compile_binding(HERE / "npu" / "{kname}_opplugin.cpp", include)
{inplace_test}'''  # noqa: E501


def write(name: str, schema: str, out_dir: str, namespace: str = "my_ops",
          force: bool = False) -> list[str]:
    p = plan(name, schema, namespace)
    root = os.path.join(out_dir, name)
    if os.path.exists(root) and os.listdir(root) and not force:
        raise NewOpError(f"new-op: {root} exists and is not empty (use --force to overwrite)")
    written = []
    for rel, text in _files(p).items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        written.append(path)
    return written
