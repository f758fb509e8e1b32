"""What a new user copies from README.md, docs/*.md and examples/*/README.md (round 5).

Each test runs a documented command or snippet as written (or the GPU-only ones on a
machine without the GPU, where they must say what is missing instead of a traceback).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import polygemm

ROOT = Path(__file__).resolve().parents[1]


def _cuda_available() -> bool:
    return any(i.name == "cuda" and i.available for i in polygemm.backends())


def test_readme_first_snippet_runs_as_written() -> None:
    """The README's opening example, verbatim: auto, explain, the reference, matmul."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S)
    assert block is not None
    proc = subprocess.run([sys.executable, "-c", block.group(1)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "polygemm plan:" in proc.stdout and "backend :" in proc.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_gpu_tests_sh_without_cuda_says_what_is_missing(tmp_path: Path) -> None:
    """README: 'GPU test run: tools/gpu_tests.sh'. Where cuda is unavailable it was a
    BackendUnavailableError traceback from the precompile step, then pytest's usage error
    for --timeout (pytest-timeout is not in the [test] extra), exit 4; now one line saying
    the script needs the cuda backend and why it is unavailable, exit 2."""
    if _cuda_available():
        pytest.skip("cuda is available here: the script would run the GPU tests")
    proc = subprocess.run(["bash", "tools/gpu_tests.sh", str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT),  # the script runs python3: this interpreter
                               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"})
    both = proc.stdout + proc.stderr
    assert proc.returncode == 2, both
    assert "needs the cuda backend" in proc.stderr
    assert "Traceback" not in both and "unrecognized arguments" not in both


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_cmake_musa_flavor_without_toolkit_names_the_toolkit(tmp_path: Path) -> None:
    """docs/musa.md: 'cmake -S . -B build/musa -DPOLYGEMM_MUSA_FLAVOR=musa' on a machine
    without the MUSA toolkit said only that no FindMUSA.cmake / MUSAConfig.cmake was found;
    now it names the toolkit, where it looked, -DPOLYGEMM_MUSA_ROOT and the host flavor."""
    if Path("/usr/local/musa/cmake/FindMUSA.cmake").exists():
        pytest.skip("the MUSA toolkit is installed here")
    proc = subprocess.run(["cmake", "-S", str(ROOT), "-B", str(tmp_path / "b"), "-DPOLYGEMM_MUSA_FLAVOR=musa"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    err = " ".join(proc.stderr.split())
    assert "needs the MUSA toolkit" in err
    assert "POLYGEMM_MUSA_ROOT" in err and "-DPOLYGEMM_MUSA_FLAVOR=host" in err


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("target", ["ncu", "ceiling"])
def test_gpu_results_sh_without_cuda_writes_nothing(tmp_path: Path, target: str) -> None:
    """docs/benchmarking.md: 'tools/gpu_results.sh TARGET [OUT]'. Where cuda is unavailable every
    target refuses before it writes: exit 2, naming the reason, no file written (an all-skip
    matrix or an empty profile would look like a result). Run on a copy of the script, so a
    regression cannot clobber this checkout."""
    if _cuda_available():
        pytest.skip("cuda is available here: the script would measure")
    (tmp_path / "tools").mkdir()
    shutil.copy(ROOT / "tools" / "gpu_results.sh", tmp_path / "tools")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(["bash", "tools/gpu_results.sh", target], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "needs the cuda backend" in proc.stderr and "nothing was written" in proc.stderr
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != tmp_path / "tools" / "gpu_results.sh"]
    assert written == []
