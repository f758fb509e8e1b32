"""verify= through the core for plugins: a plugin that keeps the contract passes; one that computes a
wrong product (alpha and beta forgotten) is caught, named."""

from __future__ import annotations

import contextlib
import sys

import numpy as np
import pytest

import polygemm as pg


def test_a_correct_plugin_passes_and_a_wrong_one_is_caught(doc_plugin, rng):
    a = rng.standard_normal((12, 9)).astype(np.float32)
    b = rng.standard_normal((9, 7)).astype(np.float32)
    got = pg.gemm(a, b, alpha=2.0, device="mydev", verify="raise")
    pg.testing.assert_close(got, a, b, None, 2.0)
    pg.gemm(a, b, device="fast", verify="raise")  # alpha 1 and no c: what it computes is right
    with pytest.raises(pg.VerificationError) as exc:
        pg.gemm(a, b, alpha=2.0, device="fast", verify="raise")
    assert "'fast'" in str(exc.value) and exc.value.report.failed == 12


def test_the_musa_backend_is_checked_on_the_host(musa, rng):
    a = rng.standard_normal((40, 24)).astype(np.float16)
    b = rng.standard_normal((24, 32)).astype(np.float16)
    got = pg.gemm(a, b, device="musa", verify="raise")
    assert got.shape == (40, 32)
    with pg.testing.inject_fault(5, 6, value=500.0):
        with pytest.raises(pg.VerificationError, match="'musa'"):
            pg.gemm(a, b, device="musa", verify="raise")


def test_musa_arrays_are_checked_on_the_host_and_take_injected_faults(musa, rng):
    """MusaArray operands and results (the musa backend's own device arrays) are copied back for the host's check, and
    a fault injected into a MusaArray result is caught; a failed check leaves out as it was."""
    from polygemm.backends.musa import MusaArray

    a = rng.standard_normal((40, 24)).astype(np.float16)
    b = rng.standard_normal((24, 32)).astype(np.float16)
    da, db = MusaArray.from_numpy(a), MusaArray.from_numpy(b)
    got = pg.gemm(da, db, verify="raise")
    np.testing.assert_allclose(got.get(), (a.astype(np.float64) @ b).astype(np.float16), rtol=2e-2, atol=2e-2)
    out = MusaArray.from_numpy(np.full((40, 32), 7.0, np.float16))
    for fault in ({"value": 500.0}, {"bit": 14}):
        with pg.testing.inject_fault(5, 6, **fault):
            with pytest.raises(pg.VerificationError, match=r"'musa'.*row.*5"):
                pg.gemm(da, db, out=out, verify="raise")
        assert (out.get() == 7.0).all()
    with pg.testing.inject_fault(5, 6, value=500.0, times=1):
        retried = pg.gemm(da, db, verify="retry")
    np.testing.assert_allclose(retried.get(), got.get())


def test_a_failed_retry_names_its_first_failing_row_as_the_first(rng):
    a, b = np.ones((6, 3), np.float32), np.ones((3, 2), np.float32)
    with pg.testing.inject_fault(1, 1, value=3.5), pg.testing.inject_fault(4, 0, value=1e6):
        with pytest.raises(pg.VerificationError, match=r"first attempt: .*2 rows off, the first row 1 ") as exc:
            pg.gemm(a, b, verify="retry")
    assert "worst" not in str(exc.value).split("first attempt")[1].split(";")[0]


_DEVICE_PLUGIN = '''
import numpy as np
from polygemm.backend import Availability, Backend, Plan, Variant, host_layouts


class Holder:
    """An array of the plugin's device, by __polygemm_array_interface__: host memory in disguise, no item assignment."""

    def __init__(self, host):
        self.host = host

    @property
    def __polygemm_array_interface__(self):
        h = self.host
        return {"shape": h.shape, "typestr": h.dtype.str, "strides": None, "data": (h.ctypes.data, False), "version": 3,
                "device": "holderdev"}


class HolderBackend(Backend):
    priority = 300
    residencies = ("host", "holderdev")

    def probe(self):
        return Availability(True)

    def variants(self):
        return (Variant("v", ("float32",), "float64 matmul"),)

    def plan(self, problem, variant="auto"):
        v = self.get_variant("v" if variant == "auto" else variant)
        self.check_problem(problem, v)
        return Plan(self.name, v.name, "the only variant", problem, layouts=host_layouts(problem))

    def run(self, plan):
        p = plan.problem
        r = p.alpha * (p.a.array.host.astype(np.float64) @ p.b.array.host)
        if p.beta:
            r = r + p.beta * p.c.array.host
        if p.out is not None:
            p.out.array.host[...] = r
            return p.out.array
        return Holder(r.astype(np.float32))

    def to_device(self, array):
        return Holder(np.array(array))

    def to_host(self, array):
        return np.array(array.host)

    def copy_result(self, result, out):
        out.host[...] = result.host
        return True
'''


