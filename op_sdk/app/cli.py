"""The ``op-sdk`` command (also ``python -m op_sdk``).

Subcommands: ``demo`` (compile the embedded model and show what the fusions did),
``report`` (HTML / Markdown report of a compile), ``bench`` (benchmark suite and plots),
``ops`` (the registered operators), ``new-op`` (a new operator's deliverables and tests),
``docs`` (regenerate the generated documentation), ``fuse`` (fuse an ONNX model's operator
groups). A user's mistake prints one line and exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


class UsageError(Exception):
    """A mistake in the command line or its options: reported in one line, exit code 2."""


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


def _bounded(convert, low: float, what: str):
    """An argparse type: ``convert`` (int or float) of the text, finite and >= ``low``."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not low <= value < float("inf"):
            raise argparse.ArgumentTypeError(f"must be a finite number >= {low:g}, got {text}")
        return value
    return parse


_positive_int = _bounded(int, 1, "an integer")
_non_negative = _bounded(float, 0, "a number")


class _Help(argparse.HelpFormatter):
    """Help in plain text, each option's default shown (where it has one and its help does
    not say it already)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if (action.default not in (None, False, argparse.SUPPRESS) and "(default" not in text
                and action.option_strings):
            text += " (default: %(default)s)"
        return text


def _plain(text: str) -> str:
    """A docstring as plain text (no RST literal markup)."""
    return text.replace("``", "")


def _model_options(p: argparse.ArgumentParser, layers: int) -> None:
    g = p.add_argument_group("model")
    g.add_argument("--layers", type=_positive_int, default=layers, help="decoder layers")
    g.add_argument("--hidden", type=_positive_int, default=1024, help="hidden size (multiple of 16)")
    g.add_argument("--heads", type=_positive_int, default=8, help="attention heads")
    g.add_argument("--intermediate", type=_positive_int, default=2816, help="MLP intermediate size")
    g.add_argument("--vocab", type=_positive_int, default=4096, help="vocabulary size")
    g.add_argument("--dtype", default="bfloat16", help="bfloat16 or float16")
    g.add_argument("--mlp-quant", default="dynamic", help="dynamic or static")
    g.add_argument("--aux-layer", type=int, default=-1,
                   help="also output this layer's normalised hidden state (-1: none)")


def _version_line() -> str:
    """op_sdk's version, where it is installed, and the torch it runs with (no import of
    the operators: --version stays instant)."""
    import torch

    from op_sdk._version import __version__

    where = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return f"op-sdk {__version__} ({where}; torch {torch.__version__})"


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="op-sdk", description=_plain(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=_version_line())
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_SubParser)

    p = sub.add_parser("demo", help="compile the embedded model; show fusions, accuracy, speed")
    _model_options(p, layers=4)
    p.add_argument("--batch", type=_positive_int, default=1, help="sequences per forward")
    p.add_argument("--tokens", type=_positive_int, default=8, help="tokens per sequence")
    p.add_argument("--repeats", type=_positive_int, default=10,
                   help="timing rounds; each runs every backend 2 times untimed, 5 timed")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=_cmd_demo)

    p = sub.add_parser("report", help="write an HTML + Markdown fusion report of a compile")
    p.add_argument("model", nargs="?", metavar="FILE.py:FUNCTION",
                   help="your model: FUNCTION() in FILE.py returns (model, example_inputs); "
                        "without it the embedded model (the model options below)")
    _model_options(p, layers=2)
    p.add_argument("--batch", type=_positive_int, default=1, help="sequences per forward")
    p.add_argument("--tokens", type=_positive_int, default=8, help="tokens per sequence")
    p.add_argument("--mode", default="max-autotune", help="max-autotune or reduce-overhead")
    p.add_argument("--fusions", default="all",
                   help="in max-autotune: all, opaque or torchair (which fusions run)")
    p.add_argument("--out", default="op_sdk_report", help="output folder")
    p.add_argument("--trace", action="store_true",
                   help="also profile one compiled call into OUT/trace.json (Chrome trace, "
                        "every thread: the CPU stream workers of multi-stream graphs too)")
    p.set_defaults(run=_cmd_report)

    p = sub.add_parser("bench", help="run the benchmark suite; write results and plots")
    _model_options(p, layers=4)
    p.add_argument("--decode", default="1,4,16", help="decode token counts")
    p.add_argument("--prefill", default="512", help="prefill token counts")
    p.add_argument("--repeats", type=_positive_int, default=10,
                   help="end-to-end timing rounds (each: 2 untimed, 5 timed forwards per "
                        "contender)")
    p.add_argument("--no-kernels", action="store_true", help="end-to-end only")
    p.add_argument("--quick", action="store_true", help="a small kernel subset")
    p.add_argument("--out", default="bench_results", help="output folder")
    p.add_argument("--plot-only", metavar="RESULTS_JSON", help="redraw plots from a results file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--fusions", action="store_true",
                   help="instead: each default fusion's predicted benefit (the benefit "
                        "model) against the time it saves, unfused vs fused eager code; "
                        "writes OUT/bench_fusions.json")
    p.add_argument("--fusion-tokens", default="1,16,4096",
                   help="with --fusions: token counts (rows; hidden 4096, or 16 heads x "
                        "128 for bmm+transpose)")
    p.add_argument("--wait-quiet", type=_non_negative, default=0.0, metavar="SECONDS",
                   help="with --fusions: before a round, wait up to this long for the "
                        "machine to be idle (a shared machine)")
    p.add_argument("--fusion-device", default="cpu", choices=("cpu", "npu", "cuda"),
                   help="with --fusions: the device model the predictions use (the "
                        "measurements are of this host)")
    p.set_defaults(run=_cmd_bench)

    p = sub.add_parser("ops", help="list the registered operators and their kernels")
    p.add_argument("--schemas", action="store_true", help="print each schema too")
    p.add_argument("--npu", action="store_true",
                   help="each operator's NPU deliverables and the verification level each reached")
    p.add_argument("--json", action="store_true", help="machine-readable output (NPU levels included)")
    p.set_defaults(run=_cmd_ops)

    p = sub.add_parser("new-op", help="write a new operator's deliverables and their tests")
    p.add_argument("name", help="the operator's name (lower case; an in-place one ends with _)")
    p.add_argument("--schema", required=True,
                   help='its schema, e.g. "my_op(Tensor x, float alpha=1.0) -> Tensor"')
    p.add_argument("--in-tree", action="store_true",
                   help="write a built-in slice of op_sdk (run inside its source tree)")
    p.add_argument("--namespace", default=None,
                   help="torch.ops namespace (default: my_ops; in the tree npu for an npu_* "
                        "name, else op_sdk)")
    p.add_argument("--package", default=None,
                   help="a user project's Python package (default: the namespace)")
    p.add_argument("--out", default=".",
                   help="folder to write the user project <package>/ into (default: .)")
    p.add_argument("--force", action="store_true", help="overwrite the slice's files")
    p.set_defaults(run=_cmd_new_op)

    p = sub.add_parser("fuse", help="fuse the operator groups of an ONNX model that pay")
    p.add_argument("input", help="the ONNX model")
    p.add_argument("-o", "--output", required=True, help="the fused ONNX model to write")
    p.add_argument("--report", metavar="JSON", help="also write the groups as JSON")
    p.add_argument("--device", default="cpu", help="benefit model: cpu (measured), npu or cuda")
    p.add_argument("--threshold-us", type=_non_negative, default=0.0,
                   help="fuse a group only when its predicted benefit exceeds this (us)")
    p.add_argument("--dim", action="append", metavar="NAME=VALUE",
                   help="value of a symbolic dimension (repeatable; default 128)")
    p.set_defaults(run=_cmd_fuse)

    p = sub.add_parser("docs", help="regenerate docs/options.md and the operator table")
    p.add_argument("--check", action="store_true", help="only report what is out of date (exit 1)")
    p.set_defaults(run=_cmd_docs)
    return parser


class _SubParser(argparse.ArgumentParser):
    """A subcommand's parser: its help shows each option's default."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Help)
        super().__init__(*args, **kwargs)


def _subparsers(parser: argparse.ArgumentParser) -> dict:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # a flag the subcommand does not take: its own usage, not the top level's
        _subparsers(parser)[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.run(args)
    except (UsageError, ValueError) as exc:
        msg = str(exc)
        msg = msg[len(args.command) + 2:] if msg.startswith(f"{args.command}: ") else msg
        print(f"op-sdk {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"op-sdk {args.command}: error: {exc.strerror or exc}: "
              f"{exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"op-sdk {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
