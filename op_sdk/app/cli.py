"""The ``op-sdk`` subcommands (``_cmd_<name>``); the command line that runs them (the
parser, its checks, the dispatch) is ``op_sdk_cli``, which imports no torch."""

from __future__ import annotations

import json
import os
import sys

from op_sdk_cli import UsageError, build_parser, main  # noqa: F401  (the command line)


def _cmd_ops(args) -> int:
    import op_sdk
    from op_sdk.app.deliverables import npu_deliverables

    rows = []
    for opdef in op_sdk.registered_ops():
        rows.append({
            "name": f"{opdef.namespace}::{opdef.name}",
            "schema": str(opdef.op._schema),
            "kernels": opdef.kernel_devices(),
            "defined_by": "op_sdk" if opdef.owned else "torch_npu",
            "native_errors": dict(opdef.native_errors),
            "npu": npu_deliverables(opdef),
        })
    from op_sdk import _native

    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not _native.load():
        print(f"native CPU kernels missing: op_sdk._C did not load ({_native.load_error()})")
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        kernels = ", ".join(f"{d}: {k}" for d, k in r["kernels"].items())
        print(f"{r['name']:<{width}}  [{kernels}]  defined by {r['defined_by']}")
        if args.npu:
            print("    NPU: " + "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in r["npu"].items()))
        for key, error in r["native_errors"].items():
            print(f"    native {key} kernel not registered: {' '.join(error.split())[:300]}")
        if args.schemas:
            print(f"    {r['schema']}")
    return 0


def _cmd_docs(args) -> int:
    from op_sdk.app import docs

    try:
        root = docs.find_root()
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from exc
    stale = docs.update(root, check=args.check)
    for path in stale:
        print(f"{'out of date' if args.check else 'rewrote'}: {os.path.relpath(path, root)}")
    if args.check and stale:
        print("run `op-sdk docs` to regenerate them")
        return 1
    return 0


def _model_config(args):
    from op_sdk.app.models import DecoderConfig

    return DecoderConfig(layers=args.layers, hidden=args.hidden, heads=args.heads,
                         intermediate=args.intermediate, vocab=args.vocab, dtype=args.dtype,
                         mlp_quant=args.mlp_quant, aux_layer=args.aux_layer)


def _writable_file(path: str) -> None:
    """Fail now, in one line, rather than after minutes of work."""
    with open(path, "a"):
        pass


def _cmd_demo(args) -> int:
    from op_sdk.app.demo import format_result, run_demo, write_json

    cfg = _model_config(args)
    cfg.validate()
    if args.json:
        _writable_file(args.json)
    result = run_demo(cfg, batch=args.batch, tokens=args.tokens, repeats=args.repeats,
                      progress=not args.quiet, command=" ".join(["op-sdk"] + sys.argv[1:]))
    print(format_result(result))
    if args.json:
        write_json(result, args.json)
        print(f"\nwrote {args.json}")
    return 0


def _cmd_report(args) -> int:
    from op_sdk.app.report import compiler_config, load_model, run_report

    cfg = _model_config(args)
    cfg.validate()
    compiler_config(args.mode, args.fusions)  # reject a bad mode before touching the disk
    os.makedirs(args.out, exist_ok=True)
    _writable_file(os.path.join(args.out, "report.html"))
    user_model = load_model(args.model) if args.model else None
    paths = run_report(cfg, args.out, batch=args.batch, tokens=args.tokens, mode=args.mode,
                       fusions=args.fusions, trace=args.trace, user_model=user_model)
    print(paths["explanation"].summary())
    print(f"\nwrote {paths['html']}\nwrote {paths['markdown']}\ngraph dumps in {paths['dumps']}")
    if "trace" in paths:
        print(f"wrote {paths['trace']} (Chrome trace of one compiled call, every thread)")
    return 0


def _cmd_bench(args) -> int:
    from op_sdk.app.bench import plot_results, run_bench

    if args.model and not args.fusions:
        raise UsageError("bench: MODEL is read with --fusions only (the fusions of your model)")
    if args.fusions and args.model:
        from op_sdk.app.fusion_bench import format_model_fusion_results, write_model_fusion_bench
        from op_sdk.app.report import load_model

        path = write_model_fusion_bench(os.path.join(args.out, "bench_model_fusions.json"),
                                        " ".join(["op-sdk"] + sys.argv[1:]),
                                        load_model(args.model, "bench"), args.repeats,
                                        args.fusion_device)
        print(format_model_fusion_results(path))
        print(f"\nwrote {path}")
        return 0
    if args.fusions:
        from op_sdk.app.fusion_bench import format_fusion_results, write_fusion_bench

        rows = tuple(_int_list(args.fusion_tokens, "--fusion-tokens"))
        path = write_fusion_bench(os.path.join(args.out, "bench_fusions.json"),
                                  " ".join(["op-sdk"] + sys.argv[1:]), rows, args.repeats,
                                  args.fusion_device, progress=not args.quiet,
                                  quiet_timeout=args.wait_quiet)
        print(format_fusion_results(path))
        print(f"\nwrote {path}")
        return 0
    if args.plot_only:
        for path in plot_results(args.plot_only, os.path.dirname(args.plot_only) or "."):
            print(f"wrote {path}")
        return 0
    cfg = _model_config(args)
    cfg.validate()
    tokens = tuple(_int_list(args.decode, "--decode") + _int_list(args.prefill, "--prefill"))
    path = run_bench(args.out, cfg, tokens, args.repeats, kernels=not args.no_kernels,
                     quick=args.quick, command=" ".join(["op-sdk"] + sys.argv[1:]),
                     progress=not args.quiet)
    from op_sdk.app.bench import format_results

    print(format_results(path))
    print(f"\nwrote {path} and plots in {args.out}")
    return 0


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"{flag} takes comma-separated token counts, got {text!r}") from None
    if any(v < 1 for v in values):
        raise UsageError(f"{flag} token counts must be >= 1, got {text!r}")
    return values


def _cmd_new_op(args) -> int:
    from op_sdk.app import new_op

    tree = None
    if args.in_tree:
        tree = new_op.find_tree()
        if tree is None:
            raise new_op.NewOpError("new-op: --in-tree: run it inside op_sdk's source tree "
                                    "(no pyproject.toml + op_sdk/ops + csrc/npu + tests/ops above "
                                    "the current folder)")
    written = new_op.write(args.name, args.schema, args.out, namespace=args.namespace,
                           force=args.force, in_tree=tree, package=args.package)
    root = new_op.target(args.name, args.out, args.namespace, tree, args.package)[0]
    print(f"wrote {len(written)} files under {root}:")
    for path in written:
        print(f"  {os.path.relpath(path, root)}")
    if tree is not None:
        # the operator table lists every operator of op_sdk: regenerated from the declarations
        for rel in new_op.regenerate_docs(tree):
            print(f"  {rel} (regenerated by op-sdk docs)")
        own = " ".join(os.path.relpath(p, root) for p in written
                       if os.path.basename(p).startswith("test_"))
        print(f"run its tests: python -m pytest {own}; then the whole suite: python -m pytest tests")
    else:
        print(f"run their tests: cd {root} && python -m pytest tests")
    return 0


def _cmd_fuse(args) -> int:
    from op_sdk.onnx.fuse import run_cli

    return run_cli(args)
