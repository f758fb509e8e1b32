"""A demanding user's edges, fourteenth round (CPU): ``polygemm.dask.gemm`` with objects that are no
dask array, the device objects ``polygemm.gemm`` takes and operands of the other byte order; a
plugin written the way a third party would, whose ``plan()``, ``run()`` or variant table breaks the
contract (the caller must get an error naming the plugin, and never a wrong result or a corrupted
``out``); the command line's ``--json -``; and the musa backend's host flavor beside numpy.matmul.
The tests marked "defect" failed before the fix they name."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest

import polygemm as pg
from polygemm.apps.cli import main
from polygemm.errors import ArgumentTypeError, DeviceError, DTypeError, UnsupportedProblemError
from polygemm.testing import reference_for, run_conformance
from test_device_objects import torch_device
from plugin_sources import THIRD_PARTY_BASE, install_fake_plugins

try:
    import dask.array as da
except ImportError:  # the other tests of this file run without dask
    da = None
import polygemm.dask as pgd  # noqa: E402  (imports no dask)

needs_dask = pytest.mark.skipif(da is None, reason="dask[array] not installed (pip install 'polygemm[dask]')")


def assert_within(got, a, b, c=None, alpha=1.0, beta=0.0, out_dtype=None):
    """``got`` element-wise within the bound of the float64 reference (shape and dtype too)."""
    res = reference_for(a, b, c, alpha, beta, out_dtype=out_dtype).compare(got)
    assert res.ok, res.message


# -- polygemm.dask.gemm -----------------------------------------------------------------------------------------------

@needs_dask
@pytest.mark.parametrize("given", [None, [[1.0, 2.0]], np.ones((2, 2)), "A"])
def test_dask_operand_that_is_no_dask_array_is_a_type_error(given):
    # defect: "A must be a dask array; got numpy.ndarray" was a ValueError only (ArgumentError), where
    # polygemm.gemm's a=None is a TypeError too (ArgumentTypeError): "except TypeError" missed it (polygemm/dask.py)
    B = da.ones((2, 3), chunks=1)
    with pytest.raises(TypeError) as info:
        pgd.gemm(given, B)
    assert isinstance(info.value, ArgumentTypeError) and isinstance(info.value, ValueError)  # still an ArgumentError
    assert str(info.value).startswith("A must be a dask array") and "dask.array.from_array(A" in str(info.value)
    with pytest.raises(ArgumentTypeError, match="^B must be a dask array"):
        pgd.gemm(da.ones((3, 2), chunks=1), given)


@needs_dask
def test_dask_takes_the_device_objects_polygemm_gemm_takes(rng):
    # defect: device=torch.device("cpu") (tensor.device) computed with polygemm.gemm but was refused by
    # polygemm.dask.gemm ("device must be a string"); now it is passed to the tasks by its name (polygemm/dask.py)
    a, b = rng.standard_normal((9, 6)), rng.standard_normal((6, 5))
    A, B = da.from_array(a, chunks=(4, 3)), da.from_array(b, chunks=(3, 2))
    R = pgd.gemm(A, B, device=torch_device("cpu"))
    assert R.name == pgd.gemm(A, B, device="cpu").name  # the same graph as the name gives
    assert_within(R.compute(), a, b)
    pgd.gemm(A, B, device=torch_device("cuda", 1))  # known backend: built lazily, whether it runs is the workers' to say
    with pytest.raises(TypeError, match=r"device must be a backend name .*torch\.device"):
        pgd.gemm(A, B, device=3)
    with pytest.raises(pg.BackendUnavailableError, match="unknown device 'jax'"):
        pgd.gemm(A, B, device=torch_device("jax"))


@needs_dask
def test_dask_operands_of_the_other_byte_order_are_the_same_dtype(rng):
    # defect: A '>f8' beside B '<f8' was "A and B must share one dtype; got A float64 and B float64", a '>f8'
    # c beside native operands "c's dtype=... non-native byte order", and two '>f8' operands made a graph whose
    # dtype '>f8' was not that of its blocks; polygemm.gemm takes each and writes native float64 (polygemm/dask.py)
    a, b, c = rng.standard_normal((7, 5)), rng.standard_normal((5, 4)), rng.standard_normal((7, 4))
    other = ">" if np.little_endian else "<"
    sa, sb, sc = (x.astype(x.dtype.newbyteorder(other)) for x in (a, b, c))
    for A, B in [(sa, b), (a, sb), (sa, sb)]:
        R = pgd.gemm(da.from_array(A, chunks=3), da.from_array(B, chunks=3), sc, alpha=2.0, beta=-1.0, device="cpu")
        assert R.dtype == np.dtype(np.float64) and R.dtype.isnative
        r = R.compute()
        assert r.dtype == R.dtype == pg.gemm(A, B, sc, alpha=2.0, beta=-1.0).dtype
        assert_within(r, a, b, c, 2.0, -1.0)
    with pytest.raises(DTypeError, match="share one dtype; got A float64 and B float32"):  # a real difference still is one
        pgd.gemm(da.from_array(sa, chunks=3), da.from_array(b.astype(np.float32), chunks=3))


@needs_dask
def test_dask_many_k_chunks_single_chunks_and_lazy_errors(rng):
    """Right: K in 40 chunks of 1..2 columns (40 calls folded in one task) stays within one call's bound;
    one chunk everywhere is one task; errors about arguments come at graph build, those of the device at
    compute()."""
    a, b = rng.standard_normal((6, 60)).astype(np.float32), rng.standard_normal((60, 5)).astype(np.float32)
    k_chunks = (1, 2) * 20
    R = pgd.gemm(da.from_array(a, chunks=((3, 3), k_chunks)), da.from_array(b, chunks=(k_chunks, (5,))), device="cpu")
    assert R.chunks == ((3, 3), (5,)) and R.dtype == np.float32
    assert_within(R.compute(), a, b)
    one = pgd.gemm(da.from_array(a, chunks=-1), da.from_array(b, chunks=-1), device="cpu")
    assert one.numblocks == (1, 1) and len([k for k in dict(one.__dask_graph__()) if k[0] == one.name]) == 1
    assert_within(one.compute(), a, b)
    with pytest.raises(UnsupportedProblemError, match="variant='nope' is not a variant of backend 'cpu'"):
        pgd.gemm(da.from_array(a, chunks=3), da.from_array(b, chunks=3), device="cpu", variant="nope")
    lazy = pgd.gemm(da.from_array(a, chunks=3), da.from_array(b, chunks=3), device="musa")  # built: musa is known
    with pytest.raises(pg.PolygemmError):  # float32 on musa (or musa unavailable): said by compute()
        lazy.compute()


# -- a third party's plugin -------------------------------------------------------------------------------------------

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

class DtypesString(Good):
    def variants(self):
        return (Variant("v", "float32", "float32 matmul"),)

class TwiceNamed(Good):
    def variants(self):
        return (Variant("v", ("float32",), "one"), Variant("v", ("float64",), "two"))
"""

