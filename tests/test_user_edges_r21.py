"""A third-party backend author, and users calling from many threads, twenty-first round (CPU): docs/plugins.md and
the example plugin taken as the template they are, at the edges of the contract. A plugin that keeps the ``Plan`` it
returns and returns it again (a table of plans by shape), a ``supports()`` answering with a bool, a ``run()`` that
writes into ``c`` (or ``a``) when there is no ``out``, one Backend instance named by two entry points, alpha and beta
beyond the range of the dtype or of float32 (the example plugin scaled in float32, and the conformance suite let it
pass), the counts the docs tell a plugin author to expect from the suite; and threads sharing what users share: one
``out`` written in disjoint row or column blocks, an in-place blocked update, one plugin and its kept plans called from
eight threads at once. The tests marked "defect" failed before the fix they name; the others check edges that were
right."""

from __future__ import annotations

import re
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import polygemm as pg
from conftest import run_concurrently
from plugin_sources import THIRD_PARTY_BASE, install_fake_plugins
from polygemm.errors import DeviceError, UnsupportedProblemError
from polygemm.testing import case_groups, reference_for, run_conformance

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "polygemm-numpy-blas"


def assert_within(got, a, b, c=None, alpha=1.0, beta=0.0):
    """``got`` element-wise within the bound of the float64 reference (shape and dtype too)."""
    res = reference_for(a, b, c, alpha, beta).compare(got)
    assert res.ok, res.message


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# Plugins written as a third party would, each bending one rule (Good keeps them all: tests/plugin_sources.py).
PLUGIN = THIRD_PARTY_BASE + '''
class KeepsPlans(Good):
    """Plans once per (M, N, K, dtype, variant) and returns the Plan it kept for every later problem of that shape."""
    priority = 550  # above cuda (500): the same choice on a machine with a GPU
    def __init__(self):
        self.kept = {}
    def plan(self, problem, variant="auto"):
        key = (problem.m, problem.n, problem.k, problem.dtype.name, variant)
        if key not in self.kept:
            self.kept[key] = super().plan(problem, variant)
        return self.kept[key]

class SaysTrue(Good):
    """supports() answering "is it supported?" with a bool, as the method's name reads."""
    priority = 560
    def supports(self, problem):
        return problem.dtype == np.float32

class SaysFalse(Good):
    priority = 570
    def supports(self, problem):
        return False

class IntoC(Good):
    """Accumulates into c itself when there is no out (saves an allocation; c is the caller's)."""
    def run(self, plan):
        p = plan.problem
        r = p.alpha * (p.a.array @ p.b.array)
        if p.beta:
            acc = p.c.array
            acc *= p.beta
            acc += r
            r = acc
        if p.out is not None:
            p.out.array[...] = r
            return p.out.array
        return r

class ScalesA(Good):
    """Scales a in place by alpha first (the caller's a)."""
    def run(self, plan):
        p = plan.problem
        a = p.a.array
        a *= np.float32(p.alpha)
        r = a @ p.b.array
        if p.out is not None:
            p.out.array[...] = r
            return p.out.array
        return r

class Peeks(Good):
    """Records what run() receives: the operands' memory and whether they can be written."""
    seen = []
    def run(self, plan):
        p = plan.problem
        type(self).seen.append({op.name: (op.array, op.array.flags.writeable) for op in p.operands()})
        return super().run(plan)

class Float32Scalars(Good):
    """Scales in float32, as a kernel with float32 scalars does: alpha=1e39 becomes Inf."""
    def run(self, plan):
        p = plan.problem
        r = (p.a.array @ p.b.array) * np.float32(p.alpha)
        if p.beta:
            r = r + np.float32(p.beta) * p.c.array
        r = r.astype(np.float32)
        if p.out is not None:
            p.out.array[...] = r
            return p.out.array
        return r

class Float32ScalarsDeclared(Float32Scalars):
    """The same kernels, declaring their float32 scalars: the core refuses what float32 cannot hold."""
    float32_scalars = True

class DeclaresButComputes(Float32Scalars):
    """Declares float32 scalars but has a supports()/check_problem of its own that lets every scalar through."""
    float32_scalars = True
    def check_problem(self, problem, variant=None):
        pass
    def supports(self, problem):
        return None

SHARED = Good()
'''

CLASSES = ["Good", "KeepsPlans", "SaysTrue", "SaysFalse", "IntoC", "ScalesA", "Peeks", "Float32Scalars",
           "Float32ScalarsDeclared", "DeclaresButComputes"]


