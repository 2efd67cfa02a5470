#!/usr/bin/env bash
# The checks and measurements that need a CUDA GPU, in one run (a lent GPU's time is short):
# the Triton kernels' tests natively, the CUDA-graph and side-stream tests, the kernel
# benchmark and the embedded model. Full logs and results go to
# ${OUT:-benchmarks/results}; the steps named in $GPU_STEPS run (default: all).
#   bash benchmarks/gpu_checks.sh
set -u
out=${OUT:-benchmarks/results}
steps=${GPU_STEPS:-tests streams bench e2e}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)" | tee -a "$out/gpu.txt"
if [[ $steps == *tests* ]]; then
  timeout ${TESTS_TIMEOUT:-200} python3 -m pytest -q -p no:cacheprovider tests/triton > "$out/tests_triton_cuda.txt" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$out/tests_triton_cuda.txt" | tail -8
fi
if [[ $steps == *streams* ]]; then
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_multistream.py tests/test_compiler_pipeline.py -k cuda > "$out/tests_cuda_streams_graphs.txt" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$out/tests_cuda_streams_graphs.txt" | tail -6
fi
if [[ $steps == *bench* ]]; then
  if [ -n "${BENCH_QUICK:-}" ]; then  # T = H = 4096, bf16 only
    timeout 100 python3 benchmarks/bench_triton.py --quick --dtypes bf16 --rep 50 --out "$out/bench_triton_h100_quick" 2>&1 | grep -v -i warn | tail -10
  else
    timeout 240 python3 benchmarks/bench_triton.py --dtypes bf16 --out "$out/bench_triton_h100" 2>&1 | grep -v -i warn | tail -30
    timeout 60 python3 benchmarks/bench_triton.py --quick --dtypes fp16 --out "$out/bench_triton_h100_fp16" 2>&1 | grep -v -i warn | tail -10
  fi
fi
if [[ $steps == *e2e* ]]; then
  timeout ${E2E_TIMEOUT:-150} python3 benchmarks/bench_e2e_cuda.py --out "$out/e2e_cuda_h100" > "$out/e2e.txt" 2>&1
  tail -22 "$out/e2e.txt"
fi
