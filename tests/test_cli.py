"""The command line: info, gemm --check and variants run on the CPU."""

from __future__ import annotations

import subprocess
import sys

from polygemm.cli import main


def test_info(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "polygemm" in out and "cpu" in out and "numpy" in out and "cuda" in out


def test_gemm_check(capsys):
    assert main(["gemm", "--shape", "65x33x17", "--device", "cpu", "--check"]) == 0
    out = capsys.readouterr().out
    assert "check: PASS" in out and "variant : reference" in out


def test_variants(capsys):
    assert main(["variants"]) == 0
    out = capsys.readouterr().out
    assert "reference" in out and "cuda:" in out and "musa:" in out


def test_gemm_unavailable_device_exits_nonzero(capsys):
    assert main(["gemm", "--shape", "2x2x2", "--device", "nosuch"]) == 2
    assert "unknown device 'nosuch'" in capsys.readouterr().err


def test_module_entry_point():
    r = subprocess.run([sys.executable, "-m", "polygemm", "variants", "--device", "cpu"], capture_output=True, text=True)
    assert r.returncode == 0 and "reference" in r.stdout