@pytest.fixture
def plugins(tmp_path, monkeypatch, fresh_registry):
    eps = {c.lower(): f"pg_r21_plugin:{c}" for c in CLASSES}
    eps.update({"one": "pg_r21_plugin:SHARED", "two": "pg_r21_plugin:SHARED"})
    install_fake_plugins(tmp_path, monkeypatch, fresh_registry, ("pg-r21", "pg_r21_plugin", PLUGIN, eps))
    yield
    sys.modules.pop("pg_r21_plugin", None)


@pytest.fixture(autouse=True)
def _no_device_env(monkeypatch):
    monkeypatch.delenv("POLYGEMM_DEVICE", raising=False)


# -- a plugin that keeps the Plan it returns ----------------------------------------------------------------------------


def test_a_plugin_that_returns_a_plan_it_kept_runs_each_call_as_its_own(plugins, rng):
    # defect: the core completed the Plan object plan() returned (its problem, candidates, copies) and cached that very
    # object. A plugin returning its kept plan again for gemm(a, b, out=o) had the core rewrite the plan cached for
    # gemm(a, b): the next gemm(a, b) ran with an out it did not have, "DeviceError: backend 'keepsplans' ... failed in
    # run(): TypeError: 'NoneType' object does not support item assignment", blaming the plugin (polygemm/api.py
    # _plugin_plan: the core now completes a copy)
    a, b = f32(rng, 3, 4), f32(rng, 4, 2)
    assert_within(pg.gemm(a, b, device="keepsplans"), a, b)
    out = np.full((3, 2), np.nan, np.float32)
    assert pg.gemm(a, b, device="keepsplans", out=out) is out
    assert_within(out, a, b)
    got = pg.gemm(a, b, device="keepsplans")  # the plan cached by the first call
    assert pg.last_plan().cached and pg.last_plan().problem.out is None
    assert_within(got, a, b)
    c = f32(rng, 3, 2)
    assert_within(pg.gemm(a, b, c, alpha=2.0, beta=-1.0, device="keepsplans"), a, b, c, 2.0, -1.0)
    assert_within(pg.gemm(a, b, device="keepsplans"), a, b)


def test_device_auto_does_not_pile_its_passed_over_list_onto_a_kept_plan(plugins, rng):
    # defect: each new cache key (device=None, "auto", the plugin's name, alpha != 1) put the backends passed over in
    # front of the kept plan's own list again: explain() listed cuda and musa once, then twice, three times ...
    a, b = f32(rng, 5, 3), f32(rng, 3, 4)
    assert pg.explain(a, b).backend == "keepsplans"
    plans = [pg.explain(a, b, device=d, alpha=s) for d in (None, "auto", "AUTO") for s in (1.0, 2.0, 0.5)]
    for p in plans:
        assert len(p.candidates) == len({name for name, _ in p.candidates}), p.candidates
    be = pg.get_backend("keepsplans")
    for kept in be.kept.values():
        assert kept.candidates == [] and kept.copies == [], kept  # the plugin's own object, as it made it


# -- supports() answering with a bool ----------------------------------------------------------------------------------


def test_supports_answering_with_a_bool_is_passed_over_saying_what_the_contract_is(plugins, rng):
    # defect: device="auto" passed over a plugin whose supports() returned True ("yes, supported") with the reason
    # "True", and one returning False with the reason "False" (polygemm/registry.py _rule_out)
    a, b = f32(rng, 5, 3), f32(rng, 3, 4)
    plan = pg.explain(a, b)
    why = dict(plan.candidates)
    for name, value in (("saystrue", "True"), ("saysfalse", "False")):
        assert why[name] == (f"supports() returned bool {value}; it must return None when the backend can compute the "
                             f"problem, else the reason (a string)"), why[name]
    assert plan.backend == "keepsplans"  # the next one by priority that answers as the contract says
    assert_within(pg.gemm(a, b), a, b)
    assert_within(pg.gemm(a, b, device="saystrue"), a, b)  # named, it runs: supports() is auto's question only


# -- a run() that writes into its inputs --------------------------------------------------------------------------------


