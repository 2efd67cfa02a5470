"""The Triton kernels on a CUDA GPU against eager, torch.compile and the copy bandwidth.
The suite lives in op_sdk.app.triton_bench; see its docstring for what is measured.

    python benchmarks/bench_triton.py [--quick] [--out benchmarks/results/bench_triton]
"""

from op_sdk.app.triton_bench import main

if __name__ == "__main__":
    main()