CLASSES = ["Good", "PlanGarbage", "PlanRaises", "PlanOtherName", "PlanRefuses", "WrongShape", "WrongDtype", "ReturnsNone",
           "OutNotWritten", "HalfWritesThenRaises", "DtypesString", "TwiceNamed"]


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


def test_a_good_third_party_plugin_computes_and_keeps_its_own_refusals(rng, third_party):
    """Right: a plugin that keeps the contract computes, with and without out (out returned and
    written), and a refusal of its own (a polygemm error) reaches the caller as it raised it."""
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
    # defect: plan() returning a dict was "AttributeError: 'dict' object has no attribute 'candidates'", a KeyError
    # in plan() reached the caller bare, naming no backend, and a plan saying backend 'cpu' ran and was reported by
    # last_plan() and explain() as cpu's (polygemm/api.py _plugin_plan)
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
    # defect: gemm returned the plugin's (4, 2) array, its float64 array or None as the result of a (3, 2) float32
    # product, and with out= returned out unwritten (polygemm/api.py _plugin_execute)
    a, b = _operands(rng)
    with pytest.raises(DeviceError, match=f"^backend '{name}' .*{says}"):
        pg.gemm(a, b, device=name)
    out = np.full((3, 2), 7.0, np.float32)
    with pytest.raises(DeviceError, match=says + ".*out was left as it was"):
        pg.gemm(a, b, device=name, out=out)
    assert (out == 7.0).all()