def test_a_plugins_device_out_is_written_through_its_copy_result(tmp_path, monkeypatch, fresh_registry, rng):
    """A checked call with a device out of a plugin's arrays (no item assignment) reaches out through the backend's
    copy_result, as plugins.md says; out=c too. Its arrays have no .shape: the core reads a result's shape from its
    __polygemm_array_interface__."""
    with _device_plugin("holder", _DEVICE_PLUGIN, tmp_path, monkeypatch, fresh_registry) as be:
        a, b = _operands(rng)
        c = rng.standard_normal((6, 5)).astype(np.float32)
        got = pg.gemm(be.to_device(a), be.to_device(b), device="holder")
        pg.testing.assert_close(be.to_host(got), a, b)
        out = be.to_device(np.full((6, 5), np.nan, np.float32))
        assert pg.gemm(be.to_device(a), be.to_device(b), out=out, verify="raise") is out
        pg.testing.assert_close(be.to_host(out), a, b)
        dc = be.to_device(c)
        assert pg.gemm(be.to_device(a), be.to_device(b), dc, beta=0.5, out=dc, verify="raise") is dc
        pg.testing.assert_close(be.to_host(dc), a, b, c, 1.0, 0.5)


def test_a_plugins_device_result_takes_an_injected_fault_and_an_out_it_cannot_write_is_told(tmp_path, monkeypatch,
                                                                                            fresh_registry, rng):
    """A plugin's device arrays with neither .set() nor item assignment: an injected fault reaches the check through
    the backend's to_device (a result of the corrupted values), and a checked call with such an out, of a backend with
    no copy_result, is told what to do instead, out untouched."""
    from polygemm.testing import inject_fault

    source = _DEVICE_PLUGIN.replace("    def copy_result(self, result, out):\n        out.host[...] = result.host\n"
                                    "        return True\n", "")
    assert "copy_result" not in source
    with _device_plugin("bare", source, tmp_path, monkeypatch, fresh_registry) as be:
        a, b = _operands(rng)
        da, db = be.to_device(a), be.to_device(b)
        with inject_fault(2, 3, value=1e4), pytest.raises(pg.VerificationError, match="rows 2"):
            pg.gemm(da, db, device="bare", verify="raise")
        with inject_fault(2, 3, value=1e4), pytest.warns(pg.VerificationWarning):
            got = pg.gemm(da, db, device="bare", verify="warn")
        assert be.to_host(got)[2, 3] == 1e4  # the corrupted result handed back, as "warn" does
        out = be.to_device(np.full((6, 5), 7.0, np.float32))
        with pytest.raises(pg.ArgumentTypeError, match=r"out is a Holder.*'bare'.*copy_result.*omit out"):
            pg.gemm(da, db, out=out, device="bare", verify="raise")
        assert (be.to_host(out) == 7.0).all()


@contextlib.contextmanager
def _device_plugin(name, source, tmp_path, monkeypatch, fresh_registry):
    """The backend ``name`` of a plugin module made of ``source`` (its HolderBackend), installed for the test."""
    from tests.plugin_sources import install_fake_plugins

    module = f"polygemm_{name}"
    install_fake_plugins(tmp_path, monkeypatch, fresh_registry, (module, module, source, {name: f"{module}:HolderBackend"}))
    try:
        yield pg.get_backend(name)
    finally:
        sys.modules.pop(module, None)


def _operands(rng):
    return rng.standard_normal((6, 4)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
