#!/usr/bin/env bash
# The GPU test run (on a machine with an NVIDIA GPU, PyCUDA and nvcc):
#   tools/gpu_tests.sh [RESULTS_DIR] [extra pytest args...]
# 1. polygemm info; 2. compile every kernel once, in parallel (PyCUDA's disk cache), and check
#    every build of the catalog for sm_80 and sm_90 through nvcc and ptxas (CI, on two cores,
#    checks a cover of it: tools/check_kernels.py);
# 3. the cuda-marked tests (tests/backends/cuda: the kernels, and a CuPy / torch user's device arrays); 4. the musa tests on the cuda flavor of libpolygemm_musa.
# Logs and JUnit XML land in RESULTS_DIR (default ./gpu-results).
set -uo pipefail
out=${1:-gpu-results}; shift || true
mkdir -p "$out"
rc=0
python3 -m polygemm info 2>&1 | tee "$out/info.txt"
# without a usable cuda backend nothing below can run: say why, once, instead of a traceback
python3 - <<'PY' || exit 2
import sys, polygemm
info = {i.name: i for i in polygemm.backends()}["cuda"]
if not info.available:
    sys.exit(f"tools/gpu_tests.sh needs the cuda backend (an NVIDIA GPU, its driver and PyCUDA): {info.reason}")
PY
# --timeout needs the pytest-timeout plugin, which the [test] extra does not bring
timeout_arg=()
if python3 -c "import pytest_timeout" 2>/dev/null; then
  timeout_arg=(--timeout=300)
else
  echo "note: pytest-timeout is not installed (pip install pytest-timeout): the tests run without a per-test time limit" >&2
fi
python3 - <<'PY' 2>&1 | tee "$out/precompile.txt"
import time, polygemm as pg
be = pg.get_backend("cuda")
t = time.time()
n = be.runtime.precompile(threads=16)
print(f"precompiled {n} kernel builds in {time.time() - t:.1f} s")
PY
if command -v nvcc >/dev/null 2>&1; then
  python3 tools/check_kernels.py --builds all -q -j "$(nproc)" 2>&1 | tee "$out/check_kernels.txt"
  rc=$(( rc | ${PIPESTATUS[0]} ))
else
  echo "note: nvcc is not on PATH: the full catalog check (tools/check_kernels.py --builds all) did not run" >&2
fi
python3 -m pytest tests/backends/cuda -m cuda -q -rfE ${timeout_arg[@]+"${timeout_arg[@]}"} --junitxml="$out/cuda.xml" "$@" 2>&1 | tee "$out/cuda_tests.txt"
rc=$(( rc | ${PIPESTATUS[0]} ))
POLYGEMM_MUSA_TEST_FLAVOR=cuda python3 -m pytest tests/backends/musa/test_backend.py -q -rfE ${timeout_arg[@]+"${timeout_arg[@]}"} --junitxml="$out/musa_cuda.xml" 2>&1 | tee "$out/musa_cuda_tests.txt"
rc=$(( rc | ${PIPESTATUS[0]} ))
exit $rc