def test_a_plugin_that_returns_a_new_array_instead_of_writing_out_is_an_error(rng, third_party):
    # defect: gemm(..., out=out) returned out with its old values as the product, no error (polygemm/api.py)
    a, b = _operands(rng)
    assert_within(pg.gemm(a, b, device="outnotwritten"), a, b)  # without out it is right
    out = np.full((3, 2), 7.0, np.float32)
    with pytest.raises(DeviceError, match=r"run\(\) returned a new array instead of writing out"):
        pg.gemm(a, b, device="outnotwritten", out=out)
    assert (out == 7.0).all()


def test_a_plugin_that_fails_half_way_leaves_out_and_c_as_they_were(rng, third_party):
    # defect: a plugin that wrote a row of out and then raised left that row in out (and in c, updated in place),
    # and its RuntimeError named no backend (polygemm/api.py _plugin_execute)
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
])
def test_a_variant_table_with_fields_of_another_kind_makes_the_plugin_unavailable(rng, third_party, name, says):
    # defect: dtypes="float32" was read as the dtypes 'f', 'l', 'o', ... ("does not support dtype float32; it supports
    # 2, 3, a, f, l, o, t"), and a second variant of one name was silently unreachable (polygemm/registry.py)
    info = {i.name: i for i in pg.backends()}[name]
    assert not info.available and __import__("re").search(says, info.reason), info.reason
    a, b = _operands(rng)
    with pytest.raises(pg.BackendUnavailableError, match=says):
        pg.gemm(a, b, device=name)
    assert_within(pg.gemm(a, b, device="good"), a, b)  # the others are untouched


def test_the_conformance_suite_fails_a_plugin_that_ignores_out(third_party):
    """Right: the suite still reports such a plugin failing (now through the error), never passing."""
    rows = run_conformance("outnotwritten", groups="shapes", quick=True)
    assert rows and any(r.status == "fail" for r in rows)
    assert all(r.status == "pass" for r in run_conformance("good", groups="shapes", quick=True))


# -- the command line -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--no-progress", "--json", "-"],
    ["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--no-progress", "--markdown", "-"],
    ["matrix", "--backends", "cpu", "--quick", "--json", "-"],
])
def test_an_output_of_dash_is_a_usage_error_not_a_file_named_dash(tmp_path, monkeypatch, capsys, argv):
    # defect: "--json -" (standard output to other tools) wrote a file named "-" in the current folder and said
    # "wrote -", exit 0, while stdout had only the human-readable lines (polygemm/apps/cli.py unwritable)
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    option = argv[argv.index("-") - 1]
    assert f"polygemm: error: {option} -: polygemm writes {option} to a file, not to standard output" in err
    assert not os.path.exists(tmp_path / "-")
    if argv[0] == "bench":  # a file named '-' when asked for so
        assert main([*argv[:-1], "./-"]) == 0 and (tmp_path / "-").exists()


def test_bench_json_of_the_cpu_is_strict_json_and_exit_zero(tmp_path, capsys):
    """Right: bench --device cpu --json writes strict JSON whose records say what ran."""
    path = tmp_path / "r.json"
    assert main(["bench", "--device", "cpu", "--shapes", "16x8x4", "--repeats", "1", "--no-progress", "--json", str(path)]) == 0
    data = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    (rec,) = data["records"]
    assert (rec["m"], rec["n"], rec["k"], rec["dtype"]) == (16, 8, 4, "float32") and rec["ms"] > 0 and rec["backend"] == "cpu"


