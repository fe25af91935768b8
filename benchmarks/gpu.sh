#!/usr/bin/env bash
# The GPU checks in one run, for a machine with a CUDA device and this repository installed
# (.ci/run's environment): the CUDA tests (CPU/GPU agreement, CUDA-graph capture and replay of
# particle, fused articulation and recorded steps with their backward), then the vs_mujoco
# suite on cuda:0 (1, 64, 4,096 and 16,384 worlds against mujoco.rollout on every core) and
# the forward suite. Records go to $OUT (default gpu_results/) as JSON, the test log beside.
#     bash benchmarks/gpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu_results}"
mkdir -p "$OUT"
python -c "import warp as wp; wp.init(); assert wp.is_cuda_available(), 'no CUDA device'"
python -m pytest -q -rs tests/test_cuda.py 2>&1 | tee "$OUT/cuda_tests.txt"
for suite in vs_mujoco forward; do
    python benchmarks/run_benchmarks.py --device cuda:0 --suite "$suite" --out "$OUT/$suite.json" > /dev/null
done
echo "records in $OUT/"
