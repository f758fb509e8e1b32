"""Third-party backends as docs/plugins.md writes them: registration, priorities, results, refusals."""

from __future__ import annotations

import re
import sys
import threading

import numpy as np
import pytest

import polygemm
import polygemm as pg
from polygemm import errors, registry
from polygemm.backend import Availability, Backend, Plan, Variant, host_layouts, store_result
from polygemm.errors import (
    ArgumentError,
    ArgumentTypeError,
    BackendUnavailableError,
    DeviceError,
    PolygemmError,
    UnsupportedProblemError,
)
from polygemm.testing import assert_close, reference_for, run_conformance

from tests.helpers import (
    cli_error_line,
    OnPluginDevice,
    REPO_ROOT,
    run_concurrently,
    run_conformance_suites,
)
from tests.plugin_sources import (
    DOC_PLUGIN,
    DOUBLE_PLUGIN,
    FAST_PLUGIN,
    install_fake_distribution,
    install_fake_plugins,
    THIRD_PARTY_BASE,
)


ROOT = REPO_ROOT


EXAMPLE = ROOT / "examples" / "polygemm-numpy-blas"


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
                res = res + p.beta * p.c.array.astype(np.float64)  # beta * a float32 array is float32 (NumPy 2)
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


def assert_within(got, a, b, c=None, alpha=1.0, beta=0.0, out_dtype=None):
    """``got`` element-wise within the bound of the float64 reference (shape and dtype too)."""
    res = reference_for(a, b, c, alpha, beta, out_dtype=out_dtype).compare(got)
    assert res.ok, res.message


PLUGIN_BASE = THIRD_PARTY_BASE + """
class PlanGarbage(Good):
    def plan(self, problem, variant="auto"):
        return {"variant": "v"}

class PlanRaises(Good):
    def plan(self, problem, variant="auto"):
        raise KeyError("tile table")

class PlanOtherName(Good):
    def plan(self, problem, variant="auto"):
        return Plan("cpu", "v", "hard-coded", problem)

class PlanRefuses(Good):
    def plan(self, problem, variant="auto"):
        from polygemm.errors import UnsupportedProblemError
        raise UnsupportedProblemError("mydev takes M a multiple of 4")

class WrongShape(Good):
    def run(self, plan):
        p = plan.problem
        return np.zeros((p.m + 1, p.n), np.float32)

class WrongDtype(Good):
    def run(self, plan):
        p = plan.problem
        return p.a.array.astype(np.float64) @ p.b.array

class ReturnsNone(Good):
    def run(self, plan):
        return None

class OutNotWritten(Good):
    def run(self, plan):
        p = plan.problem
        return (p.a.array @ p.b.array).astype(np.float32)

class HalfWritesThenRaises(Good):
    def run(self, plan):
        plan.problem.out.array[:1] = 99.0
        raise RuntimeError("vendor exploded")

class HalfWritesThenExits(Good):
    def run(self, plan):
        plan.problem.out.array[:1] = 99.0
        import sys
        sys.exit("vendor gave up")

class HalfWritesThenInterrupted(Good):
    def run(self, plan):
        plan.problem.out.array[:1] = 99.0
        raise KeyboardInterrupt

class VariantsRaise(Good):
    def variants(self):
        raise RuntimeError("vendor table unreadable")

class DtypesString(Good):
    def variants(self):
        return (Variant("v", "float32", "float32 matmul"),)

class PrecisionUnknown(Good):
    def variants(self):
        return (Variant("v", ("float32",), "float32 matmul", precision="fp32"),)

class ResidenciesString(Good):
    residencies = ("mydev")

class VariantsFailLater(Good):
    broken = False  # set by the test after discovery: the table listed then, failing when a call reads it

    def variants(self):
        if type(self).broken:
            raise OSError("device lost while listing kernels")
        return super().variants()

class TwiceNamed(Good):
    def variants(self):
        return (Variant("v", ("float32",), "one"), Variant("v", ("float64",), "two"))

class ViewOfC(Good):
    def run(self, plan):  # alpha 0, beta 1: c itself handed back (a read-only view of the caller's c)
        p = plan.problem
        if p.out is None and p.alpha == 0.0 and p.beta == 1.0 and p.c is not None:
            return p.c.array
        return super().run(plan)

class FortranResult(Good):
    def run(self, plan):
        p = plan.problem
        if p.out is not None:
            return super().run(plan)
        return np.asfortranarray((p.a.array.astype(np.float64) @ p.b.array).astype(np.float32))

class Noisy(Good):
    def run(self, plan):  # no np.errstate of its own: inf - inf warns in its matmul
        p = plan.problem
        res = (p.a.array @ p.b.array).astype(np.float32)
        if p.out is not None:
            p.out.array[...] = res
            return p.out.array
        return res

class ColonName(Good):
    def variants(self):
        return (Variant("split:k=4", ("float32",), "a name with a modifier's colon"),)

class ExecOverride(Good):
    def execute(self, plan, call):  # the cached plan run as it is, its call never bound: no arrays in it
        return self.run(plan)

class AutoName(Good):
    def variants(self):
        return (Variant("auto", ("float32",), "a variant named auto"),)
"""


CLASSES = ["Good", "PlanGarbage", "PlanRaises", "PlanOtherName", "PlanRefuses", "WrongShape", "WrongDtype", "ReturnsNone",
           "OutNotWritten", "HalfWritesThenRaises", "HalfWritesThenExits", "HalfWritesThenInterrupted", "VariantsRaise",
           "DtypesString", "PrecisionUnknown", "ResidenciesString", "VariantsFailLater", "TwiceNamed", "ViewOfC",
           "FortranResult", "Noisy", "ColonName", "AutoName", "ExecOverride"]


