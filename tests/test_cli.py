"""The command line: info, gemm --check and variants run on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import polygemm.registry as registry
from polygemm.apps.cli import build_parser, main

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
        assert "argument --repeat/--repeats: must be an integer >= 1" in capsys.readouterr().err


def test_gemm_takes_repeats_as_bench_spells_it(capsys):
    # polygemm bench takes --repeats (and --repeat, a prefix of it); gemm took --repeat only, and
    # "polygemm gemm ... --repeats 2" was a usage error
    assert main(["gemm", "--shape", "3x4x5", "--device", "cpu", "--repeats", "2", "--seed", "1"]) == 0
    assert "best of 2 " in capsys.readouterr().out
    assert main(["gemm", "--shape", "3x4x5", "--device", "cpu", "--repeat", "4", "--seed", "1"]) == 0
    assert "best of 4 " in capsys.readouterr().out


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
    rows = {line.split()[0]: line.split()[1] for line in lines if line.startswith("  ") and len(line.split()) > 2}
    assert len(lines) - len(rows) < 10  # one line per variant: no wrapped descriptions in the short table
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
    text = " ".join(subs["gemm"].format_help().split())  # as read, whatever the terminal's width wrapped
    assert "(default: float32)" in text and "(default: 3)" in text and "(default: auto)" in text


def test_cli_refuses_what_it_cannot_do_with_a_message(capsys):
    """A negative --batch is a usage error; a shape whose operands cannot be allocated says so
    (exit 2, no traceback)."""
    from polygemm.apps.cli import main

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
    r = subprocess.run([sys.executable, "-c", "import polygemm.plan_cache as a; print(a.PLAN_CACHE_SIZE)"], capture_output=True, text=True,
                       env={**os.environ, "POLYGEMM_PLAN_CACHE_SIZE": ""})
    assert r.stdout.strip() == "256", r.stderr


def test_gemm_command_takes_bfloat16(capsys):
    assert main(["gemm", "--device", "cpu", "--shape", "33x17x65", "--dtype", "bfloat16", "--check"]) == 0
    assert "check: PASS" in capsys.readouterr().out


# -- info and variants --json ----------------------------------------------------------------


def _json_out(capsys, argv: list[str]) -> dict:
    """Run the command; its whole stdout must be one JSON document."""
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    return json.loads(captured.out)


def test_info_json_is_machine_readable(capsys):
    import numpy as np

    import polygemm

    data = _json_out(capsys, ["info", "--json"])
    assert data["polygemm"] == polygemm.__version__ and data["python"] == sys.version.split()[0]
    assert data["libraries"]["numpy"] == {"version": np.__version__, "error": None}
    assert set(data["libraries"]) == {"numpy", "cffi", "pycuda"}
    infos = registry.backends()
    assert [b["name"] for b in data["backends"]] == [i.name for i in infos]  # highest priority first, as the text
    by_name = {b["name"]: b for b in data["backends"]}
    cpu = by_name["cpu"]
    assert cpu["available"] is True and cpu["priority"] == 0 and cpu["reason"] == "" and cpu["errors"] == []
    assert set(cpu["dtypes"]) == {"float16", "bfloat16", "float32", "float64"} and cpu["device"].startswith("CPU")
    assert "polygemm.backends.cpu_ref" in cpu["source"]
    for info in infos:
        record = by_name[info.name]
        assert record["available"] is info.available and record["priority"] == info.priority
        if not info.available:  # the reason, and the whole text (info -v), with no device and no dtypes
            assert record["reason"] == registry.one_line(info.reason) and record["detail"] == (info.detail or info.reason)
            assert record["device"] is None and record["dtypes"] is None
    assert _json_out(capsys, ["info", "--json", "-"]) == data  # "-" is standard output here, as --json alone
    assert _json_out(capsys, ["info", "--json", "-v"]) == data  # -v changes the text only; the JSON has every reason in full


def test_info_json_has_each_reason_in_full(monkeypatch, capsys):
    real = registry.backends()
    monkeypatch.setattr(registry, "backends", lambda: real + [_long_info("vendorlong")])
    data = _json_out(capsys, ["info", "--json"])
    record = data["backends"][-1]
    assert record["name"] == "vendorlong" and record["available"] is False
    assert len(record["reason"]) <= 120 and record["detail"].count("libvendor.so") == 10 and record["detail"].endswith("second line")


def test_variants_json_is_machine_readable(capsys):
    data = _json_out(capsys, ["variants", "--json"])
    names = [b["name"] for b in data["backends"]]
    assert names == registry.known_names() and {"cpu", "cuda", "musa"} <= set(names)
    for backend in data["backends"]:  # the static tables, device or not
        assert backend["error"] is None
        table = registry.get_backend(backend["name"]).variants()
        assert [v["name"] for v in backend["variants"]] == [v.name for v in table]
        for row, v in zip(backend["variants"], table):
            assert row == {"name": v.name, "dtypes": list(v.dtypes), "out_dtypes": list(v.out_dtypes), "auto": v.auto,
                           "vendor": v.vendor, "layout": v.layout, "tile": v.tile, "requirements": v.requirements,
                           "description": v.description}
    rows = {v["name"]: v for b in data["backends"] for v in b["variants"]}
    assert rows["blas"]["auto"] is True and rows["reference"]["auto"] is False and rows["numpy"]["vendor"] is True
    assert rows["cublas"]["vendor"] is True and rows["hgemm_v1_mma_ldmatrix"]["auto"] is True
    cpu_only = _json_out(capsys, ["variants", "--device", "cpu", "--json"])
    assert [b["name"] for b in cpu_only["backends"]] == ["cpu"] and cpu_only["backends"][0] == data["backends"][names.index("cpu")]
    assert _json_out(capsys, ["variants", "--json", "-", "--backends", "cpu", "-v"]) == cpu_only


def test_variants_json_names_a_broken_backend(monkeypatch, capsys):
    monkeypatch.setattr(registry, "known_names", lambda: ["cpu", "nosuchbackend"])
    data = _json_out(capsys, ["variants", "--json"])
    broken = data["backends"][1]
    assert broken["name"] == "nosuchbackend" and broken["variants"] is None and "nosuchbackend" in broken["error"]
    assert data["backends"][0]["name"] == "cpu" and data["backends"][0]["error"] is None


@pytest.mark.parametrize("command", [["info"], ["variants", "--device", "cpu"]])
def test_info_and_variants_json_to_a_file(tmp_path, capsys, command):
    """--json PATH writes the file and prints the text, then 'wrote PATH', as bench and matrix do."""
    assert main(command) == 0
    text = capsys.readouterr().out
    path = tmp_path / "out.json"
    assert main([*command, "--json", str(path)]) == 0
    assert capsys.readouterr().out == text + f"wrote {path}\n"
    assert json.loads(path.read_text()) == _json_out(capsys, [*command, "--json"])


@pytest.mark.parametrize("command", ["info", "variants"])
@pytest.mark.parametrize("value, says", [("", "--json '': an empty path; name a file (e.g. --json results.json)"),
                                         (" ", "--json ' ': an empty path"),
                                         ("{tmp}/missing/x.json", "the folder {tmp}/missing does not exist"),
                                         ("{tmp}", "that is a folder; name a file")])
def test_info_and_variants_refuse_an_odd_json_path_as_bench_does(tmp_path, capsys, command, value, says):
    value, says = value.format(tmp=tmp_path), says.format(tmp=tmp_path)
    assert main([command, "--json", value]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and says in captured.err and captured.err.startswith("polygemm: error: --json")
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--json", value]) == 2
    assert says in capsys.readouterr().err  # the same words as bench's


def test_json_dash_is_still_refused_where_json_names_a_file(tmp_path, monkeypatch, capsys):
    """Only info and variants print JSON on stdout; matrix's --json - stays a usage error."""
    monkeypatch.chdir(tmp_path)
    assert main(["matrix", "--backends", "cpu", "--quick", "--json", "-"]) == 2
    assert "polygemm writes --json to a file, not to standard output" in capsys.readouterr().err


