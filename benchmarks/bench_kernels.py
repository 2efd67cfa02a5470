"""The fused CPU kernels against their unfused (eager) and torch.compile alternatives,
with the machine's copy bandwidth, in one run. The suite lives in op_sdk.app.kernel_bench
(``op-sdk bench`` runs it too); see its docstring for what is measured and how.

    python benchmarks/bench_kernels.py [--quick] [--threads 2] [--wait-quiet 60]
"""

from op_sdk.app.kernel_bench import main

if __name__ == "__main__":
    main()