@pytest.fixture
def third_party(tmp_path, monkeypatch, fresh_registry):
    import sys

    install_fake_plugins(tmp_path, monkeypatch, fresh_registry,
                         ("pg_thirdparty", "pg_thirdparty_plugin", PLUGIN_BASE, {c.lower(): f"pg_thirdparty_plugin:{c}" for c in CLASSES}))
    yield
    sys.modules.pop("pg_thirdparty_plugin", None)


def _operands(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    return a, b


BROKEN_IMPORT = 'raise ImportError("vendor runtime libfoo.so.3 not found")\n'


def _ones(*shape, dtype=np.float32):
    return np.ones(shape, dtype)


def assert_within_2(got, a, b, c=None, alpha=1.0, beta=0.0):
    """``got`` element-wise within the bound of the float64 reference (shape and dtype too)."""
    res = reference_for(a, b, c, alpha, beta).compare(got)
    assert res.ok, res.message


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _example(monkeypatch):
    for name in [m for m in sys.modules if m.startswith("polygemm_numpy_blas")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(EXAMPLE))
    from polygemm_numpy_blas import NumpyBlasBackend

    return NumpyBlasBackend()


def _operands_2(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)


def test_a_plugins_for_device_that_raises_is_that_device_unavailable(broken, capsys, rng):
    # device="fordev:1" on a plugin whose for_device raises is that device unavailable, with the reason, from
    # polygemm.gemm, get_backend and polygemm gemm/variants/bench --device fordev:1, not the plugin's RuntimeError
    # (polygemm/registry.py)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    says = r"device 'fordev:1' is unavailable: for_device\(1\) failed: RuntimeError: device table unreadable"
    with pytest.raises(BackendUnavailableError, match=says):
        pg.gemm(a, b, device="fordev:1")
    with pytest.raises(BackendUnavailableError, match=says):
        pg.get_backend("fordev:1")
    for argv in (["variants", "--device", "fordev:1"], ["gemm", "--shape", "2x2x2", "--device", "fordev:1"]):
        assert "device table unreadable" in cli_error_line(capsys, argv)
    assert_close(pg.gemm(a, b, device="cpu"), a, b)  # the rest is untouched


def test_a_plugin_with_a_read_only_name_is_told_what_to_change(broken):
    # the import works; what fails is polygemm's own assignment of the name (polygemm/registry.py): the reason says
    # what to change, not "import failed: AttributeError: property 'name' of 'B' object has no setter"
    info = {i.name: i for i in pg.backends()}["roname"]
    assert not info.available
    assert info.reason.startswith("name is read-only") and "plain class attribute" in info.reason
    assert "import failed" not in info.reason and "AttributeError" in info.detail


def test_pyargs_suite_runs_the_example_plugin(tmp_path):
    # the example registered as pip would register it (a .dist-info with its entry point), its source on the path
    site = tmp_path / "site"
    info = site / "polygemm_numpy_blas-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: polygemm-numpy-blas\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[polygemm.backends]\nnumpy_blas = polygemm_numpy_blas:NumpyBlasBackend\n")
    env = {"POLYGEMM_TEST_BACKEND": "numpy_blas", "POLYGEMM_TEST_QUICK": "1"}
    r, gone = run_conformance_suites(tmp_path, [env, env], paths=[[str(site), str(EXAMPLE)], []])
    assert r.returncode == 0 and " passed" in r.stdout and "failed" not in r.stdout, r.stdout[-2000:]
    assert int(r.stdout.split(" passed")[0].split()[-1]) >= 20, r.stdout[-2000:]  # its cases ran, not one placeholder
    # without the plugin on the path the same name is not loadable: a failure, not a pass
    assert gone.returncode == 1 and "numpy_blas-not-loadable" in gone.stdout, gone.stdout[-2000:]


@pytest.mark.parametrize("bug, group", [(_AlphaDroppedWhenBetaIsZero, "scaling"), (_OutLeftUnwrittenBesideC, "layouts")])
def test_the_conformance_suite_fails_a_plugin_with_a_real_bug(bug, group):
    # each plugin carries a fault the suite must catch: scaling without c (or with beta = 0) drops alpha, and a result
    # left in the returned array, not written into out (which is what polygemm.gemm gives the caller); each fails its
    # group only
    rows = run_conformance(bug(), dtypes=["float32"])
    fails = [r for r in rows if r.status == "fail"]
    assert fails and {r.group for r in fails} == {group}, [(r.group, r.case, r.detail) for r in fails]
    assert all(r.status == "pass" for r in run_conformance(_Buggy(), dtypes=["float32"]) if r.group != "device")


def test_a_good_third_party_plugin_computes_and_keeps_its_own_refusals(rng, third_party):
    """A plugin that keeps the contract computes, with and without out (out returned and written), and a refusal of
    its own (a polygemm error) reaches the caller as it raised it."""
    a, b = _operands(rng)
    assert_within(pg.gemm(a, b, device="good"), a, b)
    out = np.full((3, 2), np.nan, np.float32)
    assert pg.gemm(a, b, device="good", out=out) is out
    assert_within(out, a, b)
    c = rng.standard_normal((3, 2)).astype(np.float32)
    assert pg.gemm(a, b, c, beta=0.5, out=c, device="good") is c
    with pytest.raises(UnsupportedProblemError, match="^mydev takes M a multiple of 4$"):
        pg.gemm(a, b, device="planrefuses")
    assert pg.last_plan().backend == "good"


