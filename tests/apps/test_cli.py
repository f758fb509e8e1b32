"""The command line: info, gemm, variants, usage errors of one line."""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import polygemm
import polygemm as pg
import polygemm.apps.cli as cli_module
import polygemm.registry as registry
from polygemm.apps.cli import build_parser, main
from polygemm.errors import BackendUnavailableError
from polygemm.testing import assert_close

from tests.helpers import cli, cli_error_line, documented_cli_options, REPO_ROOT, usage_error


ROOT = REPO_ROOT


def _closed_pipe_run(*args: str) -> subprocess.CompletedProcess:
    """Run ``python -m polygemm ARGS`` with a stdout whose reader has already gone away."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        return subprocess.run([sys.executable, "-m", "polygemm", *args], stdout=write_end, stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    finally:
        os.close(write_end)


def _long_info(name: str, available: bool = False) -> registry.BackendInfo:
    text = f"{name} could not load: " + "tried /opt/vendor/very/long/path/libvendor.so: no such file; " * 10 + "\nsecond line"
    return registry.BackendInfo(name, available, text, 300, "entry point " + "x" * 150 + ":B (dist)", None, text)


def _json_out(capsys, argv: list[str]) -> dict:
    """Run the command; its whole stdout must be one JSON document."""
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    return json.loads(captured.out)


COMMANDS = ["info", "variants", "gemm", "bench", "plot", "matrix", "ceiling", "compile"]


def usage_error_2(capsys, argv):
    from polygemm.apps.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def _auto_backend() -> str:
    """What device="auto" runs float32 on here: a machine without a GPU runs the CPU, a GPU machine cuda."""
    return "cuda" if {i.name: i for i in pg.backends()}["cuda"].available else "cpu"


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


DOCUMENTED = documented_cli_options()


_VARIANT_BASE = '''
from polygemm.backend import Availability, Backend, Variant

class B(Backend):
    priority = 300
    def probe(self):
        return Availability(True)
    def plan(self, problem, variant="auto"):
        raise AssertionError("never planned")
    def run(self, plan):
        raise AssertionError("never run")
'''


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The command line's one-line refusal (status 2, no traceback, nothing on stdout)."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err and len(captured.err.strip().splitlines()) == 1, captured.err
    return captured.err.strip()


def test_info(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "polygemm" in out and "cpu" in out and "numpy" in out and "cuda" in out


def test_gemm_check(capsys):
    assert main(["gemm", "--shape", "65x33x17", "--device", "cpu", "--check"]) == 0
    out = capsys.readouterr().out
    assert "check: PASS" in out and "variant : blas" in out


@pytest.mark.parametrize("dtype, says", [("int8", "equal numpy.matmul's (exact)"), ("bool", "equal numpy.matmul's (exact)"),
                                         ("uint32", "equal numpy.matmul's (exact)"), ("complex64", "within the bound")])
def test_gemm_runs_and_checks_every_dtype_the_cpu_computes(capsys, dtype, says):
    assert main(["gemm", "--shape", "17x9x23:nt", "--device", "cpu", "--dtype", dtype, "--repeat", "1", "--check"]) == 0
    assert f"check: PASS" in (out := capsys.readouterr().out) and says in out


def test_gemm_check_of_an_integer_product_fails_where_an_element_differs(capsys, monkeypatch):
    real = polygemm.gemm
    monkeypatch.setattr(polygemm, "gemm", lambda *a, **k: real(*a, **k) + np.int16(1) * (np.arange(9 * 7).reshape(9, 7) == 5))
    assert main(["gemm", "--shape", "9x7x5", "--device", "cpu", "--dtype", "int16", "--repeat", "1", "--check"]) == 1
    assert "check: FAIL: 1 of 63 elements differ from numpy.matmul's" in capsys.readouterr().out


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


def test_cli_module_runs_as_the_package_does():
    # python -m polygemm.apps.cli is the same command as python -m polygemm
    from polygemm import __version__
    from tests.helpers import subprocess_env

    r = subprocess.run([sys.executable, "-m", "polygemm.apps.cli", "--version"], capture_output=True, text=True,
                       env=subprocess_env(), timeout=120)
    assert r.returncode == 0 and __version__ in r.stdout
    r = subprocess.run([sys.executable, "-m", "polygemm.apps.cli", "bogus"], capture_output=True, text=True,
                       env=subprocess_env(), timeout=120)
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_matrix_of_a_named_backend_that_runs_no_case_fails(capsys):
    # musa has no device on the machines the suite runs on: every case skips, and a CI job naming it must not pass
    import polygemm

    if polygemm.registry.get_backend("musa").probe().ok:
        pytest.skip("a MUSA device is here: its matrix runs")
    assert main(["matrix", "--backends", "musa", "--quick", "--no-progress"]) == 1
    assert "musa computed no product" in capsys.readouterr().err
    assert main(["matrix", "--backends", "cpu", "--quick", "--no-progress", "--dtypes", "float64"]) == 0


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
    # polygemm bench takes --repeats (and --repeat, a prefix of it); gemm takes both spellings too
    assert main(["gemm", "--shape", "3x4x5", "--device", "cpu", "--repeats", "2", "--seed", "1"]) == 0
    assert "best of 2 " in capsys.readouterr().out
    assert main(["gemm", "--shape", "3x4x5", "--device", "cpu", "--repeat", "4", "--seed", "1"]) == 0
    assert "best of 4 " in capsys.readouterr().out


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
    # about 100 columns, past them only where a long variant name leaves its tile less than the block tile's words
    from polygemm.apps.cli import TABLE_WIDTH, TILE_SHOWN

    assert all(len(line) <= TABLE_WIDTH or len(line.split("  block")[0]) + TILE_SHOWN + 2 >= len(line) for line in lines), \
        max(lines, key=len)
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


def test_gemm_refuses_a_shape_past_the_machines_memory_before_allocating(capsys, monkeypatch):
    # Linux grants the allocation and its OOM killer ends the process later, without a word
    monkeypatch.setattr(cli_module, "host_memory", lambda: 4 * 2**30)
    assert main(["gemm", "--device", "cpu", "--shape", "20000x20000x20000"]) == 2
    err = capsys.readouterr().err
    assert "--shape 20000x20000x20000" in err and "this machine has 4.0 GiB" in err and "smaller shape" in err


def test_gemm_command_takes_bfloat16(capsys):
    assert main(["gemm", "--device", "cpu", "--shape", "33x17x65", "--dtype", "bfloat16", "--check"]) == 0
    assert "check: PASS" in capsys.readouterr().out


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
    assert set(cpu["dtypes"]) >= {"float16", "bfloat16", "float32", "float64", "complex64", "int64", "bool"}
    assert cpu["device"].startswith("CPU")
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
                           "description": v.description, "precision": v.precision}
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


def test_explain_prints_the_plan_of_polygemm_explain(capsys):
    assert main(["explain", "--shape", "64x32x16", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "64x32x16" in out and "backend : cpu" in out and "variant : blas" in out and "why" in out
    assert "b=row-major" in out


def test_explain_takes_transposed_operands_and_a_variant(capsys):
    assert main(["explain", "--shape", "64x32x16", "--device", "cpu", "--variant", "reference", "--transpose-a", "--transpose-b"]) == 0
    out = capsys.readouterr().out
    assert "variant : reference" in out and "a=col-major" in out and "b=col-major" in out and "copies  : none" in out


def test_explain_takes_the_shape_as_bench_does_with_its_layout_out_dtype_and_verify(capsys):
    # MxNxK[:LAYOUT] by position or --shape, as bench and tune take it (t: a transposed view, x @ W.T is nt)
    assert main(["explain", "64x32x16:tn", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "a=col-major" in out and "b=row-major" in out
    assert main(["explain", "--shape", "8x8x8:nt", "--device", "cpu", "--dtype", "float16", "--out-dtype", "float32",
                 "--verify", "raise", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["out_dtype"] == "float32" and data["layouts"]["b"].startswith("col-major")
    assert any("verify='raise'" in n for n in data["notes"])
    assert main(["explain", "--device", "cpu"]) == 2 and "give the shape once" in capsys.readouterr().err
    assert main(["explain", "8x8x8", "--shape", "8x8x8"]) == 2


def test_explain_json_on_stdout_and_to_a_file(capsys, tmp_path):
    assert main(["explain", "--shape", "8x4x2", "--dtype", "float16", "--device", "cpu", "--batch", "3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["m"], data["n"], data["k"], data["batch"]) == (8, 4, 2, [3])
    assert data["dtype"] == "float16" and data["backend"] == "cpu" and data["variant"] and data["reason"]
    assert set(data["layouts"]) == {"a", "b"} and isinstance(data["passed_over"], list)
    path = tmp_path / "plan.json"
    assert main(["explain", "--shape", "8x4x2", "--device", "cpu", "--json", str(path)]) == 0
    assert "variant" in capsys.readouterr().out and json.loads(path.read_text())["backend"] == "cpu"
    # "--json 8x4x2": the shape, not a file of that name (--json takes an optional path)
    assert main(["explain", "--device", "cpu", "--json", "8x4x2:nt"]) == 0
    assert json.loads(capsys.readouterr().out)["k"] == 2 and not (tmp_path / "8x4x2:nt").exists()


def test_explain_refuses_an_unknown_variant_naming_it(capsys):
    assert main(["explain", "--shape", "8x8x8", "--device", "cpu", "--variant", "no_such_rung"]) == 2
    err = capsys.readouterr().err
    assert "no_such_rung" in err and "error" in err


def test_explain_plans_shapes_larger_than_host_memory_and_refuses_past_numpy(capsys):
    # planning reads shapes and strides only: a product a GPU holds is explained on any machine
    assert main(["explain", "--shape", "300000x300000x300000", "--device", "cpu", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["m"], data["n"], data["k"]) == (300000, 300000, 300000) and data["backend"] == "cpu"
    assert main(["explain", "--shape", "9999999999999x9999999999999x9999999999", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "--shape" in err and "smaller shape" in err and "Traceback" not in err


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


def test_plugins_broken_otherwise_are_listed_with_their_reason_and_nothing_else_breaks(broken, capsys, rng):
    infos = {i.name: i for i in pg.backends()}
    expect = {
        "noattr": "import failed: AttributeError", "nomod": "ModuleNotFoundError", "initargs": "missing 1 required positional",
        "initraises": "no licence file", "notbackend": "is not a polygemm Backend", "syntaxerr": "SyntaxError",
        "silentprobe": "probe said unavailable without a reason",
    }
    for name, says in expect.items():
        assert not infos[name].available and says in infos[name].reason, (name, infos[name].reason)
        with pytest.raises(BackendUnavailableError, match=f"'{name}'"):
            pg.gemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), device=name)
    assert infos["cpu"].available
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((3, 4))
    assert_close(pg.gemm(a, b, device="cpu"), a, b)
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    for name in expect:
        assert name in out
    assert "no licence file" in out and "probe said unavailable without a reason" in out


def test_no_command_is_a_usage_error_listing_the_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main([])  # what `python -m polygemm` runs (test_module_entry_point runs that process)
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and "Traceback" not in err and out == ""
    assert "required: command" in err.strip().splitlines()[-1]
    assert all(c in err for c in COMMANDS), err


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(capsys, command):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and out.startswith(f"usage: polygemm {command}") and "options:" in out


@pytest.mark.parametrize("shape", ["3x4x5", "3X4X5", "3×4×5", " 3 x 4 x 5 "])
def test_gemm_takes_a_shape_written_otherwise(capsys, shape):
    assert main(["gemm", "--shape", shape, "--device", "cpu", "--repeat", "1", "--seed", "1", "--check"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("polygemm plan: 3x4x5 (MxNxK) float32") and "check: PASS" in out


@pytest.mark.parametrize("shape", ["3x4", "3,4,5", "3x4x5x6", "1e3x2x2", "3x4.0x5", "x4x5"])
def test_gemm_shapes_it_cannot_read_name_the_option_and_the_form(capsys, shape):
    line = usage_error(capsys, ["gemm", "--shape", shape])
    assert "argument --shape" in line and "MxNxK" in line and repr(shape) in line


@pytest.mark.parametrize("argv, option", [
    (["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--json", ""], "--json"),
    (["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--markdown", " "], "--markdown"),
    (["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--plot", ""], "--plot"),
    (["matrix", "--backends", "cpu", "--quick", "--json", ""], "--json"),
])
def test_an_empty_output_path_is_refused_before_the_run(capsys, argv, option):
    # "--json $OUT" with OUT unset would run the whole benchmark and write nothing: refused first
    # (polygemm/apps/cli.py)
    line = cli_error_line(capsys, argv)
    assert f"{option} " in line and "an empty path; name a file" in line
    assert capsys.readouterr().out == ""  # refused before anything ran


def test_info_and_variants_say_what_they_list(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"polygemm {pg.__version__}") and "backends (highest priority first):" in out
    assert any(ln.split()[:1] == ["cpu"] and "available" in ln for ln in out.splitlines())
    assert main(["variants", "-v", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cpu:") and "reference" in out and "dtypes: float16, bfloat16, float32, float64" in out
    # a float32 result is offered of 16-bit inputs alone (a float64 or integer product writes its own dtype)
    assert "float16 and bfloat16 also with float32 results" in out and "output also" not in out


def test_info_on_this_machine_names_what_cuda_lacks(capsys):
    # on a machine with a working cuda backend there is nothing to check here
    info = {i.name: i for i in pg.backends()}["cuda"]
    if info.available:
        pytest.skip("the cuda backend is available here")
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.lstrip().startswith("cuda "))
    assert "unavailable" in line
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        assert "no NVIDIA driver" in line
    with pytest.raises(BackendUnavailableError, match="device 'cuda' is unavailable: " + info.reason.split("(")[0]):
        pg.gemm(np.ones((2, 2)), np.ones((2, 2)), device="cuda")


@pytest.mark.parametrize("argv, says", [
    (["gemm", "--shape", "-1x2x3"], "--shape: shape dimensions must be >= 0; got '-1x2x3'"),
    # int() reads "8_0" as 80 and other scripts' digits as numbers: a typo is refused, not run as another shape
    (["gemm", "--shape", "8_0x8x8"], "--shape: shape must be MxNxK with three non-negative integers"),
    (["explain", "\u0668x8x8"], "shape must be MxNxK with three non-negative integers"),
    (["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1_0"], "--repeats"),
    (["gemm", "--shape", "2x2x2", "--seed", "-1"], "--seed: must be 0 or more; got '-1'"),
    (["bench", "--device", "cpu", "--shapes", "8x8x8", "--max-dim", "0"], "--max-dim: must be an integer >= 1"),
    # --only names nothing, so a -j that is not checked fails at once and builds nothing
    (["compile", "-j", "-1", "--only", "no_such_kernel"], "-j/--jobs: must be an integer >= 1; got '-1'"),
])
def test_cli_usage_errors_say_what_is_wrong(capsys, argv, says):
    assert says in usage_error(capsys, argv)


def test_gemm_command_out_of_memory_for_the_result_is_one_line(capsys, monkeypatch):
    """Operands that fit but a result that does not (100000x100000x1: 800 kB in, 40 GB out) end in the command's
    one-line error, exit 2, not a MemoryError traceback."""
    from polygemm.backends.cpu_ref import backend as cpu
    from polygemm.apps.cli import main

    def no_memory(self, plan, call):
        raise MemoryError("Unable to allocate 37.3 GiB for an array with shape (100000, 100000)")

    monkeypatch.setattr(cpu.CpuReferenceBackend, "execute", no_memory)  # as a machine without 40 GB answers
    monkeypatch.setattr(cli_module, "host_memory", lambda: 0)  # (a platform that does not say its memory)
    assert main(["gemm", "--device", "cpu", "--shape", "100000x100000x1"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    assert err.startswith("polygemm: error: --shape 100000x100000x1:") and "GiB of host memory" in err


@pytest.mark.parametrize("argv, option", [
    (["info", "--json", "{f}/x.json"], "--json"),
    (["variants", "--device", "cpu", "--json", "{f}/x.json"], "--json"),
    (["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--markdown", "{f}/sub/x.md"], "--markdown"),
    (["matrix", "--backends", "cpu", "--quick", "--json", "{f}/x.json"], "--json"),
    (["plot", "{f}", "-o", "{f}/x.png"], "--output"),
])
def test_an_output_path_under_a_file_says_that_it_is_a_file(tmp_path, capsys, argv, option):
    """``--json results.json/x.json`` (a file where a folder was meant) is told that path is a file, not that the
    folder does not exist."""
    f = tmp_path / "results.json"
    f.write_text(json.dumps({"records": []}))
    assert main([x.replace("{f}", str(f)) for x in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"polygemm: error: {option} {f}/") and err.endswith(f"{f} is a file, not a folder; name a file in a folder")
    assert "does not exist" not in err
    assert json.loads(f.read_text()) == {"records": []}  # untouched
    missing = tmp_path / "nowhere" / "x.json"
    assert main(["info", "--json", str(missing)]) == 2  # a folder that is missing still says so
    assert capsys.readouterr().err.strip().endswith(f"the folder {missing.parent} does not exist")


@pytest.mark.parametrize("argv, says", [
    (["gemm", "--shape", "2x2x2", "--seed", "1.5"], "--seed: must be an integer, 0 or more; got '1.5'"),
    (["bench", "--device", "cpu", "--shapes", "8x8x8", "--batch", "1.5"], "--batch: must be an integer, 0 or more; got '1.5'"),
    (["gemm", "--shape", "2x2x2", "--seed", "x"], "--seed: must be an integer, 0 or more; got 'x'"),
])
def test_cli_integer_options_given_a_fraction_say_so(capsys, argv, says):
    # "--seed 1.5" (and bench's "--batch 1.5") are told the value is no integer, not "must be 0 or more", which 1.5 is
    assert says in usage_error_2(capsys, argv)


@pytest.mark.parametrize("argv, says", [
    (["gemm", "--shape", "2x2x2", "--seed", "-1"], "--seed: must be 0 or more; got '-1'"),
    (["bench", "--device", "cpu", "--shapes", "8x8x8", "--batch", "-2"], "--batch: must be 0 or more; got '-2'"),
    (["gemm", "--shape", "2x2x2", "--repeat", "2.0"], "--repeat/--repeats: must be an integer >= 1; got '2.0'"),
    (["gemm", "--shape", "1e3x4x4"], "--shape: shape must be MxNxK with three non-negative integers"),
])
def test_cli_integer_options_negative_or_written_otherwise(capsys, argv, says):
    """negative values are told the bound; a float-looking repeat or shape is told an integer is needed."""
    assert says in usage_error_2(capsys, argv)


def test_cli_seed_of_any_size_runs(capsys):
    """a seed beyond 64 bits (NumPy's generators take any non-negative int) runs and checks."""
    from polygemm.apps.cli import main

    assert main(["gemm", "--shape", "3x4x5", "--device", "cpu", "--seed", str(2**80 + 1), "--repeat", "1", "--check"]) == 0
    assert "check: PASS" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    ["info", "--json", "{d}/x.json"],
    ["variants", "--device", "cpu", "--json", "{d}/x.json"],
    ["bench", "--device", "cpu", "--shapes", "8x8x8", "--json", "{d}/x.json"],
    ["bench", "--device", "cpu", "--shapes", "8x8x8", "--markdown", "{d}/x.md"],
    ["bench", "--device", "cpu", "--shapes", "8x8x8", "--plot", "{d}/x.png"],
    ["matrix", "--backends", "cpu", "--quick", "--json", "{d}/x.json"],
])
def test_output_in_a_folder_where_no_file_can_be_made_is_refused_before_running(capsys, monkeypatch, no_file_folder, argv):
    # os.access(folder, W_OK) is true for root in /proc or /sys (and on mounts that refuse new files), so the folder
    # is tried by making a file in it, before anything runs: otherwise the command would run whole (a benchmark, the
    # conformance matrix) and end in a traceback with no file
    from polygemm.apps import bench, matrix

    monkeypatch.setattr(bench, "run_call_bench", lambda *a, **k: pytest.fail("timed into an unwritable --json"))
    monkeypatch.setattr(matrix, "run_conformance", lambda *a, **k: pytest.fail("ran into an unwritable --json"), raising=False)
    rc, out, err = cli(capsys, [x.format(d=no_file_folder) for x in argv])
    assert rc == 2 and out == "" and "Traceback" not in err, (rc, out, err)
    assert f"no file can be made in {no_file_folder}" in err and "name a file in a folder you can write" in err


