"""``polygemm matrix`` and the pytest integration."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import polygemm as pg
from polygemm.apps.cli import main
from polygemm.errors import BackendUnavailableError
from polygemm.testing import check_result, run_conformance

from tests.helpers import BROKEN, cli_error_line, REPO_ROOT
from tests.plugin_sources import install_fake_distribution


ROOT = REPO_ROOT


def test_matrix_cpu_json(tmp_path, capsys):
    path = tmp_path / "m.json"
    assert main(["matrix", "--backends", "cpu", "--quick", "--json", str(path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "cpu" in out and "float64" in out and " 0 failed" in out
    rows = json.loads(path.read_text())["rows"]
    assert rows and {r["status"] for r in rows} <= {"pass", "skip"}
    assert {"backend", "dtype", "variant", "case", "status", "detail", "seconds"} <= set(rows[0])
    assert all(isinstance(r["seconds"], float) and r["seconds"] >= 0 for r in rows)  # a slow backend's cases show


def test_matrix_shows_broken_plugin_and_fails_on_failure(tmp_path, monkeypatch, fresh_registry, capsys):
    install_fake_distribution(tmp_path, "pg_broken", "pg_broken_plugin", BROKEN, {"broken": "pg_broken_plugin:Nothing"})
    monkeypatch.syspath_prepend(str(tmp_path))
    fresh_registry.refresh()
    # named in --backends, a plugin whose import fails is a failure (as under pytest); cpu's cases still run and pass
    assert main(["matrix", "--quick", "--no-progress", "--backends", "cpu", "broken"]) == 1
    out = capsys.readouterr().out
    assert "broken" in out and "libfoo.so.3" in out and "1 failed" in out and " 0 passed" not in out
    assert main(["matrix", "--quick", "--no-progress", "--dtypes", "float32"]) == 0  # every backend: a skip
    assert "skip broken" in capsys.readouterr().out

    from polygemm.backends.cpu_ref import backend as cpu

    real = cpu.reference
    monkeypatch.setattr(cpu, "reference", lambda *a, **k: real(*a, **k) * 2)
    assert main(["matrix", "--quick", "--no-progress", "--backends", "cpu", "--dtypes", "float32"]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_bench_cpu_json_markdown_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    js, md, png = tmp_path / "b.json", tmp_path / "b.md", tmp_path / "b.png"
    assert main(["bench", "--device", "cpu", "--shapes", "64x48x32", "100x20x30", "--repeats", "2",
                 "--json", str(js), "--markdown", str(md), "--plot", str(png)]) == 0
    recs = json.loads(js.read_text())["records"]
    assert len(recs) == 2
    for r in recs:
        for key in ("backend", "variant", "dtype", "m", "n", "k", "tflops", "vendor_tflops", "device", "date"):
            assert key in r
        assert r["tflops"] > 0 and r["vendor_tflops"] > 0 and r["variant"] == "blas"  # what auto runs on the cpu
    assert "polygemm bench --device cpu" in md.read_text()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_bench_rejects_unknown_variant(capsys):
    assert main(["bench", "--device", "cpu", "--variants", "nosuch", "--shapes", "8x8x8"]) == 2
    assert "nosuch" in capsys.readouterr().err


def test_pytest_pyargs_integration():
    env = {**os.environ, "POLYGEMM_TEST_BACKEND": "cpu", "POLYGEMM_TEST_QUICK": "1", "POLYGEMM_TEST_DTYPES": "float32",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs", "polygemm.testing"],
                       capture_output=True, text=True, env=env, cwd=str(ROOT))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and "failed" not in r.stdout


def test_bench_skips_a_variant_that_hands_the_problem_on(monkeypatch):
    """A variant whose launch would run another rung is reported, not timed under its name."""
    from polygemm.apps import bench

    class Launch:
        variant = "other"

        def __call__(self):
            pass

        def close(self):
            pass

    be = __import__("polygemm").get_backend("cpu")
    monkeypatch.setattr(type(be), "launcher", lambda self, *a, **k: Launch(), raising=False)
    notes = []
    recs = bench.run_bench("cpu", "float32", ["reference"], [(8, 8, 8)], repeats=1, progress=notes.append)
    assert recs == [] and any("does not run this problem itself" in n for n in notes)


def test_bench_settled_mode_times_each_kernel_after_running_it_alone(monkeypatch):
    from polygemm.apps import bench

    calls = []
    real_once = bench.KernelTimed.once

    def once(self):
        calls.append(self.runners[0].call)
        return real_once(self)

    monkeypatch.setattr(bench.KernelTimed, "once", once)
    recs = bench.run_bench("cpu", "float32", ["reference"], [(16, 16, 16)], repeats=3, settle=0.05)
    assert len(recs) == 1 and recs[0].method == "settled 0.05 s" and recs[0].ratio > 0
    # settling runs batches before the timed repeats, and the repeats of one kernel are back to
    # back (vendor first), not interleaved
    vendor_call, variant_call = calls[0], calls[-1]
    assert vendor_call is not variant_call
    first_variant = calls.index(variant_call)
    assert all(c is vendor_call for c in calls[:first_variant]) and all(c is variant_call for c in calls[first_variant:])
    assert len(calls) > 2 * 3
    md = bench.to_markdown(recs, "polygemm bench --settle 0.05")
    assert "each kernel settled 0.05 s alone before its repeats" in md


def test_bench_rejects_negative_settle(capsys):
    with pytest.raises(SystemExit) as exc:  # a usage error, as argparse ends one (exit 2)
        main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--settle", "-1"])
    assert exc.value.code == 2 and "--settle: must be >= 0" in capsys.readouterr().err


def test_float16_failure_hints_at_float32_accumulation(monkeypatch):
    """A backend that accumulates float16 products in float16 fails, and the message says why."""
    import numpy as np

    from polygemm.backends.cpu_ref import backend as cpu
    from polygemm.testing import run_conformance

    real = cpu.reference

    def half_accumulator(a, b, c=None, alpha=1.0, beta=0.0, dtype=None):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype != np.float16 or a.shape[1] < 64:
            return real(a, b, c, alpha, beta, dtype)
        acc = np.zeros((a.shape[0], b.shape[1]), np.float16)
        for p in range(a.shape[1]):  # one float16 rounding per product added
            acc = (acc + a[:, p:p + 1] * b[p:p + 1, :]).astype(np.float16)
        return real(acc.astype(np.float32), np.eye(acc.shape[1], dtype=np.float32), c, alpha, beta, dtype or np.float16)

    monkeypatch.setattr(cpu, "reference", half_accumulator)
    results = run_conformance("cpu", dtypes=["float16"], variants=["reference"], groups=["shapes"])
    fails = [r for r in results if r.status == "fail"]
    assert fails, "a float16 accumulator should fail the float16 bounds"
    for r in fails:
        assert "float16 products must accumulate in float32 (polygemm's contract" in r.detail
        assert "the errors are of the size a float16 accumulator leaves" in r.detail


def test_musa_flavor_gate_reason_is_one_short_line_without_the_path(monkeypatch, fresh_registry, capsys):
    import types

    import polygemm.backends.musa.backend as mb

    path = "/opt/venv/lib/python3.11/site-packages/build/host/some/deep/folder/libpolygemm_musa.so"
    fake = types.SimpleNamespace(nl=types.SimpleNamespace(flavor="host", path=path))
    monkeypatch.setattr(mb.sessions, "session", lambda: fake)
    monkeypatch.delenv("POLYGEMM_MUSA_EMULATION", raising=False)
    av = mb.MusaBackend().probe()
    assert not av.ok and "\n" not in av.reason and len(av.reason) <= 120
    assert "POLYGEMM_MUSA_EMULATION=1" in av.reason and "'host' flavor" in av.reason
    assert path not in av.reason and "site-packages" not in av.reason and "docs/musa.md" not in av.reason
    assert path in getattr(av, "detail", "")
    fresh_registry.refresh()
    info = {i.name: i for i in fresh_registry.backends()}["musa"]
    assert info.reason == av.reason and path in info.detail
    assert main(["info", "-v"]) == 0
    assert path in capsys.readouterr().out


def test_musa_missing_library_lists_every_place_tried_in_info_v(monkeypatch, fresh_registry, tmp_path, capsys):
    import polygemm.backends.musa.backend as mb

    missing = tmp_path / "nowhere" / "libpolygemm_musa.so"
    monkeypatch.setenv("POLYGEMM_MUSA_LIBRARY", str(missing))
    monkeypatch.setattr(mb.sessions, "_session", None)
    av = mb.MusaBackend().probe()
    assert not av.ok and "\n" not in av.reason and len(av.reason) <= 120
    detail = getattr(av, "detail", "")
    assert "tried" in detail and str(missing) in detail
    assert detail.splitlines()[0].strip() != av.reason.strip()  # the reason is said once
    fresh_registry.refresh()
    info = {i.name: i for i in fresh_registry.backends()}["musa"]
    assert info.reason == av.reason and "tried" in info.detail
    assert main(["info", "-v"]) == 0
    out = capsys.readouterr().out
    assert "tried" in out and str(missing.name) in out
    monkeypatch.setattr(mb.sessions, "_session", None)


def test_matrix_refuses_a_variant_no_backend_has_and_output_paths_are_checked_first(tmp_path, capsys):
    """A misspelt --variants name is an error naming the known ones, not a run of nothing with exit 0; an --json path
    whose folder does not exist is refused before anything runs."""
    from polygemm.apps.cli import main

    assert main(["matrix", "--backends", "cpu", "--variants", "blsa"]) == 2
    assert "'blsa' is not a variant of cpu; known: blas" in capsys.readouterr().err
    missing = tmp_path / "nowhere" / "m.json"
    assert main(["matrix", "--backends", "cpu", "--quick", "--json", str(missing)]) == 2
    assert "does not exist" in capsys.readouterr().err and not missing.exists()
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--json", str(missing)]) == 2


def test_matrix_json_says_where_it_went_and_backends_take_commas(tmp_path, capsys):
    # matrix --json says where it wrote (whole or not at all, as bench writes); "--backends cpu,CPU" names cpu twice,
    # and "cpu CPU" runs the suite once, its counts not doubled (polygemm/apps/matrix.py)
    path = tmp_path / "m.json"
    assert main(["matrix", "--backends", "cpu", "--quick", "--dtypes", "float64", "--variants", "reference", "--no-progress"]) == 0
    once = capsys.readouterr().out
    assert main(["matrix", "--backends", "cpu,CPU", "cpu", "--quick", "--dtypes", "float64", "--variants", "reference",
                 "--no-progress", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1] == f"wrote {path}"
    summary = [ln for ln in once.splitlines() if " passed, " in ln]
    assert summary and summary[0] in out  # the same counts: cpu ran once
    rows = json.loads(path.read_text())["rows"]
    assert rows and {r["backend"] for r in rows} == {"cpu"} and all(r["status"] in ("pass", "skip") for r in rows)


def test_variants_take_comma_separated_backends(capsys):
    # "variants --device cpu,musa" lists both backends (polygemm/apps/cli.py)
    assert main(["variants", "--device", "cpu,musa"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cpu:") and "\nmusa:" in out
    assert "names no backend" in cli_error_line(capsys, ["variants", "--device", ","])
    assert "names no backend" in cli_error_line(capsys, ["matrix", "--backends", " , ", "--quick"])


def test_matrix_with_a_device_index_is_told_to_name_the_backend(capsys):
    # "--backends cuda:1" is told to name the backend (the suite takes no index), not asked whether it meant 'cuda',
    # as if a typo (polygemm/apps/matrix.py)
    line = cli_error_line(capsys, ["matrix", "--backends", "cpu:1", "--quick"])
    assert "'cpu:1'" in line and "without a device index: 'cpu'" in line and "did you mean" not in line


def test_device_gpu_is_told_the_gpu_backends_not_cpu(capsys):
    # device="gpu" is told the GPU backends, not "did you mean 'cpu'?": one letter from cpu, and the opposite of what
    # is asked for
    a = np.ones((2, 2), np.float32)
    for spelling in ("gpu", "GPU"):
        with pytest.raises(BackendUnavailableError, match=r"unknown device 'gpu' \(a GPU is 'cuda' \(NVIDIA\) or 'musa' "
                                                          r"\(Moore Threads\); `polygemm info` says which") as info:
            pg.gemm(a, a, device=spelling)
        assert "did you mean 'cpu'" not in str(info.value)
    assert main(["matrix", "--backends", "gpu", "--quick", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "unknown backend 'gpu' (a GPU is 'cuda'" in err and "did you mean" not in err
    with pytest.raises(BackendUnavailableError, match=r"did you mean 'cpu'\?"):  # a typo is still a typo
        pg.gemm(a, a, device="cpux")


def test_matrix_dtypes_take_commas_as_its_other_options_do(capsys, tmp_path):
    # --dtypes takes names comma separated, as --backends and --variants do (and POLYGEMM_TEST_DTYPES, and
    # run_conformance's dtypes="float32,float64", whose docstring says polygemm matrix takes them so)
    import json

    path = tmp_path / "m.json"
    assert main(["matrix", "--backends", "cpu", "--variants", "blas", "--quick", "--no-progress", "--dtypes",
                 "float32,float64", "bfloat16", "--json", str(path)]) == 0
    rows = json.loads(path.read_text())["rows"]
    assert {r["dtype"] for r in rows} == {"float32", "float64", "bfloat16"}
    assert all(r["status"] != "fail" for r in rows)
    # the spellings --dtype takes elsewhere (fp16, half, bf16)
    assert main(["matrix", "--backends", "cpu", "--variants", "blas", "--quick", "--no-progress", "--dtypes", "fp16,BF16",
                 "--json", str(path)]) == 0
    assert {r["dtype"] for r in json.loads(path.read_text())["rows"]} == {"float16", "bfloat16"}
    capsys.readouterr()
    for given, said in ((["float8"], "name float16, bfloat16, float32, float64"),
                        ([","], "--dtypes ',' names no dtype")):
        assert main(["matrix", "--backends", "cpu", "--quick", "--no-progress", "--dtypes", *given]) == 2
        assert said in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["matrix", "--help"])
    assert "comma or space separated" in " ".join(capsys.readouterr().out.split("--dtypes")[-1].split())


def test_the_plugin_written_from_the_doc_is_listed_and_passes_the_suite(doc_plugin, capsys):
    """section 1 promises info lists it, variants prints its table (vendor in the auto column), explicit
    device= and auto run it, and the suite (run_conformance and polygemm matrix --backends) passes it."""
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("mydev"))
    assert "priority 300" in line and "available" in line and "MyDev 9000 (emulated)" in line
    assert "from entry point polygemm_mydev:MyDevBackend (polygemm_mydev)" in text
    assert "broke" in text and "import failed: ImportError: vendor runtime libfoo.so.3 not found" in text
    assert main(["variants", "--device", "mydev"]) == 0
    rows = {ln.split()[0]: ln.split()[1] for ln in capsys.readouterr().out.splitlines()[2:4]}
    assert rows == {"matmul": "yes", "vendorlib": "vendor"}
    a = np.arange(12, dtype=np.float16).reshape(3, 4)
    out = np.empty((3, 3), np.float32)  # float16 in, float32 out: the variant's out_dtypes
    assert pg.gemm(a, a.T.copy(), out=out, device="mydev") is out and check_result(out, a, a.T, out_dtype=np.float32).ok
    assert pg.last_plan().backend == "mydev"
    plan = pg.explain(a.astype(np.float64), a.T.astype(np.float64))  # auto: 300 beats cpu's 0 ("fast" has no float64)
    assert plan.backend == "mydev" and any(name == "fast" for name, _ in plan.candidates)
    rows = run_conformance("mydev", quick=True)
    assert rows and not [r for r in rows if r.status == "fail"]
    assert {r.variant for r in rows} == {"matmul", "vendorlib"}
    assert main(["matrix", "--backends", "mydev", "--quick", "--no-progress"]) == 0


def test_the_suite_checks_the_execute_that_polygemm_gemm_calls(doc_plugin):
    # polygemm.gemm calls the backend's execute(), which a plugin may override for speed (as section 3 invites), and
    # docs/plugins.md section 7 says the suite "drives polygemm.gemm(..., device=name, variant=v)": an execute that
    # drops alpha and beta fails run_conformance and polygemm matrix
    a = np.ones((2, 2), np.float32)
    assert (pg.gemm(a, a, alpha=3.0, device="fast") == 2.0).all()  # the fault the suite must see
    rows = run_conformance("fast", quick=True)
    fails = {r.group for r in rows if r.status == "fail"}
    assert {"scaling", "layouts"} <= fails, [(r.group, r.case, r.status) for r in rows]
    assert main(["matrix", "--backends", "fast", "--quick", "--no-progress"]) == 1


def test_a_named_plugin_whose_import_fails_fails_the_matrix(doc_plugin, capsys):
    # "polygemm matrix --backends broke" (a plugin's CI, as section 7 shows it) fails when the plugin's module raises
    # at import, as POLYGEMM_TEST_BACKEND=broke under pytest does ("a typo cannot pass CI")
    assert main(["matrix", "--backends", "broke", "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "0 passed, 1 failed, 0 skipped" in out
    assert out.count("FAIL broke: backend 'broke' could not be loaded: import failed: ImportError: vendor runtime "
                     "libfoo.so.3 not found") == 1  # once, not once per group column
    # every discovered backend: still a skip, and never fatal to the others (the doc's promise)
    path = doc_plugin / "m.json"
    assert main(["matrix", "--dtypes", "float64", "--quick", "--no-progress", "--json", str(path)]) == 0
    rows = json.loads(path.read_text())["rows"]
    broke = [r for r in rows if r["backend"] == "broke"]
    assert len(broke) == 1 and broke[0]["status"] == "skip" and "libfoo.so.3" in broke[0]["detail"]
    assert any(r["backend"] == "mydev" and r["status"] == "pass" for r in rows)
    assert any(r["backend"] == "cpu" and r["status"] == "pass" for r in rows)
    a = np.ones((2, 3), np.float32)
    with pytest.raises(pg.BackendUnavailableError, match="libfoo.so.3 not found"):
        pg.gemm(a, a.T, device="broke")


def test_matrix_takes_backend_names_as_device_takes_them(capsys):
    # polygemm matrix --backends CPU is cpu, as device="CPU" is
    from polygemm.apps.cli import main

    assert main(["matrix", "--backends", "CPU", "--quick", "--dtypes", "float32", "--variants", "blas"]) == 0
    assert "\ncpu " in capsys.readouterr().out


def test_matrix_that_selects_no_case_is_an_error(capsys):
    # --variants numpy:split_k=4 on cpu selects no case: an error in cpu's own words for refusing the split, not "0
    # passed, 0 failed, 0 skipped" with exit 0, which a CI job would pass (polygemm/testing/conformance.py
    # modified_variants)
    assert main(["matrix", "--backends", "cpu", "--quick", "--dtypes", "float32", "--variants", "numpy:split_k=4", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "variants names 'numpy:split_k=4', which backend 'cpu' does not run" in err and "is not a variant" in err


def test_matrix_runs_a_complex_dtype_and_refuses_an_integer_one_saying_why(capsys):
    assert main(["matrix", "--backends", "cpu", "--quick", "--dtypes", "complex64", "--variants", "reference", "--no-progress"]) == 0
    assert "complex64" in capsys.readouterr().out
    assert main(["matrix", "--backends", "cpu", "--quick", "--dtypes", "int32", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "'int32' is not a dtype the conformance matrix checks" in err and "integer products are exact" in err


def test_matrix_fails_a_named_backend_that_refuses_every_product(capsys, monkeypatch):
    """A backend whose plan() refuses every problem passes only the bad-input cases and skips the rest: it computed
    nothing, and a CI job naming it fails (exit 1) rather than pass on skips."""
    from polygemm.backends.cpu_ref.backend import CpuReferenceBackend
    from polygemm.errors import UnsupportedProblemError

    def refuse(self, problem, variant="auto"):
        raise UnsupportedProblemError("this build computes nothing")

    monkeypatch.setattr(CpuReferenceBackend, "plan", refuse)
    assert main(["matrix", "--backends", "cpu", "--quick", "--dtypes", "float32", "--no-progress"]) == 1
    assert "cpu computed no product" in capsys.readouterr().err


def test_a_float16_layout_bug_is_not_told_to_accumulate_in_float32(monkeypatch):
    """A result wrong by far more than a float16 accumulator explains (B's rows misread) gets no accumulator
    hint: the hint would send its author to the wrong fix."""
    import numpy as np

    from polygemm.backends.cpu_ref import backend as cpu
    from polygemm.testing import run_conformance

    real = cpu.reference

    def misread_b(a, b, c=None, alpha=1.0, beta=0.0, dtype=None):
        b = np.asarray(b)
        if b.dtype == np.float16 and b.shape[0] >= 8:
            b = b[::-1]  # B's rows read from the wrong end (a leading dimension or layout misread)
        return real(a, b, c, alpha, beta, dtype)

    monkeypatch.setattr(cpu, "reference", misread_b)
    results = run_conformance("cpu", dtypes=["float16"], variants=["reference"], groups=["shapes"])
    fails = [r for r in results if r.status == "fail" and "elements outside the bound" in r.detail]
    assert fails
    assert not any("accumulate in float32" in r.detail for r in fails)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("which", ["first", "last"])
def test_a_dropped_k_term_is_named_not_blamed_on_the_accumulator(monkeypatch, dtype, which):
    """A backend whose K loop starts or stops one step off (every dot product lacks one term) is told so, with the
    index, and a 16-bit product gets no accumulator hint (such an error is often within a float16 accumulator's
    bound: the hint would send its author to the wrong fix)."""
    import numpy as np

    from polygemm.backends.cpu_ref import backend as cpu
    from polygemm.testing import run_conformance

    real = cpu.reference
    keep = slice(1, None) if which == "first" else slice(None, -1)

    def one_term_short(a, b, c=None, alpha=1.0, beta=0.0, dtype=None):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape[-1] >= 2:
            a, b = a[..., :, keep], b[..., keep, :]
        return real(a, b, c, alpha, beta, dtype)

    monkeypatch.setattr(cpu, "reference", one_term_short)
    results = run_conformance("cpu", dtypes=[dtype], variants=["reference"], groups=["shapes"])
    fails = [r for r in results if r.status == "fail" and "elements outside the bound" in r.detail]
    assert fails
    named = [r for r in fails if "without the term of K index" in r.detail]
    assert named, [r.detail for r in fails]
    index = {"first": "index 0 ", "last": "index 130 "}[which]
    assert any(index in r.detail and "127x129x131" in r.detail for r in named), [r.detail for r in named]
    assert not any("accumulate in float32" in r.detail for r in named)


def test_matrix_refusals_of_auto_and_of_a_dtype_name_the_option(capsys):
    """--variants auto is refused naming --variants; an unknown float dtype is not told about integers."""
    line = cli_error_line(capsys, ["matrix", "--backends", "cpu", "--variants", "auto", "--quick"])
    assert "--variants auto" in line and "no variant of its own" in line and "blas" in line
    line = cli_error_line(capsys, ["matrix", "--backends", "cpu", "--variants", "blas:split_k=4", "--quick"])
    assert "--variants names 'blas:split_k=4'" in line and "variant=" not in line
    line = cli_error_line(capsys, ["matrix", "--backends", "cpu", "--dtypes", "float8"])
    assert "--dtypes 'float8'" in line and "integer" not in line


def test_a_case_that_runs_on_is_named_on_stderr(monkeypatch, capsys):
    """A backend's call that hangs stops the run: with no case finished for STALL_S seconds the run says so, naming the
    case finished last, so that a CI log shows where."""
    import time

    from polygemm.apps import matrix

    monkeypatch.setattr(matrix, "STALL_S", 0.05)
    with matrix._stall_watch("mydev", [time.perf_counter(), "float32/v1/layouts/a=C b=C"]):
        time.sleep(0.4)
    err = capsys.readouterr().err
    assert err.count("\n") == 1  # said once per stall, not every tick
    assert "polygemm matrix: mydev: no case has finished in" in err and "after float32/v1/layouts/a=C b=C" in err