@pytest.mark.parametrize("name, says", [
    ("plangarbage", r"plan\(\) returned dict .*, not a polygemm.backend.Plan"),
    ("planraises", r"failed in plan\(\): KeyError: 'tile table'"),
    ("planothername", r"plan\(\) returned a plan for backend 'cpu'; Plan\(backend=...\) must be self.name \('planothername'\)"),
])
def test_a_plugin_plan_that_breaks_the_contract_is_an_error_naming_it(rng, third_party, name, says):
    # plan() returning a dict, a KeyError raised in plan(), and a plan saying backend 'cpu' are each an error naming
    # the plugin: none reaches the caller bare, and nothing runs or is reported by last_plan() and explain() as cpu's
    # (polygemm/api.py _plugin_plan)
    a, b = _operands(rng)
    out = np.full((3, 2), 7.0, np.float32)
    for call in (lambda: pg.gemm(a, b, device=name, out=out), lambda: pg.explain(a, b, device=name)):
        with pytest.raises(DeviceError, match=f"^backend '{name}' \\(pg_thirdparty_plugin\\.") as info:
            call()
        assert isinstance(info.value, RuntimeError)
        assert __import__("re").search(says, str(info.value)), str(info.value)
    assert (out == 7.0).all()
    if name == "planraises":
        assert isinstance(info.value.__cause__, KeyError)  # chained: the plugin's own traceback stays


@pytest.mark.parametrize("name, says", [
    ("wrongshape", r"run\(\) returned a result of shape \(4, 2\), not the result's \(3, 2\)"),
    ("wrongdtype", r"run\(\) returned a float64 result, not float32"),
    ("returnsnone", r"run\(\) returned NoneType, not a NumPy array"),
])
def test_a_plugin_result_of_another_shape_dtype_or_kind_is_an_error_not_the_answer(rng, third_party, name, says):
    # the plugin's (4, 2) array, its float64 array or None is no result of a (3, 2) float32 product, and with out= an
    # out left unwritten is none either: each is an error naming the backend (polygemm/api.py _plugin_execute)
    a, b = _operands(rng)
    with pytest.raises(DeviceError, match=f"^backend '{name}' .*{says}"):
        pg.gemm(a, b, device=name)
    out = np.full((3, 2), 7.0, np.float32)
    with pytest.raises(DeviceError, match=says + ".*out was left as it was"):
        pg.gemm(a, b, device=name, out=out)
    assert (out == 7.0).all()


def test_a_plugin_that_calls_sys_exit_in_run_is_its_failure_and_ctrl_c_is_the_users(rng, third_party):
    """A sys.exit() in a plugin's run() is a DeviceError naming it (as at its import), never the caller's process ending
    with out half-written; Ctrl-C is raised on as it is, out restored either way."""
    a, b = _operands(rng)
    out = np.full((3, 2), 7.0, np.float32)
    with pytest.raises(DeviceError, match=r"^backend 'halfwritesthenexits' .*failed in run\(\).*SystemExit: vendor gave up"):
        pg.gemm(a, b, device="halfwritesthenexits", out=out)
    assert (out == 7.0).all()
    with pytest.raises(KeyboardInterrupt):
        pg.gemm(a, b, device="halfwritesthenInterrupted".lower(), out=out)
    assert (out == 7.0).all()


def test_a_plugin_whose_variants_fail_after_discovery_is_a_device_error_naming_it(rng, third_party):
    assert {i.name: i for i in pg.backends()}["variantsfaillater"].available
    sys.modules["pg_thirdparty_plugin"].VariantsFailLater.broken = True
    a, b = _operands(rng)
    out = np.full((3, 2), 7.0, np.float32)
    with pytest.raises(DeviceError, match=r"^backend 'variantsfaillater' .*failed while the core checked a problem against "
                                          r"it .*OSError: device lost while listing kernels"):
        pg.gemm(a, b, device="variantsfaillater", out=out)
    assert (out == 7.0).all()


def test_conformance_of_a_backend_whose_variant_table_raises_is_a_failure_with_the_reason(third_party, capsys):
    # a fault of its own code, as under pytest: a CI job that asserts no row failed must not pass it
    from polygemm.apps.cli import main
    from polygemm.testing.conformance import run_conformance

    rows = run_conformance("variantsraise", quick=True)
    assert [(r.dtype, r.variant, r.status) for r in rows] == [("*", "*", "fail")]
    assert "breaks the backend contract" in rows[0].detail and "vendor table unreadable" in rows[0].detail
    assert main(["matrix", "--backends", "variantsraise", "--quick"]) == 1  # named and unavailable: a failure of its CI
    assert "Traceback" not in capsys.readouterr().err
    assert main(["variants", "--device", "variantsraise"]) == 1  # its row says why; named, so not a success
    assert "variantsraise: " in capsys.readouterr().out


def test_a_plugin_that_returns_a_new_array_instead_of_writing_out_is_an_error(rng, third_party):
    # gemm(..., out=out) does not hand back out with its old values as the product (polygemm/api.py)
    a, b = _operands(rng)
    assert_within(pg.gemm(a, b, device="outnotwritten"), a, b)  # without out it is right
    out = np.full((3, 2), 7.0, np.float32)
    with pytest.raises(DeviceError, match=r"run\(\) returned an array other than problem\.out\.array"):
        pg.gemm(a, b, device="outnotwritten", out=out)
    assert (out == 7.0).all()