def test_a_writable_output_still_written_and_no_probe_left_behind(capsys, tmp_path):
    path = tmp_path / "info.json"
    rc, out, err = cli(capsys, ["info", "--json", str(path)])
    assert rc == 0 and json.loads(path.read_text())["backends"] and f"wrote {path}" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["info.json"]


def test_readme_main_job_runs_and_checks(capsys):
    assert main(["gemm", "--shape", "1024x1024x1024", "--check"]) == 0
    out = capsys.readouterr().out
    assert f"backend : {_auto_backend()}" in out and re.search(r"check: PASS: all 1048576 elements within the bound", out), out


@pytest.mark.parametrize("command,option", DOCUMENTED)
def test_every_option_the_docs_name_is_in_that_commands_help(capsys, command, option):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", capsys.readouterr().out), (command, option)


@pytest.mark.parametrize("argv,meant", [(["gemm", "--shape", "64x64x64", "--chek"], "--check"),
                                        (["info", "--jsn"], "--json"),
                                        (["matrix", "--backends", "cpu", "--quik=1"], "--quick")])
def test_option_typo_is_told_by_the_command_with_the_option_meant(capsys, argv, meant):
    """A mistyped option of a command (``polygemm gemm ... --chek``) gets the command's own usage and the option
    meant, not the top-level usage (``polygemm [-h] [--version] {info,...}``) and 'unrecognized arguments' alone."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err.startswith(f"usage: polygemm {argv[0]}") and f"polygemm {argv[0]}: error: unrecognized arguments" in err
    assert f"did you mean {meant}?" in err, err


def test_explain_refusals_name_the_options_typed_not_the_apis_arguments(capsys):
    """--variant and --dtype as typed, not the API's variant='...' or a cast of arrays a and b."""
    line = cli_error_line(capsys, ["explain", "8x8x8", "--device", "cpu", "--variant", "nope"])
    assert "--variant nope is not a variant" in line and "variant=" not in line
    line = cli_error_line(capsys, ["explain", "8x8x8", "--device", "cpu", "--dtype", "int8", "--out-dtype", "int32"])
    assert "--out-dtype int32" in line and "--dtype int32" in line and "a and b" not in line


