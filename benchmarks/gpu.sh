#!/usr/bin/env bash
# The GPU checks in one run, for a machine with a CUDA device and this repository installed
# (.ci/run's environment): every kernel module built first (for cuda:0 and the CPU, one process
# per core; a no-op when Warp's kernel cache already holds them, e.g. from
# `wpsim build-kernels --arch 90` run on a machine without a GPU), the CUDA tests (CPU/GPU
# agreement, CUDA-graph capture and replay of particle, fused articulation and recorded steps with
# their backward), then the vs_mujoco suite on cuda:0 (the fused step at 1, 64, 4,096 and 16,384
# worlds against mujoco.rollout on every core) and the forward and rigid suites. Each part runs
# even when an earlier one failed; the exit status says whether all passed. Records go to $OUT
# (default gpu_results/) as JSON, each part's log beside them (8 files).
#     bash benchmarks/gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu_results}"
mkdir -p "$OUT"
python -c "import warp as wp; wp.init(); assert wp.is_cuda_available(), 'no CUDA device'" || exit 1
failed=()
# both builds at once: NVRTC and clang each take one core per module
python -m wpsim.apps.cli build-kernels --device cpu > "$OUT/build_kernels_cpu.txt" 2>&1 &
cpu_build=$!
python -m wpsim.apps.cli build-kernels --device cuda:0 2>&1 | tee "$OUT/build_kernels.txt" || failed+=("build-kernels cuda:0")
wait "$cpu_build" || failed+=("build-kernels cpu")
cat "$OUT/build_kernels_cpu.txt" >> "$OUT/build_kernels.txt" && rm "$OUT/build_kernels_cpu.txt"
python -m pytest -q -rs tests/test_cuda.py 2>&1 | tee "$OUT/cuda_tests.txt" || failed+=("tests/test_cuda.py")
for suite in vs_mujoco forward rigid; do
    python benchmarks/run_benchmarks.py --device cuda:0 --suite "$suite" --out "$OUT/$suite.json" \
        2> >(tee "$OUT/$suite.log" >&2) > /dev/null || failed+=("suite $suite")
done
echo "records in $OUT/"
if ((${#failed[@]})); then
    echo "failed: ${failed[*]}" >&2
    exit 1
fi
