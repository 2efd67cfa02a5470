"""python -m tests.fuzz [--seed S] [--calls N] [--seconds T] [--ops a,b] [--show K]:
the differential fuzz campaign of tests/fuzz/campaign.py; exits 1 on any finding."""

import argparse
import collections
import sys

from tests.fuzz import campaign


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--calls", type=int, default=None)
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--ops", default=None, help="comma-separated operator names (default: all)")
    p.add_argument("--show", type=int, default=3, help="findings shown per (kind, operator)")
    a = p.parse_args(argv)
    if a.calls is None and a.seconds is None:
        a.calls = 2000
    s = campaign.run(a.seed, a.calls, a.seconds, a.ops.split(",") if a.ops else None,
                     log=lambda line: print(line, flush=True))
    shown = collections.Counter()
    for f in s.findings:
        key = (f.kind, f.op)
        shown[key] += 1
        if shown[key] <= a.show:
            print(f"[{f.kind}] {f.op}: {f.detail}\n    call: {f.op}({f.call})")
    for (kind, op), n in sorted(shown.items()):
        print(f"  {kind:10s} {op:34s} {n}")
    print("per operator:", dict(sorted(s.per_op.items())))
    print(s.line())
    return 1 if s.findings else 0


if __name__ == "__main__":
    sys.exit(main())