def test_explain_narrower_out_dtype_is_told_the_options_not_a_cast_of_the_result(capsys):
    # the command hands out no result to cast: the ways are its options (the result computed in the inputs' dtype,
    # or inputs of the narrower dtype)
    line = cli_error_line(capsys, ["explain", "64x64x64", "--device", "cpu", "--dtype", "float64", "--out-dtype", "float32"])
    assert "astype" not in line and "--out-dtype float64" in line and "--dtype float32" in line and "computed in float64" in line
    line = cli_error_line(capsys, ["explain", "64x64x64", "--device", "cpu", "--dtype", "float32", "--out-dtype", "int8"])
    assert "astype" not in line and "omit --out-dtype" in line


@pytest.mark.parametrize("argv, meant", [
    (["bench", "8x8x8", "16x16x16:nt"], "--shapes 8x8x8 16x16x16:nt"),
    (["variants", "cpu"], "--device cpu"),
    (["matrix", "cpu"], "--backends cpu"),
    (["gemm", "--shape", "8x8x8", "cuda:1"], "--device cuda:1"),
])
def test_a_stray_shape_or_backend_is_told_the_option_it_belongs_to(capsys, argv, meant):
    line = usage_error(capsys, argv)
    assert "unrecognized arguments" in line and f"give the {'shapes' if 'shapes' in meant else 'backend'} as {meant}" in line


