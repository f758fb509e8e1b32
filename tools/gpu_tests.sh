#!/usr/bin/env bash
# The GPU test run (on a machine with an NVIDIA GPU, PyCUDA and nvcc):
#   tools/gpu_tests.sh [RESULTS_DIR] [extra pytest args...]
# 1. polygemm info; 2. compile every kernel once, in parallel (PyCUDA's disk cache);
# 3. the cuda-marked tests; 4. the musa tests on the cuda flavor of libpolygemm_musa.
# Logs and JUnit XML land in RESULTS_DIR (default ./gpu-results).
set -uo pipefail
out=${1:-gpu-results}; shift || true
mkdir -p "$out"
rc=0
python3 -m polygemm info 2>&1 | tee "$out/info.txt"
python3 - <<'PY' 2>&1 | tee "$out/precompile.txt"
import time, polygemm as pg
be = pg.get_backend("cuda")
t = time.time()
n = be.runtime.precompile(threads=16)
print(f"precompiled {n} kernel builds in {time.time() - t:.1f} s")
PY
python3 -m pytest tests/test_cuda*.py -m cuda -q -rfEs --timeout=300 --junitxml="$out/cuda.xml" "$@" 2>&1 | tee "$out/cuda_tests.txt"
rc=$(( rc | ${PIPESTATUS[0]} ))
POLYGEMM_MUSA_TEST_FLAVOR=cuda python3 -m pytest tests/test_musa.py -q -rfEs --timeout=300 --junitxml="$out/musa_cuda.xml" 2>&1 | tee "$out/musa_cuda_tests.txt"
rc=$(( rc | ${PIPESTATUS[0]} ))
exit $rc