def test_a_plugin_that_fails_half_way_leaves_out_and_c_as_they_were(rng, third_party):
    # a plugin that writes a row of out and then raises leaves out (and c, updated in place) as they were, and the
    # error names the backend (polygemm/api.py _plugin_execute)
    a, b = _operands(rng)
    out = np.full((3, 2), 7.0, np.float32)
    with pytest.raises(DeviceError, match=r"^backend 'halfwritesthenraises' .*failed in run\(\) on 3x2x4 .*"
                                          r"RuntimeError: vendor exploded") as info:
        pg.gemm(a, b, device="halfwritesthenraises", out=out)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert (out == 7.0).all()
    c = rng.standard_normal((3, 2)).astype(np.float32)
    before = c.copy()
    with pytest.raises(DeviceError):
        pg.gemm(a, b, c, beta=1.0, out=c, device="halfwritesthenraises")
    np.testing.assert_array_equal(c, before)


@pytest.mark.parametrize("name, says", [
    ("dtypesstring", r"variants\(\): variant 'v' has dtypes='float32'; it must be a tuple of dtype names"),
    ("twicenamed", r"variants\(\): variant 'v' is listed twice"),
    ("precisionunknown", r"variants\(\): variant 'v' has precision='fp32'; it must be one of 'highest', 'high', 'medium'"),
    ("residenciesstring", r"residencies must be a tuple of the places its operands live.*got 'mydev'"),
])
def test_a_variant_table_with_fields_of_another_kind_makes_the_plugin_unavailable(rng, third_party, name, says):
    # dtypes="float32" is no sequence of dtypes ('f', 'l', 'o', ...), and a second variant of one name would be
    # unreachable: either makes the plugin unavailable (polygemm/registry.py)
    info = {i.name: i for i in pg.backends()}[name]
    assert not info.available and __import__("re").search(says, info.reason), info.reason
    a, b = _operands(rng)
    with pytest.raises(pg.BackendUnavailableError, match=says):
        pg.gemm(a, b, device=name)
    assert_within(pg.gemm(a, b, device="good"), a, b)  # the others are untouched


def test_the_conformance_suite_fails_a_plugin_that_ignores_out(third_party):
    """The suite reports such a plugin failing (through the error), never passing."""
    rows = run_conformance("outnotwritten", groups="shapes", quick=True)
    assert rows and any(r.status == "fail" for r in rows)
    assert all(r.status == "pass" for r in run_conformance("good", groups="shapes", quick=True))


def test_the_doc_plugin_under_pytest_pyargs_passes_and_the_broken_ones_do_not(tmp_path):
    """Section 7's CI line on the plugin passes with its cases counted;
    on the plugin whose execute is wrong it fails; on the one whose import fails it is one failing test."""
    site = tmp_path / "site"
    site.mkdir()
    install_fake_distribution(site, "polygemm_mydev", "polygemm_mydev", DOC_PLUGIN, {"mydev": "polygemm_mydev:MyDevBackend"})
    install_fake_distribution(site, "polygemm_fast", "polygemm_fast", FAST_PLUGIN, {"fast": "polygemm_fast:FastBackend"})
    install_fake_distribution(site, "polygemm_broke", "polygemm_broke", BROKEN_IMPORT, {"broke": "polygemm_broke:Broke"})
    good, fast, broke = run_conformance_suites(
        tmp_path, [{"POLYGEMM_TEST_BACKEND": name, "POLYGEMM_TEST_QUICK": "1"} for name in ("mydev", "fast", "broke")],
        extra_path=[str(site)])
    assert good.returncode == 0 and "failed" not in good.stdout, good.stdout[-2000:]
    assert int(good.stdout.split(" passed")[0].split()[-1]) >= 80, good.stdout[-2000:]  # 4 (dtype, variant) x the quick grid
    assert fast.returncode == 1 and "scaling" in fast.stdout, fast.stdout[-2000:]
    assert broke.returncode == 1 and "1 failed" in broke.stdout and "libfoo.so.3" in broke.stdout, broke.stdout[-2000:]


def test_a_plugin_installed_mid_session_is_used_after_refresh_and_named_by_polygemm_device(tmp_path, monkeypatch,
                                                                                            fresh_registry, without_gpu):
    """a plugin pip-installed into a running notebook is not seen (nor a cached plan dropped) until
    registry.refresh(); then auto takes it (priority 300 over cpu's 0) with a new plan, and $POLYGEMM_DEVICE names
    it in any case, with an index, or names cpu again, each at the very next call."""
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), _ones(3, 4)
    want = a @ b
    pg.gemm(a, b)
    assert pg.last_plan().backend == "cpu"
    install_fake_distribution(tmp_path, "polygemm-late", "late_plugin", THIRD_PARTY_BASE, {"late": "late_plugin:Good"})
    monkeypatch.syspath_prepend(str(tmp_path))
    assert np.array_equal(pg.gemm(a, b), want) and (pg.last_plan().backend, pg.last_plan().cached) == ("cpu", True)
    registry.refresh()
    assert np.array_equal(pg.gemm(a, b), want) and (pg.last_plan().backend, pg.last_plan().cached) == ("late", False)
    assert ("cpu" not in [n for n, _ in pg.last_plan().candidates])  # taken before cpu, not after it
    for value in ("LATE", " late ", "late:0"):
        monkeypatch.setenv("POLYGEMM_DEVICE", value)
        assert np.array_equal(pg.gemm(a, b), want) and pg.last_plan().backend == "late"
    monkeypatch.setenv("POLYGEMM_DEVICE", "late:1")
    with pytest.raises(BackendUnavailableError, match=r"has one device.*\$POLYGEMM_DEVICE='late:1'"):
        pg.gemm(a, b)
    monkeypatch.setenv("POLYGEMM_DEVICE", "cpu:0")
    assert np.array_equal(pg.gemm(a, b), want) and pg.last_plan().backend == "cpu"
    monkeypatch.setenv("POLYGEMM_DEVICE", "nosuch")
    assert np.array_equal(pg.gemm(a, b, device="late"), want)  # an explicit device is not the variable's
    with pytest.raises(BackendUnavailableError, match=r"unknown device 'nosuch'; known devices: cpu, cuda, late, musa"):
        pg.gemm(a, b)


