"""The ``op-sdk`` command (also ``python -m op_sdk``, ``python -m op_sdk_cli``).

Subcommands: ``demo`` (compile the embedded model and show what the fusions did),
``report`` (HTML / Markdown report of a compile), ``bench`` (benchmark suite and plots),
``ops`` (the registered operators), ``new-op`` (a new operator's deliverables and tests),
``docs`` (regenerate the generated documentation), ``fuse`` (fuse an ONNX model's operator
groups). A user's mistake prints one line and exits 2.

This package holds the command line (the parser, its checks, the dispatch) and imports
neither op_sdk nor torch: ``op-sdk --help``, a subcommand's help and a usage error answer
without the seconds torch takes to import. A subcommand runs ``op_sdk.app.cli``'s
``_cmd_<name>``, imported when it runs.
"""

from __future__ import annotations

import argparse
import os
import sys


class UsageError(Exception):
    """A mistake in the command line or its options: reported in one line, exit code 2."""


class _Version(argparse.Action):
    """--version: op_sdk's version, where it is installed, and the torch it runs with
    (torch imported only for it; no import of the operators)."""

    def __call__(self, parser, namespace, values, option_string=None):
        import importlib.util

        import torch

        spec = importlib.util.find_spec("op_sdk")
        where = os.path.dirname(os.path.dirname(spec.origin)) if spec and spec.origin else "?"
        version = {}
        with open(os.path.join(where, "op_sdk", "_version.py")) as f:
            exec(f.read(), version)  # the version module: one assignment, no imports
        print(f"op-sdk {version['__version__']} ({where}; torch {torch.__version__})")
        parser.exit()


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="op-sdk", description=_plain(__doc__.split("\n\nThis package")[0]),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="show op_sdk's version, where it is installed, and its torch")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_SubParser)

    p = sub.add_parser("demo", help="compile the embedded model; show fusions, accuracy, speed")
    _model_options(p, layers=4)
    p.add_argument("--batch", type=_positive_int, default=1, help="sequences per forward")
    p.add_argument("--tokens", type=_positive_int, default=8, help="tokens per sequence")
    p.add_argument("--repeats", type=_positive_int, default=10,
                   help="timing rounds; each runs every backend 2 times untimed, 5 timed")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run="_cmd_demo")

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
    p.set_defaults(run="_cmd_report")

    p = sub.add_parser("bench", help="run the benchmark suite; write results and plots")
    p.add_argument("model", nargs="?", metavar="FILE.py:FUNCTION",
                   help="with --fusions: your model (FUNCTION() in FILE.py returns (model, "
                        "example_inputs)), compiled with the fusions as configured, with "
                        "every match and with none, each timed per forward")
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
    p.set_defaults(run="_cmd_bench")

    p = sub.add_parser("ops", help="list the registered operators and their kernels")
    p.add_argument("--schemas", action="store_true", help="print each schema too")
    p.add_argument("--npu", action="store_true",
                   help="each operator's NPU deliverables and the verification level each reached")
    p.add_argument("--json", action="store_true", help="machine-readable output (NPU levels included)")
    p.set_defaults(run="_cmd_ops")

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
    p.set_defaults(run="_cmd_new_op")

    p = sub.add_parser("fuse", help="fuse the operator groups of an ONNX model that pay")
    p.add_argument("input", help="the ONNX model")
    p.add_argument("-o", "--output", required=True, help="the fused ONNX model to write")
    p.add_argument("--report", metavar="JSON", help="also write the groups as JSON")
    p.add_argument("--device", default="cpu", help="benefit model: cpu (measured), npu or cuda")
    p.add_argument("--threshold-us", type=_non_negative, default=0.0,
                   help="fuse a group only when its predicted benefit exceeds this (us)")
    p.add_argument("--dim", action="append", metavar="NAME=VALUE",
                   help="value of a symbolic dimension (repeatable; default 128)")
    p.set_defaults(run="_cmd_fuse")

    p = sub.add_parser("docs", help="regenerate docs/options.md and the operator table")
    p.add_argument("--check", action="store_true", help="only report what is out of date (exit 1)")
    p.set_defaults(run="_cmd_docs")
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
        from op_sdk.app import cli

        return getattr(cli, args.run)(args)
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
