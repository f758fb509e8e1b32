"""A demanding user's edges, thirteenth round (CPU): the CLI with odd arguments (``plot`` of
records whose fields are of another type, ``compile --out`` naming a file or nothing),
``polygemm.testing`` used the way a plugin author would (selections that name nothing, a
backend with a real bug that the suite must catch), and the API's operands and results beside
``numpy.matmul`` (array-likes, subclasses, aliasing, scalars of every kind, threads)."""

from __future__ import annotations

import array
import copy
import fractions
import json
import threading

import ml_dtypes
import numpy as np
import pytest

import polygemm as pg
from polygemm.backend import Availability, Backend, Plan, Variant, host_layouts, store_result
from polygemm.cli import main
from polygemm.errors import ArgumentError
from polygemm.testing import reference_for, run_conformance


def assert_within(got, a, b, c=None, alpha=1.0, beta=0.0, out_dtype=None):
    """``got`` element-wise within the bound of the float64 reference (shape and dtype too)."""
    res = reference_for(a, b, c, alpha, beta, out_dtype=out_dtype).compare(got)
    assert res.ok, res.message


# -- polygemm plot: records whose fields are of another type --------------------------------------

def _bench_json(tmp_path):
    path = tmp_path / "b.json"
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "16x16x16", "--repeats", "1", "--no-progress",
                 "--json", str(path)]) == 0
    return json.loads(path.read_text())


@pytest.mark.parametrize("field, value, says", [
    ("tflops", "fast", "a number"),
    ("m", "8", "a whole number"),
    ("m", 8.5, "a whole number"),
    ("m", True, "a whole number"),
    ("dtype", 5, "a string"),
    ("variant", ["a"], "a string"),
])
def test_plot_of_a_record_field_of_another_type_is_one_line_naming_it(tmp_path, capsys, field, value, says):
    # defect: a record field of another type than bench writes went through load_records as it was and failed
    # in plot's sums and sorts: a TypeError traceback (exit 1), or a label "Truex8x8" drawn silently
    data = _bench_json(tmp_path)
    capsys.readouterr()
    bad = copy.deepcopy(data)
    bad["records"][0][field] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    for extra in ([], ["-o", str(tmp_path / "p.png")], ["--heatmap", "-o", str(tmp_path / "h.png")]):
        assert main(["plot", str(path), *extra]) == 2
        err = capsys.readouterr().err
        assert f"record 1 has {field}={value!r}" in err and says in err and "Traceback" not in err, err
    assert not (tmp_path / "p.png").exists() and not (tmp_path / "h.png").exists()
    # the file as bench wrote it, and a figure left null (not measured), still read and plot
    data["records"][0]["vendor_tflops"] = None
    path.write_text(json.dumps(data))
    assert main(["plot", str(path), "-o", str(tmp_path / "ok.png")]) == 0
    assert (tmp_path / "ok.png").exists()


# -- polygemm compile --out -----------------------------------------------------------------------

def test_compile_out_naming_a_file_or_nothing_is_a_usage_error_before_any_build(tmp_path, capsys, monkeypatch):
    # defect: --out naming a file ended in a FileExistsError traceback, and an empty --out ("--out $DIR", DIR
    # unset) built the whole catalog into the kernel cache instead, saying so only in its first line
    from polygemm.backends.cuda import compiler as cc

    def no_build(*args, **kwargs):
        raise AssertionError("a build started")

    monkeypatch.setattr(cc, "build", no_build)
    monkeypatch.setattr(cc, "select", no_build)
    afile = tmp_path / "kernels.tar"
    afile.write_text("x")
    for out, says in ((str(afile), "that is a file; name a folder"), ("", "an empty path"), ("  ", "an empty path"),
                      (str(afile / "sub"), "cannot make that folder")):
        assert main(["compile", "--arch", "sm_80", "--only", "copy_scale", "--out", out]) == 2
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err and err.count("\n") == 1, err
    assert afile.read_text() == "x"