def test_a_plugin_that_accumulates_into_c_is_an_error_and_c_is_left_as_it_was(plugins, rng):
    # defect: gemm(a, b, c, beta=2) on a plugin that accumulated into c (no out given) returned the right numbers and
    # changed the caller's c to them, silently. Host a, b and c now reach a plugin's run() as read-only views (no copy);
    # the write fails before it changes anything (polygemm/api.py _plugin_execute)
    a, b, c = f32(rng, 3, 4), f32(rng, 4, 2), f32(rng, 3, 2)
    before = c.copy()
    with pytest.raises(DeviceError, match=r"^backend 'intoc' .*failed in run\(\) .*ValueError: .*read-only \(it wrote into "
                                          r"an input: a, b and c are read-only to a plugin's run\(\)") as info:
        pg.gemm(a, b, c, beta=2.0, device="intoc")
    assert isinstance(info.value.__cause__, ValueError)
    np.testing.assert_array_equal(c, before)
    assert c.flags.writeable  # the caller's own array keeps its flags
    # in place (out is c) it is the plugin's to write, through out
    assert pg.gemm(a, b, c, beta=2.0, out=c, device="intoc") is c
    assert_within(c, a, b, before, 1.0, 2.0)
    assert_within(pg.gemm(a, b, device="intoc"), a, b)  # without c it never wrote into anything of the caller's


def test_a_plugin_that_scales_a_in_place_leaves_a_as_it_was(plugins, rng):
    # defect: as above, for a: the caller's a came back scaled by alpha
    a, b = f32(rng, 3, 4), f32(rng, 4, 2)
    before = a.copy()
    with pytest.raises(DeviceError, match=r"^backend 'scalesa' .*read-only"):
        pg.gemm(a, b, alpha=3.0, device="scalesa")
    np.testing.assert_array_equal(a, before)


def test_a_plugin_reads_the_callers_memory_without_a_copy_and_writes_out(plugins, rng):
    """Right (and what the read-only views must not change): run() gets a, b and c as views of the caller's memory,
    a Fortran-ordered or transposed operand as it is, and out writable and itself."""
    a, b, c = f32(rng, 4, 3).T, np.asfortranarray(f32(rng, 4, 5)), f32(rng, 3, 5)
    out = np.full((3, 5), np.nan, np.float32)
    assert pg.gemm(a, b, c, alpha=0.5, beta=2.0, out=out, device="peeks") is out
    assert_within(out, a, b, c, 0.5, 2.0)
    seen = sys.modules["pg_r21_plugin"].Peeks.seen[-1]
    for name, given in (("a", a), ("b", b), ("c", c)):
        arr, writeable = seen[name]
        assert not writeable and np.shares_memory(arr, given) and arr.strides == given.strides, name
    assert seen["out"][0] is out and seen["out"][1]
    ro = f32(rng, 4, 5)
    ro.flags.writeable = False  # an input that is read-only already reaches it as it is
    assert_within(pg.gemm(a, ro, device="peeks"), a, ro)
    assert sys.modules["pg_r21_plugin"].Peeks.seen[-1]["b"][0] is ro


# -- one Backend instance named by two entry points -----------------------------------------------------------------------


def test_one_backend_instance_under_two_entry_points_keeps_the_first_name(plugins, rng):
    # defect: entry points one = mod:SHARED and two = mod:SHARED (an instance, not a class) each set the instance's
    # name as they loaded: device="one" then ran and was reported by last_plan() as 'two' (polygemm/registry.py)
    a, b = f32(rng, 3, 4), f32(rng, 4, 2)
    assert_within(pg.gemm(a, b, device="one"), a, b)
    assert pg.last_plan().backend == "one"
    info = {i.name: i for i in pg.backends()}
    assert info["one"].available and not info["two"].available
    assert info["two"].reason == ("same Backend instance as entry point 'one' (an instance has one name): point both entry "
                                  "points at the class"), info["two"].reason
    assert "pg_r21_plugin:SHARED" in info["two"].detail
    with pytest.raises(pg.BackendUnavailableError, match="device 'two' is unavailable: same Backend instance as entry point 'one'"):
        pg.gemm(a, b, device="two")
    assert_within(pg.gemm(a, b, device="one"), a, b)
    assert pg.last_plan().backend == "one" and pg.get_backend("one").name == "one"


def test_one_class_under_two_entry_points_gives_two_backends_of_their_own(tmp_path, monkeypatch, fresh_registry, rng):
    """Right: the class as the target of two entry points (aliases) gives each its own instance and name."""
    install_fake_plugins(tmp_path, monkeypatch, fresh_registry,
                         ("pg-r21b", "pg_r21b_plugin", THIRD_PARTY_BASE, {"alias1": "pg_r21b_plugin:Good", "alias2": "pg_r21b_plugin:Good"}))
    try:
        a, b = f32(rng, 3, 4), f32(rng, 4, 2)
        for name in ("alias1", "alias2", "alias1"):
            assert_within(pg.gemm(a, b, device=name), a, b)
            assert pg.last_plan().backend == name
        assert pg.get_backend("alias1") is not pg.get_backend("alias2")
    finally:
        sys.modules.pop("pg_r21b_plugin", None)