def test_every_error_the_docs_list_is_exported_with_the_builtin_base_they_name():
    """the README's "errors in polygemm.errors" are importable from polygemm (the same classes) and are
    PolygemmErrors; each has the built-in base docs/plugins.md's table gives; ArgumentTypeError is also a TypeError."""
    readme = " ".join((ROOT / "docs" / "api.md").read_text().split())  # the API page (README links it)
    listed = re.search(r"errors in `polygemm\.errors`: (.*?), all `PolygemmError`s", readme).group(1)
    names = re.findall(r"`(\w+)`", listed)
    # UnknownDeviceError: an unknown device name, a BackendUnavailableError that is also a ValueError
    assert set(names) == {"ShapeError", "DTypeError", "ArgumentError", "ArgumentTypeError", "BackendUnavailableError",
                          "UnknownDeviceError", "UnsupportedProblemError", "DeviceError", "VerificationError"}
    table = dict(re.findall(r"^\| `(\w+Error)` \| `(\w+Error)` \|", (ROOT / "docs" / "plugins.md").read_text(), re.M))
    assert set(table) == set(names)
    for name in names + ["PolygemmError", "ArgumentTypeError"]:
        cls = getattr(pg, name)
        assert cls is getattr(errors, name) and issubclass(cls, PolygemmError) and name in pg.__all__
    for name, base in table.items():
        assert issubclass(getattr(pg, name), getattr(__builtins__, base) if hasattr(__builtins__, base)
                          else __builtins__[base])
    assert issubclass(ArgumentTypeError, (ArgumentError)) and issubclass(ArgumentTypeError, TypeError)


def test_a_plugin_that_returns_a_plan_it_kept_runs_each_call_as_its_own(plugins, rng):
    # the core completes a copy of the Plan object plan() returns (its problem, candidates, copies) and caches that: a
    # plugin returning its kept plan again for gemm(a, b, out=o) leaves the plan cached for gemm(a, b) as it was, so
    # the next gemm(a, b) runs without an out it was not given (polygemm/api.py _plugin_plan)
    a, b = f32(rng, 3, 4), f32(rng, 4, 2)
    assert_within_2(pg.gemm(a, b, device="keepsplans"), a, b)
    out = np.full((3, 2), np.nan, np.float32)
    assert pg.gemm(a, b, device="keepsplans", out=out) is out
    assert_within_2(out, a, b)
    got = pg.gemm(a, b, device="keepsplans")  # the plan cached by the first call
    assert pg.last_plan().cached and pg.last_plan().problem.out is None
    assert_within_2(got, a, b)
    c = f32(rng, 3, 2)
    assert_within_2(pg.gemm(a, b, c, alpha=2.0, beta=-1.0, device="keepsplans"), a, b, c, 2.0, -1.0)
    assert_within_2(pg.gemm(a, b, device="keepsplans"), a, b)


def test_supports_answering_with_a_bool_is_passed_over_saying_what_the_contract_is(plugins, rng):
    # supports() answers with a reason or None; a bool is passed over by device="auto" with a reason that says what
    # the contract is, not "True" or "False" (polygemm/registry.py _rule_out)
    a, b = f32(rng, 5, 3), f32(rng, 3, 4)
    plan = pg.explain(a, b)
    why = dict(plan.candidates)
    for name, value in (("saystrue", "True"), ("saysfalse", "False")):
        assert why[name] == (f"supports() returned bool {value}; it must return None when the backend can compute the "
                             f"problem, else the reason (a string)"), why[name]
    assert plan.backend == "keepsplans"  # the next one by priority that answers as the contract says
    assert_within_2(pg.gemm(a, b), a, b)
    assert_within_2(pg.gemm(a, b, device="saystrue"), a, b)  # named, it runs: supports() is auto's question only


def test_a_plugin_that_accumulates_into_c_is_an_error_and_c_is_left_as_it_was(plugins, rng):
    # host a, b and c reach a plugin's run() as read-only views (no copy): gemm(a, b, c, beta=2) on a plugin that
    # accumulates into c (no out given) fails before it changes the caller's c (polygemm/api.py _plugin_execute)
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
    assert_within_2(c, a, b, before, 1.0, 2.0)
    assert_within_2(pg.gemm(a, b, device="intoc"), a, b)  # without c it never wrote into anything of the caller's


def test_a_plugin_that_scales_a_in_place_leaves_a_as_it_was(plugins, rng):
    # as above, for a: the caller's a came back scaled by alpha
    a, b = f32(rng, 3, 4), f32(rng, 4, 2)
    before = a.copy()
    with pytest.raises(DeviceError, match=r"^backend 'scalesa' .*read-only"):
        pg.gemm(a, b, alpha=3.0, device="scalesa")
    np.testing.assert_array_equal(a, before)