# -- polygemm explain ----------------------------------------------------------------------------

def test_explain_prints_the_plan_of_polygemm_explain(capsys):
    assert main(["explain", "--shape", "64x32x16", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "64x32x16" in out and "backend : cpu" in out and "variant : blas" in out and "why" in out
    assert "b=row-major" in out


def test_explain_takes_transposed_operands_and_a_variant(capsys):
    assert main(["explain", "--shape", "64x32x16", "--device", "cpu", "--variant", "reference", "--transpose-a", "--transpose-b"]) == 0
    out = capsys.readouterr().out
    assert "variant : reference" in out and "a=col-major" in out and "b=col-major" in out and "copies  : none" in out


def test_explain_json_on_stdout_and_to_a_file(capsys, tmp_path):
    assert main(["explain", "--shape", "8x4x2", "--dtype", "float16", "--device", "cpu", "--batch", "3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["m"], data["n"], data["k"], data["batch"]) == (8, 4, 2, [3])
    assert data["dtype"] == "float16" and data["backend"] == "cpu" and data["variant"] and data["reason"]
    assert set(data["layouts"]) == {"a", "b"} and isinstance(data["passed_over"], list)
    path = tmp_path / "plan.json"
    assert main(["explain", "--shape", "8x4x2", "--device", "cpu", "--json", str(path)]) == 0
    assert "variant" in capsys.readouterr().out and json.loads(path.read_text())["backend"] == "cpu"


def test_explain_refuses_an_unknown_variant_naming_it(capsys):
    assert main(["explain", "--shape", "8x8x8", "--device", "cpu", "--variant", "no_such_rung"]) == 2
    err = capsys.readouterr().err
    assert "no_such_rung" in err and "error" in err


def test_explain_needs_a_shape(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["explain", "--shape", "8x8"])
    assert exc.value.code == 2 and "MxNxK" in capsys.readouterr().err


def test_applications_are_not_imported_by_the_library():
    """polygemm.apps sits above the library: importing polygemm (and its backends) imports no application."""
    code = ("import sys, polygemm, polygemm.backends.cpu_ref, polygemm.testing; "
            "print([m for m in sys.modules if m.startswith('polygemm.apps')])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr
