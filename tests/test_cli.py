"""The command line: info, gemm --check and variants run on the CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import polygemm.registry as registry
from polygemm.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]


def test_info(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "polygemm" in out and "cpu" in out and "numpy" in out and "cuda" in out


def test_gemm_check(capsys):
    assert main(["gemm", "--shape", "65x33x17", "--device", "cpu", "--check"]) == 0
    out = capsys.readouterr().out
    assert "check: PASS" in out and "variant : blas" in out


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


# -- first contact (issues 17 item 15, 18) ------------------------------------------------


def test_matrix_unknown_backend_fails(capsys):
    assert main(["matrix", "--backends", "nosuch", "--quick", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "unknown backend 'nosuch'" in err and "known backends: cpu, cuda, musa" in err
    assert main(["matrix", "--backends", "cpux", "--quick", "--no-progress"]) == 2
    assert "did you mean 'cpu'" in capsys.readouterr().err


def test_gemm_repeat_must_be_positive(capsys):
    for bad in ("-1", "0", "two"):
        with pytest.raises(SystemExit) as exc:
            main(["gemm", "--shape", "2x2x2", "--device", "cpu", "--repeat", bad])
        assert exc.value.code == 2
        assert "argument --repeat: must be an integer >= 1" in capsys.readouterr().err


def _closed_pipe_run(*args: str) -> subprocess.CompletedProcess:
    """Run ``python -m polygemm ARGS`` with a stdout whose reader has already gone away."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        return subprocess.run([sys.executable, "-m", "polygemm", *args], stdout=write_end, stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    finally:
        os.close(write_end)


def test_closed_stdout_is_not_a_traceback():
    """``polygemm info | head -1``: the reader leaves early; no BrokenPipeError on stderr."""
    for args in (("info",), ("variants",), ("--help",)):
        r = _closed_pipe_run(*args)
        assert "BrokenPipeError" not in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
        assert r.returncode in (0, 141), (args, r.returncode)


def test_info_head_in_a_shell():
    r = subprocess.run(f"{sys.executable} -m polygemm info | head -1", shell=True, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}, cwd=str(ROOT))
    assert r.stdout.startswith("polygemm ") and "Error" not in r.stderr, r.stderr


def _long_info(name: str, available: bool = False) -> registry.BackendInfo:
    text = f"{name} could not load: " + "tried /opt/vendor/very/long/path/libvendor.so: no such file; " * 10 + "\nsecond line"
    return registry.BackendInfo(name, available, text, 300, "entry point " + "x" * 150 + ":B (dist)", None, text)


def test_info_lines_fit_120_columns(monkeypatch, capsys):
    """info cuts and wraps whatever the registry hands it; -v prints the full text."""
    real = registry.backends()
    monkeypatch.setattr(registry, "backends", lambda: real + [_long_info("verylongpluginname_" * 3)])
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 120, out
    assert "verylongpluginname_" in out and "polygemm info -v" in out
    assert main(["info", "-v"]) == 0
    out = capsys.readouterr().out
    assert "second line" in out and out.count("libvendor.so") >= 10


def test_info_verbose_prints_a_short_reason_once(monkeypatch, capsys):
    """-v prints the detail lines past the reason, not the reason again."""
    real = registry.backends()
    text = "vendorlib is the emulation flavor: set VENDOR_EMULATION=1\nlibrary: /opt/vendor/libvendor.so"
    info = registry.BackendInfo("vendorx", False, text, 300, "entry point x:B (dist)", None, text)
    monkeypatch.setattr(registry, "backends", lambda: real + [info])
    assert main(["info", "-v"]) == 0
    out = capsys.readouterr().out
    assert out.count("set VENDOR_EMULATION=1") == 1 and "| library: /opt/vendor/libvendor.so" in out


def test_info_as_installed_fits_120_columns(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 120, out


def test_variants_table(capsys):
    assert main(["variants"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert len(lines) < 70  # one line per variant: no wrapped descriptions in the short table
    rows = {line.split()[0]: line.split()[1] for line in lines if line.startswith("  ") and len(line.split()) > 2}
    assert rows["blas"] == "yes" and rows["reference"] == "no" and rows["numpy"] == "vendor"
    assert rows["cublas"] == "vendor" and rows["cm_v02_smem_tiling"] == "no" and rows["hgemm_v1_mma_ldmatrix"] == "yes"
    assert "auto: yes = variant='auto' may pick it" in out
    assert main(["variants", "-v", "--backends", "cuda"]) == 0
    out = capsys.readouterr().out
    assert "needs:" in out and "cp.async" in out and "cpu:" not in out


def test_variants_and_matrix_accept_both_spellings(capsys):
    assert main(["variants", "--device", "cpu"]) == 0
    a = capsys.readouterr().out
    assert main(["variants", "--backends", "cpu"]) == 0
    assert capsys.readouterr().out == a and "cuda:" not in a
    assert main(["matrix", "--device", "cpu", "--quick", "--dtypes", "float64", "--no-progress"]) == 0
    assert " 0 failed" in capsys.readouterr().out
    assert main(["variants", "--device", "nosuch"]) == 2
    assert "unknown device 'nosuch'" in capsys.readouterr().err


def test_every_option_has_help_and_defaults_are_shown():
    parser = build_parser()
    subs = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices
    for name in ("info", "variants", "gemm", "matrix"):
        for action in subs[name]._actions:
            assert action.help, f"polygemm {name} {action.option_strings or action.dest} has no help"
    text = subs["gemm"].format_help()
    assert "(default: float32)" in text and "(default: 3)" in text and "(default: auto)" in text


def test_cli_refuses_what_it_cannot_do_with_a_message(capsys):
    """A negative --batch is a usage error; a shape whose operands cannot be allocated says so
    (exit 2, no traceback)."""
    from polygemm.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--batch", "-1"])
    assert exc.value.code == 2 and "--batch: must be 0" in capsys.readouterr().err
    assert main(["gemm", "--device", "cpu", "--shape", "99999999x99999999x9999999"]) == 2
    assert "GiB of host memory" in capsys.readouterr().err


def test_an_unreadable_plan_cache_size_warns_and_keeps_the_default():
    import subprocess
    import sys

    code = "import warnings; warnings.simplefilter('error', RuntimeWarning)\ntry:\n import polygemm\nexcept RuntimeWarning as w: print('warned', w)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "POLYGEMM_PLAN_CACHE_SIZE": "lots"})
    assert "warned POLYGEMM_PLAN_CACHE_SIZE='lots' is not a whole number; keeping 256 plans" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-c", "import polygemm.api as a; print(a.PLAN_CACHE_SIZE)"], capture_output=True, text=True,
                       env={**os.environ, "POLYGEMM_PLAN_CACHE_SIZE": ""})
    assert r.stdout.strip() == "256", r.stderr


def test_gemm_command_takes_bfloat16(capsys):
    assert main(["gemm", "--device", "cpu", "--shape", "33x17x65", "--dtype", "bfloat16", "--check"]) == 0
    assert "check: PASS" in capsys.readouterr().out
