#!/usr/bin/env bash
# The checks and measurements that need a CUDA GPU, in one run (a lent GPU's time is short):
# the Triton kernels' tests natively, the CUDA-graph and side-stream tests, the kernel
# benchmark, the tiled kernels' tile sweep, the row kernel's launch-geometry sweep,
# npu_quant_matmul's GEMM sweep and the embedded model. Full logs and
# results go to ${OUT:-benchmarks/results}, named after the GPU (h100, h200, ...); the steps
# named in $GPU_STEPS run (default: all).
#   bash benchmarks/gpu_checks.sh
set -u
out=${OUT:-benchmarks/results}
steps=${GPU_STEPS:-tests streams bench tiles sweep qmm e2e}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -o -i -E "[a-z][0-9]{2,3}" | head -1 | tr A-Z a-z)
gpu=${gpu:-gpu}
python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)" | tee -a "$out/gpu.txt"
if [[ $steps == *tests* ]]; then
  timeout ${TESTS_TIMEOUT:-300} python3 -m pytest -q -p no:cacheprovider tests/triton > "$out/tests_triton_cuda.txt" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$out/tests_triton_cuda.txt" | tail -8
fi
if [[ $steps == *e2e* ]]; then
  timeout ${E2E_TIMEOUT:-300} python3 benchmarks/bench_e2e_cuda.py --out "$out/e2e_cuda_${gpu}" > "$out/e2e.txt" 2>&1
  tail -22 "$out/e2e.txt"
fi
if [[ $steps == *streams* ]]; then
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_multistream.py tests/test_compiler_pipeline.py -k cuda > "$out/tests_cuda_streams_graphs.txt" 2>&1
  grep -E "^(FAILED|ERROR)|passed|failed" "$out/tests_cuda_streams_graphs.txt" | tail -6
fi
if [[ $steps == *bench* ]]; then
  if [ -n "${BENCH_QUICK:-}" ]; then  # T = 4096, H = 4096 and 7168, bf16 only
    timeout ${BENCH_TIMEOUT:-150} python3 benchmarks/bench_triton.py --quick --H 4096 7168 --dtypes bf16 --rep 40 --out "$out/bench_triton_${gpu}_quick" 2>&1 | grep -v -i warn | tail -24
  else
    timeout 240 python3 benchmarks/bench_triton.py --dtypes bf16 --out "$out/bench_triton_${gpu}" 2>&1 | grep -v -i warn | tail -30
    timeout 60 python3 benchmarks/bench_triton.py --quick --dtypes fp16 --out "$out/bench_triton_${gpu}_fp16" 2>&1 | grep -v -i warn | tail -10
  fi
fi
if [[ $steps == *tiles* ]]; then
  timeout ${TILES_TIMEOUT:-120} python3 benchmarks/sweep_tiles.py --out "$out/sweep_tiles_${gpu}" 2>&1 | grep -v -i warn | tail -40
fi
if [[ $steps == *sweep* ]]; then
  timeout ${SWEEP_TIMEOUT:-120} python3 benchmarks/sweep_rows.py --out "$out/sweep_rows_${gpu}" 2>&1 | grep -v -i warn | tail -60
fi
if [[ $steps == *qmm* ]]; then
  timeout ${QMM_TIMEOUT:-200} python3 benchmarks/sweep_quant_matmul.py --out "$out/sweep_quant_matmul_${gpu}" 2>&1 | grep -v -i warn | tail -20
fi