# -- polygemm.testing as a plugin author uses it --------------------------------------------------

@pytest.mark.parametrize("kw, says", [
    ({"dtypes": ["float8"]}, "dtypes names 'float8'"),
    ({"groups": ["shape"]}, "groups names 'shape'"),
    ({"variants": ["blass"]}, "did you mean 'blas'?"),
    ({"variants": ["auto"]}, "the suite runs each variant by name"),
    ({"dtypes": [np.float32]}, "dtypes must be names"),
])
def test_run_conformance_selection_naming_nothing_is_refused_not_an_empty_pass(kw, says):
    # defect: a misspelt dtype, variant or group selected no case and run_conformance returned [] (a CI
    # asserting "no fail" passed, having tested nothing)
    with pytest.raises(ArgumentError, match=says) as info:
        run_conformance("cpu", quick=True, **kw)
    assert isinstance(info.value, ValueError)


def test_run_conformance_takes_one_string_as_names_comma_separated():
    # defect: dtypes="float32" was read as the characters 'f', 'l', 'o', ...: no case, no row, silently
    rows = run_conformance("cpu", dtypes="float32", variants="blas", groups="errors, scaling", quick=True)
    assert rows and {(r.dtype, r.variant) for r in rows} == {("float32", "blas")}
    assert {r.group for r in rows} == {"errors", "scaling"} and all(r.status == "pass" for r in rows), rows
    # a variant of another backend selects nothing here (polygemm matrix passes one list to every backend)
    assert run_conformance("cpu", variants=["cublas"], quick=True) == []


class _Buggy(Backend):
    """A host plugin with one real bug (each subclass its own), run on the suite directly."""

    name = "buggy"
    priority = 300

    def probe(self):
        return Availability(True)

    def variants(self):
        return (Variant("v", ("float32", "float64"), "a plugin with a bug"),)

    def plan(self, problem, variant="auto"):
        return Plan(self.name, "v", "test", problem, layouts=host_layouts(problem))

    def product(self, p):
        with np.errstate(all="ignore"):  # the suite's NaN and Inf cases
            res = p.alpha * (p.a.array.astype(np.float64) @ p.b.array)
            if p.c is not None and p.beta != 0.0:
                res = res + p.beta * p.c.array
        return res.astype(p.dtype)

    def run(self, plan):
        p = plan.problem
        return store_result(self.product(p), None if p.out is None else p.out.array)


class _AlphaDroppedWhenBetaIsZero(_Buggy):
    def product(self, p):  # a "beta == 0" fast path that forgot alpha
        if p.beta == 0.0:
            with np.errstate(all="ignore"):
                return (p.a.array @ p.b.array).astype(p.dtype)
        return super().product(p)


class _OutLeftUnwrittenBesideC(_Buggy):
    def run(self, plan):  # with c and a separate out: a new array comes back, out is never written
        p = plan.problem
        if p.c is not None and p.out is not None and p.out.array is not p.c.array:
            return self.product(p)
        return super().run(plan)


@pytest.mark.parametrize("bug, group", [(_AlphaDroppedWhenBetaIsZero, "scaling"), (_OutLeftUnwrittenBesideC, "layouts")])
def test_the_conformance_suite_fails_a_plugin_with_a_real_bug(bug, group):
    # defect: both plugins passed every case of the full suite: no case scaled without c (or with beta = 0),
    # and the layouts cases checked what the backend returned, not out, which is what polygemm.gemm gives
    # the caller. (polygemm.gemm(..., out=out) returned that unwritten out.)
    rows = run_conformance(bug(), dtypes=["float32"])
    fails = [r for r in rows if r.status == "fail"]
    assert fails and {r.group for r in fails} == {group}, [(r.group, r.case, r.detail) for r in fails]
    assert all(r.status == "pass" for r in run_conformance(_Buggy(), dtypes=["float32"]) if r.group != "device")
