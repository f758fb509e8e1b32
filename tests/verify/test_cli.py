"""polygemm gemm --verify: the check on the timed calls, its note in the plan printed, a failed check's exit."""

from __future__ import annotations

import pytest

from polygemm.apps.cli import main
from polygemm.testing import inject_fault


def test_gemm_verify_prints_the_check_and_passes(capsys):
    assert main(["gemm", "--shape", "24x16x8", "--verify", "raise", "--check", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "verify='raise'" in out and "Freivalds" in out and "check: PASS" in out


def test_gemm_verify_fails_with_the_rows_named(capsys):
    with inject_fault(2, 3, value=1e6):
        rc = main(["gemm", "--shape", "24x16x8", "--verify", "raise"])
    assert rc == 1  # the run failed (as --check's FAIL), not its arguments (2)
    err = capsys.readouterr().err
    assert "rows 2" in err and "columns 3" in err and "threshold" in err


def test_gemm_verify_refuses_an_unknown_mode(capsys):
    with pytest.raises(SystemExit):
        main(["gemm", "--shape", "4x4x4", "--verify", "loud"])
    assert "retry" in capsys.readouterr().err


def test_explain_prices_a_bool_check_as_the_product_once_more(capsys):
    """A bool product is checked by recounting A·B: its arithmetic is the product's own (100%), not that of three
    matrix-vector products (0.3% at 1000³)."""
    assert main(["explain", "1000x1000x1000", "--dtype", "bool", "--verify", "raise", "--device", "cpu"]) == 0
    assert "= 100% of the product's arithmetic" in capsys.readouterr().out
    assert main(["explain", "1000x1000x1000", "--verify", "raise", "--device", "cpu"]) == 0
    assert "= 0.3% of the product's arithmetic" in capsys.readouterr().out


@pytest.mark.parametrize("command", [["gemm", "--shape", "8x8x8", "--repeat", "1"], ["explain", "8x8x8"]])
def test_verify_and_precision_options_take_any_case_as_the_api_does(capsys, command):
    assert main(command + ["--device", "cpu", "--verify", " RAISE ", "--precision", "High"]) == 0
    out = capsys.readouterr().out
    assert "verify='raise'" in out and "asked 'high'" in out
    with pytest.raises(SystemExit):
        main(command + ["--help"])
    help_text = capsys.readouterr().out
    assert "{off,raise,warn,retry}" in help_text and "{highest,high,medium}" in help_text


def test_a_bad_environment_value_is_one_warning_line_of_the_command():
    """Under polygemm's command line, a bad $POLYGEMM_VERIFY read at import is said as the command's other warnings
    are, one line, not Python's file, line and source."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, POLYGEMM_VERIFY="maybe")
    done = subprocess.run([sys.executable, "-m", "polygemm", "variants", "--device", "cpu"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0
    lines = [ln for ln in done.stderr.splitlines() if "POLYGEMM_VERIFY" in ln]
    assert len(lines) == 1 and lines[0].startswith("polygemm: warning: POLYGEMM_VERIFY='maybe'"), done.stderr