# -- alpha and beta beyond the dtype's range, or float32's ------------------------------------------------------------


def _example(monkeypatch):
    for name in [m for m in sys.modules if m.startswith("polygemm_numpy_blas")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(EXAMPLE))
    from polygemm_numpy_blas import NumpyBlasBackend

    return NumpyBlasBackend()


@pytest.mark.parametrize("alpha, ab, beta, cs", [
    (1e39, 1e-15, 0.0, 0.0), (1e39, 1e-15, 1e39, 1e-37), (1.0, 1.0, 1e39, 1e-37),  # past float32's largest
    (3e-41, 1e18, 0.0, 0.0), (1e-45, 1e18, 3e-41, 1e37),  # float32 subnormals, inexact there
])
def test_the_example_plugin_scales_by_scalars_float32_cannot_hold(monkeypatch, rng, alpha, ab, beta, cs):
    # defect: the example plugin (the template docs/plugins.md says to copy) scaled float32 products by
    # np.float32(alpha): alpha=1e39 gave Inf where the result is 1e9, alpha=1e-45 scaled by 1.4e-45 (40% off). It now
    # scales in float64 where the work type cannot hold a scalar, as the cpu backend does
    from polygemm.problem import Call, normalize

    be = _example(monkeypatch)
    a, b = (f32(rng, 6, 5) * ab).astype(np.float32), (f32(rng, 5, 4) * ab).astype(np.float32)
    c = (f32(rng, 6, 4) * cs).astype(np.float32) if beta else None
    problem = normalize(a, b, c, alpha=alpha, beta=beta)
    got = be.execute(be.plan(problem), Call.from_problem(problem))
    assert np.isfinite(got).all()
    assert_within(got, a, b, c, alpha, beta)
    assert_within(pg.gemm(a, b, c, alpha=alpha, beta=beta, device="cpu"), a, b, c, alpha, beta)  # as the cpu backend


def test_the_conformance_suite_fails_a_plugin_that_scales_in_float32(plugins):
    # defect: the suite's scaling cases used alpha and beta of a few units only: a plugin scaling in float32 (the
    # example plugin among them) passed every case, and its users got Inf for alpha=1e39. The case wide_scalars
    # (polygemm/testing/conformance.py) passes alpha and beta past float32's range and below its normal numbers
    rows = run_conformance("float32scalars", groups="scaling")
    bad = [r for r in rows if r.status == "fail"]
    assert [r.case for r in bad] == ["wide_scalars"], rows
    assert "outside the bound" in bad[0].detail and re.search(r"got (-?inf|nan)", bad[0].detail), bad[0].detail
    # declaring float32 scalars, the core refuses what float32 cannot hold, and the suite expects that refusal
    assert all(r.status == "pass" for r in run_conformance("float32scalarsdeclared", groups="scaling"))
    a, b = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)
    with pytest.raises(UnsupportedProblemError, match="alpha=1e\\+39 does not fit the float32 scalars"):
        pg.gemm(a, b, alpha=1e39, device="float32scalarsdeclared")
    # one that declares them and computes anyway is told it did
    rows = run_conformance("declaresbutcomputes", groups="scaling")
    bad = [r for r in rows if r.status == "fail"]
    assert [r.case for r in bad] == ["wide_scalars"] and "yet it computed instead of refusing them" in bad[0].detail
    assert all(r.status == "pass" for r in run_conformance("good", groups="scaling"))


@pytest.mark.parametrize("backend", ["cpu", "musa"])
def test_the_builtin_host_backends_pass_the_wide_scalar_case(backend, monkeypatch, fresh_registry):
    """Right: the cpu backend (float64 scaling where needed) and musa's host flavor (float32 scalars, declared)."""
    if backend == "musa":
        monkeypatch.setenv("POLYGEMM_MUSA_EMULATION", "1")
        fresh_registry.refresh()
        if not {i.name: i for i in pg.backends()}["musa"].available:
            pytest.skip("libpolygemm_musa (host flavor) is not built here")
    rows = [r for r in run_conformance(backend, groups="scaling") if r.case == "wide_scalars" and r.status != "skip"]
    assert rows and all(r.status == "pass" for r in rows), [r for r in rows if r.status != "pass"]  # (mublas: not built)