def test_a_plugin_reads_the_callers_memory_without_a_copy_and_writes_out(plugins, rng):
    """What the read-only views must not change: run() gets a, b and c as views of the caller's memory,
    a Fortran-ordered or transposed operand as it is, and out writable and itself."""
    a, b, c = f32(rng, 4, 3).T, np.asfortranarray(f32(rng, 4, 5)), f32(rng, 3, 5)
    out = np.full((3, 5), np.nan, np.float32)
    assert pg.gemm(a, b, c, alpha=0.5, beta=2.0, out=out, device="peeks") is out
    assert_within_2(out, a, b, c, 0.5, 2.0)
    seen = sys.modules["pg_rule_bending_plugin"].Peeks.seen[-1]
    for name, given in (("a", a), ("b", b), ("c", c)):
        arr, writeable = seen[name]
        assert not writeable and np.shares_memory(arr, given) and arr.strides == given.strides, name
    assert seen["out"][0] is out and seen["out"][1]
    ro = f32(rng, 4, 5)
    ro.flags.writeable = False  # an input that is read-only already reaches it as it is
    assert_within_2(pg.gemm(a, ro, device="peeks"), a, ro)
    assert sys.modules["pg_rule_bending_plugin"].Peeks.seen[-1]["b"][0] is ro


def test_one_backend_instance_under_two_entry_points_keeps_the_first_name(plugins, rng):
    # entry points one = mod:SHARED and two = mod:SHARED (an instance, not a class): the instance keeps the first
    # name, so device="one" runs and last_plan() reports 'one', not 'two' (polygemm/registry.py)
    a, b = f32(rng, 3, 4), f32(rng, 4, 2)
    assert_within_2(pg.gemm(a, b, device="one"), a, b)
    assert pg.last_plan().backend == "one"
    info = {i.name: i for i in pg.backends()}
    assert info["one"].available and not info["two"].available
    assert info["two"].reason == ("same Backend instance as entry point 'one' (an instance has one name): point both entry "
                                  "points at the class"), info["two"].reason
    assert "pg_rule_bending_plugin:SHARED" in info["two"].detail
    with pytest.raises(pg.BackendUnavailableError, match="device 'two' is unavailable: same Backend instance as entry point 'one'"):
        pg.gemm(a, b, device="two")
    assert_within_2(pg.gemm(a, b, device="one"), a, b)
    assert pg.last_plan().backend == "one" and pg.get_backend("one").name == "one"


def test_one_class_under_two_entry_points_gives_two_backends_of_their_own(tmp_path, monkeypatch, fresh_registry, rng):
    """the class as the target of two entry points (aliases) gives each its own instance and name."""
    install_fake_plugins(tmp_path, monkeypatch, fresh_registry,
                         ("pg-aliased", "pg_aliased_plugin", THIRD_PARTY_BASE, {"alias1": "pg_aliased_plugin:Good", "alias2": "pg_aliased_plugin:Good"}))
    try:
        a, b = f32(rng, 3, 4), f32(rng, 4, 2)
        for name in ("alias1", "alias2", "alias1"):
            assert_within_2(pg.gemm(a, b, device=name), a, b)
            assert pg.last_plan().backend == name
        assert pg.get_backend("alias1") is not pg.get_backend("alias2")
    finally:
        sys.modules.pop("pg_aliased_plugin", None)


@pytest.mark.parametrize("alpha, ab, beta, cs", [
    (1e39, 1e-15, 0.0, 0.0), (1e39, 1e-15, 1e39, 1e-37), (1.0, 1.0, 1e39, 1e-37),  # past float32's largest
    (3e-41, 1e18, 0.0, 0.0), (1e-45, 1e18, 3e-41, 1e37),  # float32 subnormals, inexact there
])
def test_the_example_plugin_scales_by_scalars_float32_cannot_hold(monkeypatch, rng, alpha, ab, beta, cs):
    # the example plugin (the template docs/plugins.md says to copy) scales in float64 where the work type cannot hold
    # a scalar, as the cpu backend does: by np.float32(alpha), alpha=1e39 would give Inf where the result is 1e9, and
    # alpha=1e-45 would scale by 1.4e-45 (40% off)
    from polygemm.problem import Call, normalize

    be = _example(monkeypatch)
    a, b = (f32(rng, 6, 5) * ab).astype(np.float32), (f32(rng, 5, 4) * ab).astype(np.float32)
    c = (f32(rng, 6, 4) * cs).astype(np.float32) if beta else None
    problem = normalize(a, b, c, alpha=alpha, beta=beta)
    got = be.execute(be.plan(problem), Call.from_problem(problem))
    assert np.isfinite(got).all()
    assert_within_2(got, a, b, c, alpha, beta)
    assert_within_2(pg.gemm(a, b, c, alpha=alpha, beta=beta, device="cpu"), a, b, c, alpha, beta)  # as the cpu backend


def test_the_conformance_suite_fails_a_plugin_that_scales_in_float32(plugins):
    # a plugin scaling in float32 passes scaling cases of a few units and gives its users Inf for alpha=1e39: the case
    # wide_scalars (polygemm/testing/conformance.py) passes alpha and beta past float32's range and below its normal
    # numbers
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


