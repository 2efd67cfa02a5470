#!/usr/bin/env bash
# The checks and measurements that need a CUDA GPU, in one run (a lent GPU's time is short):
# the Triton kernels' tests natively, the CUDA-graph and side-stream tests, the kernel
# benchmark and the embedded model. Results go to ${OUT:-benchmarks/results}.
#   bash benchmarks/gpu_checks.sh
set -u
out=${OUT:-benchmarks/results}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)" | tee -a "$out/gpu.txt"
python3 -m pytest -q -p no:cacheprovider tests/triton 2>&1 | tail -25 | tee "$out/tests_triton_cuda.txt"
python3 -m pytest -q -p no:cacheprovider tests/test_multistream.py tests/test_compiler_pipeline.py -k cuda 2>&1 | tail -15 | tee "$out/tests_cuda_streams_graphs.txt"
python3 benchmarks/bench_triton.py --dtypes bf16 --out "$out/bench_triton_h100" 2>&1 | grep -v Warning | tail -40
python3 benchmarks/bench_triton.py --quick --dtypes fp16 --out "$out/bench_triton_h100_fp16" 2>&1 | grep -v Warning | tail -12
python3 benchmarks/bench_e2e_cuda.py --out "$out/e2e_cuda_h100" 2>&1 | tail -20