# -- operands that are text -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["1 2; 3 4", b"\x00\x00", bytearray(b"ab")])
def test_text_as_an_operand_is_a_type_error_naming_it_not_advice_to_reshape(text):
    # defect: gemm("1 2; 3 4", b) was "a must be a matrix ...; got 0-D with shape (). Reshape it, e.g. a.reshape(rows,
    # cols)", a ValueError, and matmul's "a is a scalar (0-D str) ... scale with a * b instead"; numpy.matmul raises a
    # TypeError for text (polygemm/problem.py _host_operand, polygemm/api.py matmul)
    m = np.ones((2, 2))
    out = np.full((2, 2), 7.0)
    for call, name in [(lambda: pg.gemm(text, m, out=out), "a"), (lambda: pg.gemm(m, text, out=out), "b"),
                       (lambda: pg.gemm(m, m, text, beta=1.0, out=out), "c"), (lambda: pg.matmul(text, m), "a"),
                       (lambda: pg.matmul(m, text, out=out), "b")]:
        with pytest.raises(TypeError) as info:
            call()
        assert isinstance(info.value, ArgumentTypeError)
        assert str(info.value).startswith(f"{name} must be a ") and type(text).__name__ in str(info.value)
        assert "reshape" not in str(info.value) and "scalar" not in str(info.value)
    assert (out == 7.0).all()
    with pytest.raises(TypeError):  # as numpy.matmul does
        np.matmul(np.asarray("1 2; 3 4"), m)


# -- the musa backend's host flavor -----------------------------------------------------------------------------------

def test_musa_host_flavor_beside_numpy_matmul(rng):
    """Right: the host flavor (POLYGEMM_MUSA_EMULATION=1) gives numpy.matmul's shapes and float16 for
    transposed and strided views, vectors, K = 0 with c, in place; and refuses what it cannot do naming it."""
    import subprocess
    import sys

    from test_musa import ROOT

    lib = next((ROOT / "build").glob("musa-host/**/libpolygemm_musa.so"), None)
    if lib is None:
        pytest.skip("libpolygemm_musa's host flavor is not built here (tests/test_musa.py builds it)")
    code = """
import numpy as np, polygemm as pg
from polygemm.testing import reference_for
rng = np.random.default_rng(5)
a = rng.standard_normal((5, 7)).astype(np.float16); b = rng.standard_normal((7, 3)).astype(np.float16)
def ok(got, a, b, c=None, beta=0.0):
    res = reference_for(a, b, c, 1.0, beta).compare(got); assert res.ok, res.message
r = pg.gemm(b.T, a.T, device="musa"); assert r.shape == (3, 5) and r.dtype == np.float16; ok(r, b.T, a.T)
r = pg.gemm(a[:, ::2], b[::2], device="musa"); ok(r, a[:, ::2], b[::2])
v = pg.matmul(a, b[:, 0], device="musa"); assert v.shape == (5,) == np.matmul(a, b[:, 0]).shape
c = np.ones((5, 3), np.float16); r = pg.gemm(a[:, :0], b[:0], c, beta=2.0, device="musa"); assert (r == 2.0).all()
c = rng.standard_normal((5, 3)).astype(np.float16); c0 = c.copy()
assert pg.gemm(a, b, c, beta=1.0, out=c, device="musa") is c; ok(c, a, b, c0, 1.0)
out = np.full((5, 3), 7, np.float16)
for kw, err in [(dict(out_dtype=np.float32), "writes float16 results only"), (dict(alpha=1e39), "does not fit the float32")]:
    try:
        pg.gemm(a, b, device="musa", out=None if "out_dtype" in kw else out, **kw)
    except pg.PolygemmError as exc:
        assert err in str(exc), exc
    else:
        raise AssertionError(kw)
assert (out == 7).all()
print("ok")
"""
    env = dict(os.environ, POLYGEMM_MUSA_EMULATION="1", POLYGEMM_MUSA_LIBRARY=str(lib))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


# -- quiet: warnings from these tests ---------------------------------------------------------------------------------

def test_no_rechunk_warning_where_k_chunks_agree(rng):
    """Right: aligned K chunks, c chunked like the result: no DaskRechunkWarning at all."""
    if da is None:
        pytest.skip("dask[array] not installed")
    a, b, c = rng.standard_normal((6, 8)), rng.standard_normal((8, 4)), rng.standard_normal((6, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        R = pgd.gemm(da.from_array(a, chunks=(3, 4)), da.from_array(b, chunks=(4, 2)), da.from_array(c, chunks=(3, 2)),
                     beta=1.0, device="cpu")
    assert_within(R.compute(), a, b, c, 1.0, 1.0)