def test_threads_calling_a_plugin_with_kept_plans_each_get_their_own_product(plugins, rng):
    """Eight threads, each with its own operands and with or without out, on one plugin that returns the same Plan
    object for every problem of a shape, each get their own product: the core completes its own copy of a kept plan."""
    go = threading.Barrier(8)

    def work(i):
        local = np.random.default_rng(i)
        a, b, c = f32(local, 5, 3), f32(local, 3, 4), f32(local, 5, 4)
        go.wait()
        for rep in range(25):
            if rep % 3 == 0:
                got = pg.gemm(a, b, device="keepsplans")
                assert_within_2(got, a, b)
            elif rep % 3 == 1:
                out = np.full((5, 4), np.nan, np.float32)
                assert pg.gemm(a, b, device="keepsplans", out=out) is out
                assert_within_2(out, a, b)
            else:
                assert_within_2(pg.gemm(a, b, c, alpha=float(i), beta=-1.0, device="keepsplans"), a, b, c, float(i), -1.0)
            plan = pg.last_plan()
            assert plan.backend == "keepsplans" and (plan.problem.out is not None) == (rep % 3 == 1)

    assert run_concurrently(work, 8) == []


def test_threads_on_a_plugin_that_writes_into_c_never_change_any_threads_c(plugins, rng):
    """With read-only inputs, each thread's failing call leaves its c (and its neighbours') as they were."""
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


def test_an_entry_point_value_that_names_no_module_says_so(tmp_path, monkeypatch, fresh_registry):
    from tests.plugin_sources import install_fake_plugins

    install_fake_plugins(tmp_path, monkeypatch, fresh_registry, ("pg-badvalue", "pg_badvalue_mod", "x = 1\n",
                                                               {"badvalue": "pg_badvalue_mod B"}))
    info = {i.name: i for i in polygemm.backends()}["badvalue"]
    assert not info.available
    assert "entry point value 'pg_badvalue_mod B' is not 'module' or 'module:attribute'" in info.reason
    assert "NoneType" not in info.reason


def test_a_plugin_whose_entry_point_has_capitals_is_selected_by_its_name(tmp_path, monkeypatch, fresh_registry, rng):
    # device="MyDev" selects the entry point MyDev, not "unknown device 'mydev' (did you mean 'MyDev'?)"
    install_fake_distribution(tmp_path, "pg_capitals", "pg_capitals_plugin", DOUBLE_PLUGIN, {"MyDev": "pg_capitals_plugin:DoubleBackend"})
    monkeypatch.syspath_prepend(str(tmp_path))
    fresh_registry.refresh()
    a, b = _operands_2(rng)
    try:
        for name in ("MyDev", "mydev", "MYDEV", "MyDev:0"):
            np.testing.assert_allclose(pg.gemm(a, b, device=name), a @ b, rtol=1e-5, atol=1e-5)
            assert pg.last_plan().backend == "MyDev"
            assert pg.get_backend(name).name == "MyDev"
        monkeypatch.setenv("POLYGEMM_DEVICE", "MyDev")
        pg.gemm(a, b)
        assert pg.last_plan().backend == "MyDev"
        fresh_registry.check_known("mydev")  # what polygemm.dask.gemm checks when it builds its graph
    finally:
        sys.modules.pop("pg_capitals_plugin", None)


def test_plugin_names_equal_up_to_case_clash_as_equal_names_do(tmp_path, monkeypatch, fresh_registry, rng):
    # names equal up to case are one name: a plugin "CPU" is not registered beside the built-in cpu
    # (get_backend("CPU") and device="CPU" both mean the built-in), and of two plugins "MyDev" and "mydev" one is kept
    install_fake_plugins(tmp_path, monkeypatch, fresh_registry,
                         ("pg_shout", "pg_shout_plugin", DOUBLE_PLUGIN, {"CPU": "pg_shout_plugin:DoubleBackend"}),
                         ("pg_first", "pg_first_plugin", DOUBLE_PLUGIN, {"MyDev": "pg_first_plugin:DoubleBackend"}),
                         ("pg_second", "pg_second_plugin", DOUBLE_PLUGIN, {"mydev": "pg_second_plugin:DoubleBackend"}))
    try:
        infos = {i.name: i for i in pg.backends()}
        assert "CPU" not in infos and "clashes with the built-in 'cpu'" in infos["CPU@pg-shout"].reason
        assert pg.get_backend("CPU") is infos["cpu"].backend
        kept = [n for n in infos if n.lower() == "mydev"]
        assert len(kept) == 1
        parked = [i for n, i in infos.items() if n.lower().startswith("mydev@")]
        assert len(parked) == 1 and "already taken" in parked[0].reason and not parked[0].available
        a, b = _operands_2(rng)
        pg.gemm(a, b, device="MYDEV")
        assert pg.last_plan().backend == kept[0]
    finally:
        for mod in ("pg_shout_plugin", "pg_first_plugin", "pg_second_plugin"):
            sys.modules.pop(mod, None)


