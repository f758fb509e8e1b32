"""A demanding user's edges, fourth round (b): the command line (variants, gemm, bench, plot,
matrix, compile), interrupted and failed runs and the files they leave, bench records without a
vendor, plugin names the registry cannot honour, $POLYGEMM_PROBE_TIMEOUT, polygemm.dask's graph
checks. Each test failed before the fix it names."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import polygemm as pg
from polygemm.apps import bench
from polygemm.apps.cli import main
from test_registry import PLUGIN, install_fake_distribution

ROOT = Path(__file__).resolve().parents[1]


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in [extra.pop("PYTHONPATH", ""), str(ROOT), os.environ.get("PYTHONPATH", "")] if p)
    env = {**os.environ, "PYTHONPATH": path, **extra}
    if "POLYGEMM_DEVICE" not in extra:
        env.pop("POLYGEMM_DEVICE", None)
    return env


def _polygemm(args: list[str], timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polygemm", *args], capture_output=True, text=True, env=_env(**env),
                          cwd=str(ROOT), timeout=timeout)


def _record(**over) -> dict:
    base = dict(backend="cpu", variant="blas", dtype="float32", m=64, n=64, k=64, tflops=0.1, tflops_min=0.09, tflops_max=0.11,
                ms=0.005, vendor_variant="numpy", vendor_tflops=0.1, ratio=1.0, device="CPU", date="2026-01-01", repeats=5,
                calls_per_repeat=10, mode="kernel")
    base.update(over)
    return base


def _bench_file(path: Path, *records: dict) -> Path:
    path.write_text(json.dumps({"command": "polygemm bench", "records": list(records)}))
    return path


# -- polygemm variants ----------------------------------------------------------------------------------------------


def test_variants_of_a_device_index_the_backend_lacks_is_an_error(capsys):
    # it printed "cpu:1: device 'cpu:1': backend 'cpu' has one device; use 'cpu'" as a table row, exit 0
    assert main(["variants", "--device", "cpu:1"]) == 2
    captured = capsys.readouterr()
    assert "cpu:1" in captured.err and "has one device" in captured.err and "use 'cpu'" in captured.err
    assert "cpu:1:" not in captured.out


def test_variants_of_a_device_index_lists_the_backends_table_without_a_device(capsys):
    # "variants --device cuda:0" printed "device 'cuda:0' is unavailable" where "--device cuda" lists the
    # static table (the command needs no device)
    if {i.name: i for i in pg.backends()}["cuda"].available:
        pytest.skip("cuda is available here: cuda:0 is checked against the device")
    assert main(["variants", "--device", "cuda:0"]) == 0
    out = capsys.readouterr().out
    assert "cublas" in out and "is unavailable" not in out


def test_variants_auto_is_not_a_suggestion_of_itself(capsys):
    # it said: unknown device 'auto' (did you mean 'auto'?)
    assert main(["variants", "--device", "auto"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'auto'" not in err and "'auto' is not a backend" in err
    with pytest.raises(pg.ArgumentError, match="'auto' is not a backend"):
        pg.get_backend("auto")


def test_variants_lists_a_backend_named_twice_once(capsys):
    assert main(["variants", "--device", "cpu", "CPU"]) == 0
    assert capsys.readouterr().out.count("cpu:") == 1


# -- polygemm gemm ---------------------------------------------------------------------------------------------------


def test_gemm_shape_past_numpys_largest_dimension_is_one_line(capsys):
    # --shape 99999999999999999999x1x1 had been numpy's "ValueError: Maximum allowed dimension exceeded" traceback, exit 1
    assert main(["gemm", "--device", "cpu", "--shape", "99999999999999999999x1x1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("polygemm: error: --shape 99999999999999999999x1x1:") and err.count("\n") == 1


# -- polygemm bench and plot: shapes, outputs, records ------------------------------------------------------------


def test_bench_refuses_an_empty_product_before_timing(capsys):
    # --shapes 0x8x8 timed a product of no arithmetic (0 FLOP/s, a ratio of nothing), then --plot crashed on log2(0)
    assert main(["bench", "--device", "cpu", "--shapes", "0x8x8", "8x8x8"]) == 2
    captured = capsys.readouterr()
    assert "--shapes 0x8x8: a product with a zero dimension" in captured.err
    assert "polygemm bench:" not in captured.out  # nothing timed


def test_plot_leaves_out_records_of_empty_products(tmp_path, capsys):
    # a file with such a record (an older bench wrote them) had crashed plot with "math domain error"
    pytest.importorskip("matplotlib")
    f = _bench_file(tmp_path / "r.json", _record(m=0), _record(), _record(m=128, n=128, k=128))
    out = tmp_path / "r.png"
    assert main(["plot", str(f), "-o", str(out)]) == 0
    assert out.stat().st_size > 0
    assert "left out 1 record of an empty product (0x64x64)" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["plot", "bench"])
def test_a_plot_path_matplotlib_cannot_write_is_refused_up_front(tmp_path, capsys, command, monkeypatch):
    # -o r.txt had been matplotlib's "Format 'txt' is not supported" traceback, in bench after all the timing
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(bench, "run_call_bench", lambda *a, **k: pytest.fail("timed before refusing the path"))
    f = _bench_file(tmp_path / "r.json", _record())
    argv = ["plot", str(f), "-o", str(tmp_path / "r.txt")] if command == "plot" else \
        ["bench", "--device", "cpu", "--shapes", "8x8x8", "--plot", str(tmp_path / "r.txt")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "r.txt: matplotlib cannot write '.txt' files" in err and ".png" in err and "Traceback" not in err


def test_plot_output_without_an_extension_is_written_where_it_says(tmp_path, capsys):
    # "-o chart" printed "wrote chart" while matplotlib wrote chart.png
    pytest.importorskip("matplotlib")
    f = _bench_file(tmp_path / "r.json", _record(), _record(m=128, n=128, k=128))
    assert main(["plot", str(f), "-o", str(tmp_path / "chart")]) == 0
    assert (tmp_path / "chart").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "chart.png").exists()


def test_plot_heatmap_without_vendor_timings_is_an_error_not_a_traceback(tmp_path, capsys):
    # it had been "ValueError: no benchmark record with a vendor timing to draw" as a traceback, exit 1
    pytest.importorskip("matplotlib")
    f = _bench_file(tmp_path / "r.json", _record(vendor_tflops=None, ratio=None, vendor_variant=""))
    assert main(["plot", str(f), "--heatmap", "-o", str(tmp_path / "h.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("polygemm: error:") and "no benchmark record with a vendor timing" in err


def test_plot_names_the_fields_a_record_lacks(tmp_path, capsys):
    # it printed "BenchRecord.__init__() missing 16 required positional arguments: ..."
    f = tmp_path / "other.json"
    f.write_text(json.dumps({"records": [{"m": 4, "impl": "x"}]}))
    assert main(["plot", str(f)]) == 2
    err = capsys.readouterr().err
    assert "__init__" not in err and "record 1 lacks 'backend', 'variant', 'dtype'" in err and "polygemm bench --json" in err


def _no_vendor_plugin(tmp_path, monkeypatch, fresh_registry, name: str = "Dbl") -> None:
    install_fake_distribution(tmp_path, "pg_novendor", "pg_novendor_plugin", PLUGIN, {name: "pg_novendor_plugin:DoubleBackend"})
    monkeypatch.syspath_prepend(str(tmp_path))
    fresh_registry.refresh()


def test_bench_records_without_a_vendor_are_strict_json(tmp_path, monkeypatch, fresh_registry, capsys):
    # a backend without a vendor variant wrote NaN into --json (not JSON: jq and JavaScript refuse it), printed
    # "(nanx None)" and headed its run with the name lower-cased ("auto2" for the entry point Auto2)
    _no_vendor_plugin(tmp_path, monkeypatch, fresh_registry)
    try:
        out = tmp_path / "r.json"
        assert main(["bench", "--device", "dbl", "--mode", "kernel", "--shapes", "8x8x8", "--json", str(out), "--no-progress"]) == 0
        text = capsys.readouterr().out
        assert "nanx" not in text and "None" not in text and "no vendor variant" in text
        assert text.startswith("polygemm bench: Dbl float32")
        data = json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
        rec = data["records"][0]
        assert rec["vendor_tflops"] is None and rec["ratio"] is None and rec["tflops"] > 0
        loaded = bench.load_records(str(out))[0]
        assert loaded.vendor_tflops != loaded.vendor_tflops and loaded.ratio != loaded.ratio  # back to nan
        assert main(["plot", str(out)]) == 0
    finally:
        sys.modules.pop("pg_novendor_plugin", None)


def test_bench_device_from_the_environment_is_named_and_checked_before_the_run(capsys, monkeypatch):
    # POLYGEMM_DEVICE=bogus polygemm bench said "unknown device 'bogus'" to a user who passed no --device;
    # an unavailable --device printed the run's heading first
    with monkeypatch.context() as env:
        env.setenv("POLYGEMM_DEVICE", "bogus")
        assert main(["bench", "--shapes", "8x8x8"]) == 2
        assert "$POLYGEMM_DEVICE='bogus'" in capsys.readouterr().err
    if {i.name: i for i in pg.backends()}["cuda"].available:
        return
    assert main(["bench", "--device", "cuda", "--shapes", "8x8x8"]) == 2
    captured = capsys.readouterr()
    assert "device 'cuda' is unavailable" in captured.err and "polygemm bench:" not in captured.out


def _sigint_default() -> None:
    # a child inherits an ignored SIGINT (a test run started in the background by a
    # non-interactive shell, as CI may be), and Python then never raises KeyboardInterrupt:
    # give the child the default disposition, as a terminal's Ctrl-C would find it
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_bench_interrupted_keeps_what_it_timed_and_says_so(tmp_path):
    # Ctrl-C had printed a KeyboardInterrupt traceback and dropped every record timed so far
    out, md = tmp_path / "r.json", tmp_path / "r.md"
    proc = subprocess.Popen([sys.executable, "-m", "polygemm", "bench", "--device", "cpu", "--mode", "kernel", "--shapes",
                             "32x32x32", "48x48x48", "2048x2048x2048", "--repeats", "50", "--no-progress", "--json", str(out),
                             "--markdown", str(md)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                            cwd=str(ROOT), preexec_fn=_sigint_default)
    deadline = time.monotonic() + 90
    seen = ""
    assert proc.stdout is not None
    while time.monotonic() < deadline:  # wait for the small shapes' lines
        line = proc.stdout.readline()
        seen += line
        if seen.count("48x48x48 ") >= 2 or not line:
            break
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (seen + rest, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "interrupted" in err and str(out) in err
    data = json.loads(out.read_text())
    assert data.get("interrupted") is True
    shapes = {(r["m"], r["n"], r["k"]) for r in data["records"]}
    assert (32, 32, 32) in shapes and (48, 48, 48) in shapes
    assert "interrupted" in md.read_text()


def test_bench_output_is_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    # --json was written in place: a failure while writing left a half-written file where the last run's had been
    out = tmp_path / "r.json"
    out.write_text('{"command": "the last run", "records": []}')
    monkeypatch.setattr(bench, "run_call_bench", lambda *a, **k: [bench.BenchRecord(**_record(mode="call"))])

    def broken(obj, fh, **kw):
        fh.write('{"command": "polygemm bench", "rec')
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bench.json, "dump", broken)
    with pytest.raises(OSError):
        main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--json", str(out)])
    assert out.read_text() == '{"command": "the last run", "records": []}'
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary left behind


# -- matrix and compile ---------------------------------------------------------------------------------------------


def test_matrix_that_selects_no_case_is_an_error(capsys):
    # --variants numpy:split_k=4 on cpu ran nothing: "0 passed, 0 failed, 0 skipped", exit 0 (a CI job passed);
    # cpu's refusal of the split is now said in its own words (polygemm/testing/conformance.py modified_variants)
    assert main(["matrix", "--backends", "cpu", "--quick", "--dtypes", "float32", "--variants", "numpy:split_k=4", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "variants names 'numpy:split_k=4', which backend 'cpu' does not run" in err and "is not a variant" in err


def test_compile_that_selects_no_build_is_an_error(capsys):
    # --arch sm_70 --only cm_v12_cp_async said "0 builds for  with  into ..." and "all passed", exit 0
    pytest.importorskip("polygemm.backends.cuda.variants")
    assert main(["compile", "--arch", "sm_70", "--only", "cm_v12_cp_async"]) == 2
    err = capsys.readouterr().err
    assert "nothing to build" in err and "cm_v12_cp_async" in err and "sm_70" in err


# -- the registry: plugin names, $POLYGEMM_PROBE_TIMEOUT -----------------------------------------------------------


def test_a_plugin_named_auto_or_like_a_device_index_is_not_loaded(tmp_path, monkeypatch, fresh_registry):
    # an entry point named "auto" was listed available but device="auto" never meant it; "dev:2" read as device 2 of "dev"
    install_fake_distribution(tmp_path, "pg_names", "pg_names_plugin", PLUGIN,
                              {"Auto": "pg_names_plugin:DoubleBackend", "dev:2": "pg_names_plugin:DoubleBackend"})
    monkeypatch.syspath_prepend(str(tmp_path))
    fresh_registry.refresh()
    try:
        infos = {i.name: i for i in pg.backends()}
        assert "Auto" not in infos and "dev:2" not in infos
        assert "'auto' chooses a backend" in infos["Auto@pg-names"].reason and not infos["Auto@pg-names"].available
        assert "device index" in infos["dev:2@pg-names"].reason
    finally:
        sys.modules.pop("pg_names_plugin", None)


@pytest.mark.parametrize("value, says", [("inf", "must be a finite number of seconds > 0 and at most 86400"),
                                         ("1e12", "must be a finite number of seconds > 0 and at most 86400"),
                                         ("soon", "is not a number"), ("-1", "must be a finite number of seconds > 0 and at most 86400")])
def test_a_bad_probe_timeout_warns_and_keeps_30_seconds(value, says):
    # POLYGEMM_PROBE_TIMEOUT=inf (or 1e12) made every command an OverflowError traceback; other bad values were ignored silently
    r = _polygemm(["info"], POLYGEMM_PROBE_TIMEOUT=value)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert f"POLYGEMM_PROBE_TIMEOUT={value!r} {says}; keeping 30 s" in r.stderr


# -- polygemm.dask ---------------------------------------------------------------------------------------------------


def test_dask_unknown_variant_is_refused_when_the_graph_is_built():
    # variant="nosuch" built a graph that failed only in the workers' tasks, at compute()
    da = pytest.importorskip("dask.array")
    import polygemm.dask as pgd

    A, B = da.ones((8, 4), chunks=(4, 2)), da.ones((4, 6), chunks=(2, 3))
    with pytest.raises(pg.UnsupportedProblemError, match=r"variant='nosuch' is not a variant of backend 'cpu'"):
        pgd.gemm(A, B, device="cpu", variant="nosuch")
    with pytest.raises(pg.UnsupportedProblemError, match="no backend has variant 'nosuch'"):
        pgd.gemm(A, B, variant="nosuch")
    with pytest.raises(pg.UnsupportedProblemError, match="variant='AUTO' is not a variant"):  # polygemm.gemm refuses it too
        pgd.gemm(A, B, device="cpu", variant="AUTO")
    np.testing.assert_allclose(pgd.gemm(A, B, device="cpu", variant="reference").compute(), np.full((8, 6), 4.0))
    with pytest.raises(pg.DTypeError, match="variant 'cublas' of backend 'cuda' computes .*not float64"):
        pgd.gemm(A, B, device="cuda", variant="cublas")
    pgd.gemm(A.astype(np.float32), B.astype(np.float32), device="cuda", variant="cublas")  # builds, whether or not it runs here


def test_two_outputs_to_one_file_are_refused_before_timing(tmp_path, capsys, monkeypatch):
    # --json r.out --markdown r.out timed everything, wrote the JSON, then replaced it with the markdown (exit 0)
    monkeypatch.setattr(bench, "run_call_bench", lambda *a, **k: pytest.fail("timed before refusing the outputs"))
    out = tmp_path / "r.out"
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--json", str(out), "--markdown", str(tmp_path / "." / "r.out")]) == 2
    assert "--json writes that file too" in capsys.readouterr().err and not out.exists()


def test_markdown_of_records_without_a_vendor_and_of_a_named_variant():
    # kernel mode without a vendor variant printed "nan" cells, "(nan×)" and a vendor row of "nan";
    # call mode headed a named variant's column "variant auto chose"
    nan = float("nan")
    text = bench.to_markdown([bench.BenchRecord(**_record(vendor_variant="", vendor_tflops=nan, ratio=nan))], "polygemm bench")
    assert "nan" not in text and "no vendor variant to compare" in text and "| blas | 100.0 |" in text
    call = bench.BenchRecord(**_record(mode="call", variant="numpy", requested="numpy", inputs="numpy", vendor_call="numpy.matmul"))
    text = bench.to_markdown([call], "polygemm bench")
    assert "variant that ran" in text and "auto chose" not in text
    auto = bench.BenchRecord(**_record(mode="call", requested="auto", inputs="numpy", vendor_call="numpy.matmul"))
    assert "variant auto chose" in bench.to_markdown([auto], "polygemm bench")
