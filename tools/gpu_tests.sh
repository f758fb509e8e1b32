#!/usr/bin/env bash
# The GPU test run (on a machine with an NVIDIA GPU, PyCUDA and nvcc):
#   tools/gpu_tests.sh [RESULTS_DIR] [extra pytest args...]
# 1. polygemm info; 2. compile every kernel once, in parallel (PyCUDA's disk cache), and check
#    every build of the catalog for sm_80 and sm_90 through nvcc and ptxas (CI, on two cores,
#    checks a cover of it: tools/check_kernels.py);
# 3. the cuda-marked tests (tests/backends/cuda: the kernels, and a CuPy / torch user's device arrays), 8 workers sharing
#    the GPU, a failure run again alone; 4. the musa tests on the cuda flavor of libpolygemm_musa.
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
# Several pytest-xdist workers share the one GPU: most tests wait on the host (compiles, planning, the float64
# reference), so 8 workers run the ~2,600 cuda tests in about 5 minutes on an H100 instead of about 19. A test that
# failed beside the others is run again alone, and that run decides: the few that read the device's free memory
# (leak and eviction checks) see the other workers' allocations. POLYGEMM_GPU_TEST_WORKERS=0 runs them one by one.
workers=${POLYGEMM_GPU_TEST_WORKERS:-8}
parallel=()
if [ "$workers" != 0 ] && python3 -c "import xdist" 2>/dev/null; then
  parallel=(-n "$workers")
fi
python3 -m pytest tests/backends/cuda -m cuda -q -rfE ${parallel[@]+"${parallel[@]}"} ${timeout_arg[@]+"${timeout_arg[@]}"} \
  --junitxml="$out/cuda.xml" "$@" 2>&1 | tee "$out/cuda_tests.txt"
cuda_rc=${PIPESTATUS[0]}
if [ "$cuda_rc" = 1 ] && [ ${#parallel[@]} -gt 0 ]; then
  grep -E '^(FAILED|ERROR) ' "$out/cuda_tests.txt" | sed -E 's/^(FAILED|ERROR) //; s/ - .*//' | sort -u > "$out/cuda_failed.txt"
  if [ -s "$out/cuda_failed.txt" ] && [ "$(wc -l < "$out/cuda_failed.txt")" -le 50 ]; then
    echo "== $(wc -l < "$out/cuda_failed.txt") failed beside the other workers: each again, alone" | tee -a "$out/cuda_tests.txt"
    xargs -a "$out/cuda_failed.txt" -d '\n' python3 -m pytest -p no:xdist -q -rfE ${timeout_arg[@]+"${timeout_arg[@]}"} \
      --junitxml="$out/cuda_alone.xml" 2>&1 | tee "$out/cuda_alone.txt"
    cuda_rc=$(( PIPESTATUS[0] != 0 ))  # (xargs says 123 for a command that failed)
    [ "$cuda_rc" = 0 ] && echo "note: these passed alone; they had failed beside the other workers: $out/cuda_failed.txt" >&2
  fi
fi
rc=$(( rc | cuda_rc ))
POLYGEMM_MUSA_TEST_FLAVOR=cuda python3 -m pytest tests/backends/musa/test_backend.py -q -rfE ${timeout_arg[@]+"${timeout_arg[@]}"} --junitxml="$out/musa_cuda.xml" 2>&1 | tee "$out/musa_cuda_tests.txt"
rc=$(( rc | ${PIPESTATUS[0]} ))
exit $rc