def test_stray_word_after_a_command_is_told_by_that_command(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["info", "extra"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "polygemm info: error: unrecognized arguments: extra" in err and "did you mean" not in err


def test_a_mistyped_command_names_the_one_meant(capsys):
    # a newcomer's `polygemm ifno` is told the command it most likely meant, not only the list of commands
    from polygemm.apps.cli import main
    with pytest.raises(SystemExit) as info:
        main(["ifno"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'ifno' (did you mean 'info'?); choose from 'info'," in err
    with pytest.raises(SystemExit):
        main(["xyzzy"])  # nothing near: argparse's own message, no guess
    err = capsys.readouterr().err
    assert "invalid choice: 'xyzzy'" in err and "did you mean" not in err


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="FIFOs are POSIX")
def test_json_into_a_fifo_is_written_into_not_replaced(tmp_path):
    """A target that is no regular file is written into: --json /dev/null (as root) must not replace the device with a
    regular file for the whole machine, nor a FIFO (its reader would wait forever)."""
    import os
    import stat
    import threading

    from polygemm.apps.cli import main

    fifo = tmp_path / "f.json"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    assert main(["info", "--json", str(fifo)]) in (0, None)
    reader.join(30)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert b'"backends"' in got[0]


def test_json_through_a_dangling_link_is_refused_before_the_run(tmp_path, capsys):
    import os

    from polygemm.apps.cli import main

    link = tmp_path / "d.json"
    os.symlink(tmp_path / "nodir" / "x.json", link)
    try:
        rc = main(["info", "--json", str(link)])
    except SystemExit as exc:  # argparse's error(): exit 2
        rc = exc.code
    assert rc == 2
    assert "nodir does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("name, table, says", [
    ("tilenone", '(Variant(name="v", dtypes=("float32",), description="d", tile=None),)', "tile=None; it must be a string"),
    ("tileint", '(Variant(name="v", dtypes=("float32",), description="d", tile=128),)', "tile=128; it must be a string"),
    ("descnone", '(Variant(name="v", dtypes=("float32",), description=None),)', "description=None; it must be a string"),
    ("autostr", '(Variant(name="v", dtypes=("float32",), description="d", auto="no"),)', "auto='no'; it must be True or False"),
    ("nodtypes", '(Variant(name="v", dtypes=(), description="d"),)', "dtypes=(); name the dtypes"),
    ("emptytable", '()', "variants() returned no Variant"),
])
def test_a_variant_table_of_the_wrong_kinds_is_a_reason_not_a_crash(tmp_path, monkeypatch, fresh_registry, capsys,
                                                                    name, table, says):
    """`polygemm variants` lists every backend beside a plugin whose table has tile=None (a reason for that plugin, no
    AttributeError), and an empty table makes the plugin unavailable, with a reason, not "available" with "it
    supports " and nothing after it."""
    import json

    from tests.plugin_sources import install_fake_plugins
    from polygemm.apps.cli import main

    source = _VARIANT_BASE + f"    def variants(self):\n        return {table}\n"
    install_fake_plugins(tmp_path, monkeypatch, fresh_registry, (f"pg-{name}", f"pg_{name}_mod", source, {name: f"pg_{name}_mod:B"}))
    info = {i.name: i for i in polygemm.backends()}[name]
    assert not info.available and says in info.reason
    if name == "emptytable":  # an empty table is listed as one ("no variants"); info and calls give the reason
        return
    assert main(["variants"]) in (0, None)
    text = capsys.readouterr().out
    assert f"{name}: " in text and says in text and "cpu:" in text  # the others still listed
    assert main(["variants", "--json", "-"]) in (0, None)
    rows = {b["name"]: b for b in json.loads(capsys.readouterr().out)["backends"]}
    assert says in rows[name]["error"] and rows["cpu"]["variants"]


def test_a_device_from_the_environment_is_told_to_a_cli_user_as_device_option(monkeypatch, capsys):
    from polygemm.apps.cli import main

    monkeypatch.setenv("POLYGEMM_DEVICE", "gpu")
    assert main(["gemm", "--shape", "4x4x4"]) == 2
    err = capsys.readouterr().err
    assert "$POLYGEMM_DEVICE='gpu'" in err and "pass --device" in err and "device=," not in err


def test_variants_of_a_device_index_the_backend_lacks_is_an_error(capsys):
    # an error, not a table row "cpu:1: device 'cpu:1': backend 'cpu' has one device; use 'cpu'" with exit 0
    assert main(["variants", "--device", "cpu:1"]) == 2
    captured = capsys.readouterr()
    assert "cpu:1" in captured.err and "has one device" in captured.err and "use 'cpu'" in captured.err
    assert "cpu:1:" not in captured.out


def test_variants_of_a_device_index_lists_the_backends_table_without_a_device(capsys):
    # "variants --device cuda:0" lists cuda's static table, as "--device cuda" does (the command needs no device), and
    # does not say the device is unavailable
    if {i.name: i for i in pg.backends()}["cuda"].available:
        pytest.skip("cuda is available here: cuda:0 is checked against the device")
    assert main(["variants", "--device", "cuda:0"]) == 0
    out = capsys.readouterr().out
    assert "cublas" in out and "is unavailable" not in out


def test_variants_auto_is_not_a_suggestion_of_itself(capsys):
    assert main(["variants", "--device", "auto"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'auto'" not in err and "'auto' is not a backend" in err
    with pytest.raises(pg.ArgumentError, match="'auto' is not a backend"):
        pg.get_backend("auto")


def test_variants_lists_a_backend_named_twice_once(capsys):
    assert main(["variants", "--device", "cpu", "CPU"]) == 0
    assert capsys.readouterr().out.count("cpu:") == 1


def test_gemm_shape_past_numpys_largest_dimension_is_one_line(capsys):
    # --shape 99999999999999999999x1x1 is one line, not numpy's "ValueError: Maximum allowed dimension exceeded"
    # traceback
    assert main(["gemm", "--device", "cpu", "--shape", "99999999999999999999x1x1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("polygemm: error: --shape 99999999999999999999x1x1:") and err.count("\n") == 1


@pytest.mark.parametrize("argv", [
    ["variants", "--device", "cuda:01"],  # refused, not taken for cuda's table, where cuda is unavailable
    ["variants", "--device", "cpu:01"],
    ["bench", "--device", "cpu:01", "--shapes", "8x8x8", "--repeats", "1"],
    ["gemm", "--shape", "4x4x4", "--device", "cpu:01"],
])
def test_the_cli_refuses_a_device_index_with_a_leading_zero(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "a device index is a whole number >= 0" in err and "got '01'" in err and "Traceback" not in err


def test_the_cli_tells_a_misspelt_variant_the_name_meant(capsys, monkeypatch):
    monkeypatch.delenv("POLYGEMM_DEVICE", raising=False)
    last = _refused(capsys, ["gemm", "--shape", "8x8x8", "--device", "cpu", "--variant", "BLAS"])
    assert last.startswith("polygemm: error: --variant BLAS is not a variant of backend 'cpu'") and "variant=" not in last
    assert "(did you mean 'blas'?)" in last and "known: blas, reference, numpy" in last
    last = _refused(capsys, ["gemm", "--shape", "8x8x8", "--variant", "refrence"])
    assert last.startswith("polygemm: error: no available backend has variant 'refrence'")
    assert "cpu: has no variant 'refrence' (did you mean 'reference'?)" in last


def test_info_reports_a_backend_whose_device_name_or_dtypes_raise_and_goes_on(monkeypatch, capsys):
    # a backend's own methods may fail (a plugin's, a driver's): info lists the failure against the backend
    cpu = registry.get_backend("cpu")

    def boom(*args):
        raise RuntimeError("device table unreadable")

    monkeypatch.setattr(type(cpu), "device_name", boom)
    monkeypatch.setattr(type(cpu), "dtypes", boom)
    data = _json_out(capsys, ["info", "--json"])
    record = {b["name"]: b for b in data["backends"]}["cpu"]
    assert record["available"] is True and record["device"] is None and record["dtypes"] is None
    assert any(e.startswith("device_name(): RuntimeError") and "device table unreadable" in e for e in record["errors"])
    assert any(e.startswith("dtypes(): RuntimeError") for e in record["errors"])
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.lstrip().startswith("cpu"))
    assert "device name unavailable" in line and "device table unreadable" in line


def test_ctrl_c_during_a_command_is_status_130_and_one_line(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    import polygemm.apps.cli as cli

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: _with_command(parser, "gemm", interrupted))
    assert main(["gemm", "--shape", "8x8x8", "--device", "cpu"]) == 130
    captured = capsys.readouterr()
    assert captured.err.strip() == "polygemm: interrupted" and "Traceback" not in captured.err


def test_closed_stdout_in_process_is_status_141(monkeypatch, capsys):
    def closed(args):
        raise BrokenPipeError

    import polygemm.apps.cli as cli

    parser = cli.build_parser()
    silenced: list[bool] = []
    monkeypatch.setattr(cli, "build_parser", lambda: _with_command(parser, "info", closed))
    monkeypatch.setattr(cli, "_silence_stdout", lambda: silenced.append(True))
    assert main(["info"]) == 141
    assert silenced == [True] and capsys.readouterr().err == ""


def _with_command(parser, name: str, fn):
    """``parser`` with command ``name`` running ``fn``."""
    parser._subparsers._group_actions[0].choices[name].set_defaults(fn=fn)
    return parser


def test_explain_json_holds_launch_parameters_as_json_types():
    from polygemm.apps.explain import _plain

    class Dim3:
        def __str__(self):
            return "(16, 8, 1)"

    assert _plain(None) is None and _plain(True) is True and _plain(3) == 3 and _plain("row") == "row"
    assert _plain((64, [128, 2.5], Dim3())) == [64, [128, 2.5], "(16, 8, 1)"]
    assert json.loads(json.dumps(_plain([Dim3(), (1, 2)]))) == ["(16, 8, 1)", [1, 2]]  # what json writes as it is


def test_gemm_takes_a_layout_as_explain_and_bench_do(capsys):
    """--shape 24x16x8:tn runs A as a transposed view (column-major), checked against the reference."""
    assert main(["gemm", "--shape", "24x16x8:tn", "--check", "--seed", "1", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "a=col-major" in out and "b=row-major" in out and "check: PASS" in out


def test_bench_and_tune_shapes_naming_nothing_are_usage_errors(capsys):
    for cmd in (["bench", "--device", "cpu", "--no-progress"], ["tune", "--device", "cpu"]):
        line = cli_error_line(capsys, cmd + ["--shapes", ","])
        assert "--shapes" in line and "names no shape" in line


def test_explain_refuses_a_layout_given_twice(capsys):
    rc, out, err = cli(capsys, ["explain", "64x64x64:nt", "--transpose-a", "--device", "cpu"])
    assert rc == 2 and not out and ":nt and --transpose-a both give the layout" in err
    rc, out, err = cli(capsys, ["explain", "64x64x64:nn", "--transpose-b", "--device", "cpu"])  # ":nn" says as stored
    assert rc == 2 and not out and ":nn and --transpose-b both give the layout" in err


@pytest.mark.parametrize("typed, name", [("fp16", "float16"), ("half", "float16"), ("BF16", "bfloat16"), ("double", "float64"),
                                         ("fp32", "float32")])
def test_dtype_options_take_the_short_names_users_type(capsys, typed, name):
    rc, out, err = cli(capsys, ["explain", "8x8x8", "--dtype", typed, "--device", "cpu"])
    assert rc == 0 and f"{name} -> {name}" in out, err
    assert "invalid choice: 'quad'" in usage_error(capsys, ["explain", "8x8x8", "--dtype", "quad"])


def test_device_refusals_speak_the_commands_words(capsys):
    """An unknown or unavailable --device is told with --device, not the Python API's device='auto' or get_backend."""
    rc, out, err = cli(capsys, ["tune", "--shape", "64x64x64", "--device", "auto"])
    assert rc == 2 and "get_backend" not in err and "device=" not in err and "--device cuda or cuda:N" in err
    rc, out, err = cli(capsys, ["explain", "8x8x8", "--device", "nosuchdevice"])
    assert rc == 2 and "get_backend" not in err


def test_compile_only_takes_comma_separated_names(capsys):
    line = cli_error_line(capsys, ["compile", "--only", ","])
    assert "--only ',' names no variant" in line


def test_explain_json_followed_by_a_second_shape_writes_no_file_named_after_the_first(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli(capsys, ["explain", "--json", "8x8x8", "16x16x16", "--device", "cpu"])
    assert rc == 2 and "--json 8x8x8 names a shape" in err and not (tmp_path / "8x8x8").exists()


def test_an_error_of_several_lines_is_said_on_one(monkeypatch, capsys):
    """A refusal whose reason holds line breaks (a driver's message quoted in it) is one line of the command's."""
    from polygemm.apps import cli as cli_module
    from tests.helpers import cli_error_line

    def refuses(args):
        raise pg.BackendUnavailableError("device 'cuda' is unavailable: no driver\nlibcuda.so.1: cannot open it\nwith a GPU")

    parser = cli_module.build_parser

    def patched():
        p = parser()
        p._subparsers._group_actions[0].choices["info"].set_defaults(fn=refuses)
        return p

    monkeypatch.setattr(cli_module, "build_parser", patched)
    line = cli_error_line(capsys, ["info"])
    assert "no driver; libcuda.so.1: cannot open it; with a GPU" in line


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_output_that_cannot_be_written_is_one_error_line_not_a_traceback():
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "polygemm", "info"], stdout=full, stderr=subprocess.PIPE, text=True,
                              timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("polygemm: error: cannot write the command's output")



def test_gemm_shape_given_twice_is_a_usage_error_naming_both(capsys):
    rc, out, err = cli(capsys, ["gemm", "--shape", "8x8x8", "--shape", "16x16x16", "--device", "cpu"])
    assert rc == 2 and "--shape given twice (8x8x8 and then 16x16x16)" in err


def test_the_variants_table_names_each_rungs_block_tile_beside_the_cpu_backends_long_dtypes(capsys):
    rc, out, err = cli(capsys, ["variants"])
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ") and line.split()}
    assert rc == 0 and "block 32x32x1" in rows["cm_v01_naive"]
    assert "block 128x128x64" in rows["hgemm_v2_wgmma_tma_128x128_cluster2_persistent"]


def test_an_abbreviation_of_two_spellings_of_one_option_is_that_option(capsys):
    rc, out, err = cli(capsys, ["gemm", "--shape", "8x8x8", "--rep", "2", "--device", "cpu"])
    assert rc == 0 and "best of 2" in out
    rc, out, err = cli(capsys, ["bench", "--device", "cpu", "--shapes", "8x8x8", "--re", "1"])  # --repeats or --result
    assert rc == 2 and "ambiguous option" in err


def test_errors_name_the_commands_options_not_the_apis_arguments(capsys):
    line = cli_error_line(capsys, ["explain", "64x64x64", "--out-dtype", "float16", "--device", "cpu"])
    assert "got --out-dtype float16: omit --out-dtype" in line and "out_dtype" not in line
    line = cli_error_line(capsys, ["variants", "--device", "cuda:01"])
    assert line.startswith("polygemm: error: --device cuda:01: a device index") and "device=" not in line


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (a file every write to fails)")
def test_an_output_file_that_cannot_be_written_is_a_failed_run(capsys):
    # the run happened and its output was lost: status 1, as a device error's (a refused path is 2, before anything runs)
    assert main(["info", "--json", "/dev/full"]) == 1
    assert "could not write /dev/full" in capsys.readouterr().err


def test_variants_json_given_a_backend_name_is_told_device(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["variants", "--json", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "--json cpu names a backend" in err and "--device cpu" in err
    assert not (tmp_path / "cpu").exists()


@pytest.mark.parametrize("argv, says", [(["gemm", "--shpae", "64x64x64"], "did you mean --shape?"),
                                        (["gemm", "64x64x64"], "give the shape as --shape 64x64x64"),
                                        (["gemm"], "required: --shape MxNxK")])
def test_gemm_without_its_shape_option_is_told_how_to_give_it(capsys, argv, says):
    assert says in usage_error(capsys, argv)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (a file every write to fails)")
@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["gemm", "--help"]])
def test_help_and_version_into_a_full_disk_are_a_failure_said_in_one_line(argv):
    from tests.helpers import subprocess_env

    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "polygemm", *argv], stdout=full, stderr=subprocess.PIPE, text=True,
                           env=subprocess_env(), timeout=120)
    assert r.returncode == 1 and "cannot write the command's output" in r.stderr and "Traceback" not in r.stderr