# -- what the docs tell a plugin author to expect from the suite ------------------------------------------------------


@pytest.mark.parametrize("doc", ["docs/plugins.md", "examples/polygemm-numpy-blas/README.md"])
def test_the_suite_counts_the_docs_give_for_the_example_are_the_suites(doc):
    # defect: both said "96 passed and 3 skipped" for the example plugin; the suite had grown to 34 cases per dtype
    # (99 passed), and now 35 (102)
    text = (ROOT / doc).read_text()
    found = re.search(r"(\d+) (?:cases )?pass(?:ed)? and (\d+) (?:are )?skipped", text)
    assert found, doc
    per_dtype = sum(len(cases) for cases in case_groups().values())
    assert (int(found.group(1)), int(found.group(2))) == (3 * (per_dtype - 1), 3), found.group(0)


# -- threads sharing an out, a plan, a plugin -------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["auto", "reference", "numpy"])
@pytest.mark.parametrize("blocks", ["rows", "columns", "columns of a Fortran out"])
def test_threads_writing_disjoint_blocks_of_one_out_each_get_their_block(rng, variant, blocks):
    """Right: eight threads write their own block of one shared out (views of one array, one cached plan with their
    own pointers), thirty times each, with alpha, and with c = out (an in-place blocked update)."""
    m, n, k = 64, 48, 32
    a, b = f32(rng, m, k), f32(rng, k, n)
    c0 = f32(rng, m, n)
    order = "F" if "Fortran" in blocks else "C"
    out = np.zeros((m, n), np.float32, order=order)
    go = threading.Barrier(8)

    def block(i):
        return (slice(8 * i, 8 * i + 8), slice(None)) if blocks == "rows" else (slice(None), slice(6 * i, 6 * i + 6))

    def work(i):
        r, cl = block(i)
        go.wait()
        for rep in range(30):
            if rep % 2:
                out[r, cl] = c0[r, cl]
                got = pg.gemm(a[r], b[:, cl], out[r, cl], alpha=0.5, beta=2.0, out=out[r, cl], device="cpu", variant=variant)
            else:
                got = pg.gemm(a[r], b[:, cl], alpha=0.5, out=out[r, cl], device="cpu", variant=variant)
            assert np.shares_memory(got, out)

    assert run_concurrently(work, 8) == []
    # the last repeat (29) was the in-place update of every block
    assert_within(out, a, b, c0, 0.5, 2.0)


def test_threads_calling_a_plugin_with_kept_plans_each_get_their_own_product(plugins, rng):
    """Right, once the core completes its own copy of a kept plan: eight threads, each with its own operands and with
    or without out, on one plugin that returns the same Plan object for every problem of a shape."""
    go = threading.Barrier(8)

    def work(i):
        local = np.random.default_rng(i)
        a, b, c = f32(local, 5, 3), f32(local, 3, 4), f32(local, 5, 4)
        go.wait()
        for rep in range(25):
            if rep % 3 == 0:
                got = pg.gemm(a, b, device="keepsplans")
                assert_within(got, a, b)
            elif rep % 3 == 1:
                out = np.full((5, 4), np.nan, np.float32)
                assert pg.gemm(a, b, device="keepsplans", out=out) is out
                assert_within(out, a, b)
            else:
                assert_within(pg.gemm(a, b, c, alpha=float(i), beta=-1.0, device="keepsplans"), a, b, c, float(i), -1.0)
            plan = pg.last_plan()
            assert plan.backend == "keepsplans" and (plan.problem.out is not None) == (rep % 3 == 1)

    assert run_concurrently(work, 8) == []


def test_threads_on_a_plugin_that_writes_into_c_never_change_any_threads_c(plugins, rng):
    """Right: with read-only inputs, each thread's failing call leaves its c (and its neighbours') as they were."""
    base = f32(rng, 16, 4)
    before = base.copy()
    a, b = f32(rng, 16, 3), f32(rng, 3, 4)

    def work(i):
        r = slice(2 * i, 2 * i + 2)
        for _ in range(10):
            with pytest.raises(DeviceError, match="read-only"):
                pg.gemm(a[r], b, base[r], beta=1.5, device="intoc")

    assert run_concurrently(work, 8) == []
    np.testing.assert_array_equal(base, before)