def test_a_plugin_named_auto_or_like_a_device_index_is_not_loaded(tmp_path, monkeypatch, fresh_registry):
    # device="auto" can never mean an entry point named "auto", and "dev:2" would read as device 2 of "dev": neither
    # is loaded
    install_fake_distribution(tmp_path, "pg_names", "pg_names_plugin", DOUBLE_PLUGIN,
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


def test_auto_refuses_a_dtype_its_devices_backend_lacks_as_a_dtype_error(monkeypatch):
    # float64 CUDA arrays with device='auto': the device is there, only the dtype is refused, so it is a
    # DTypeError naming the dtypes it takes (as device='cuda' gives), not a BackendUnavailableError
    import dataclasses

    import polygemm.registry as registry
    from polygemm.backend import Availability, Backend
    from polygemm.problem import normalize

    class FakeDevice(Backend):
        name = "fakedev"
        residencies = ("fakedev",)

        def probe(self) -> Availability:
            return Availability(True)

        def variants(self):  # type: ignore[no-untyped-def]
            return [pg.Variant("k", ("float32",), "a kernel")]

        def plan(self, problem, variant="auto"):  # type: ignore[no-untyped-def]
            raise AssertionError("not planned")

        def run(self, plan):  # type: ignore[no-untyped-def]
            raise AssertionError("not run")

    info = registry.BackendInfo("fakedev", True, "", 50, "test", FakeDevice())
    monkeypatch.setattr(registry.discover, "backends", lambda wait=None: [info])
    problem = normalize(OnPluginDevice((4, 3), "<f8"), OnPluginDevice((3, 5), "<f8"))
    with pytest.raises(pg.DTypeError, match=r"no available backend computes float64 on fakedev data; it takes float32"):
        registry.select(problem, "auto")
    # data on a device no available backend takes: that is still an unavailable backend
    with pytest.raises(pg.BackendUnavailableError):
        registry.select(dataclasses.replace(problem, residency="elsewhere"), "auto")


class _Minimal(Backend):
    """A plugin that writes only what Backend requires: the defaults fill in the rest."""

    name = "minimal"
    priority = 120

    def probe(self):
        return Availability(True)

    def variants(self):
        return (Variant("v16", ("float16",), "half"), Variant("v32", ("float32", "float64"), "single and double"))

    def plan(self, problem, variant="auto"):
        raise AssertionError("not planned here")

    def run(self, plan):
        raise AssertionError("not run here")


def test_a_minimal_plugins_default_capabilities_come_from_its_variant_table():
    caps = _Minimal().capabilities()
    assert caps.backend == "minimal" and caps.residencies == ("host",)
    assert caps.dtypes == ("float16", "float32", "float64")  # each once, sorted
    assert [v.name for v in caps.variants] == ["v16", "v32"]
    assert isinstance(caps.device_name, str)


def test_a_backend_reads_as_its_name_and_priority():
    assert repr(_Minimal()) == "<polygemm backend 'minimal' priority=120>"


def test_availability_is_true_only_when_ok():
    assert Availability(True) and not Availability(False, "no device")


@pytest.mark.parametrize("name", ["variantsraise", "dtypesstring", "residenciesstring", "precisionunknown", "twicenamed"])
def test_the_pytest_runner_fails_a_plugin_unavailable_for_a_fault_of_its_own(third_party, name):
    """POLYGEMM_TEST_BACKEND=<plugin> pytest --pyargs polygemm.testing skips a backend its machine cannot run, and fails
    one whose own code made it unavailable (polygemm.registry.checks.contract_fault tells them apart)."""
    from polygemm.registry.checks import contract_fault

    info = {i.name: i for i in pg.backends()}[name]
    assert not info.available
    assert contract_fault(pg.get_backend(name), info.reason)
    cuda = {i.name: i for i in pg.backends()}["cuda"]
    if not cuda.available:  # no GPU here: its probe said no, the machine's fault, not its code's
        assert contract_fault(pg.get_backend("cuda"), cuda.reason) is None


def test_a_plugins_new_result_is_the_callers_own_plain_c_ordered_array(rng, third_party):
    a, b = _operands(rng)
    c = rng.standard_normal((3, 2)).astype(np.float32)
    got = pg.gemm(a, b, c, alpha=0.0, beta=1.0, device="viewofc")
    assert not np.shares_memory(got, c) and got.flags.writeable
    got[...] = 0.0  # the caller's own: writing it leaves c as it was
    assert c.any()
    got = pg.gemm(a, b, device="fortranresult")
    assert got.flags.c_contiguous and type(got) is np.ndarray
    assert_within(got, a, b)


def test_a_plugins_floating_point_warnings_never_reach_the_caller(rng, third_party):
    a = np.full((3, 4), np.inf, np.float32)
    b = np.zeros((4, 2), np.float32)
    with np.errstate(all="raise"):
        got = pg.gemm(a, b, device="noisy")
    assert np.isnan(got).all()  # inf * 0: NaN, as IEEE (and numpy.matmul) give it


@pytest.mark.parametrize("name, variant", [("colonname", "split:k=4"), ("autoname", "auto")])
def test_a_variant_name_callers_cannot_select_is_refused_by_the_table_check(rng, third_party, name, variant):
    a, b = _operands(rng)
    with pytest.raises(pg.BackendUnavailableError, match=f"variant '{variant}' is a name callers cannot select"):
        pg.gemm(a, b, device=name)


class _DeclaresFloat32ButWritesFloat16(_Buggy):
    def variants(self):
        return (Variant("v", ("float16",), "float16 products, float32 results declared", out_dtypes=("float32",)),)

    def run(self, plan):  # the declared float32 result never written: float16 comes back
        p = plan.problem
        with np.errstate(all="ignore"):
            res = p.alpha * (p.a.array.astype(np.float64) @ p.b.array.astype(np.float64))
            if p.c is not None and p.beta != 0.0:
                res = res + p.beta * p.c.array.astype(np.float64)
        return store_result(res.astype(np.float16), None if p.out is None else p.out.array)


def test_the_conformance_suite_fails_a_variant_that_does_not_write_the_result_dtype_it_declares():
    rows = run_conformance(_DeclaresFloat32ButWritesFloat16(), dtypes=["float16"])
    fails = [r for r in rows if r.status == "fail"]
    assert [r.case for r in fails] == ["out_dtype"] and "declares float32 results" in fails[0].detail


def test_a_plugins_own_execute_is_named_when_it_fails(rng, third_party):
    a, b = _operands(rng)
    with pytest.raises(DeviceError, match=r"^backend 'execoverride' .*failed in execute\(\) on 3x2x4"):
        pg.gemm(a, b, device="execoverride")
