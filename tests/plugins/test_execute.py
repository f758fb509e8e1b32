"""``Backend.execute(plan, Call(...))``: operands checked against the plan's."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

import polygemm as pg
from polygemm.backend import check_call
from polygemm.errors import ArgumentError
from polygemm.problem import Call, normalize


class _Dev:
    """Device memory described by a CUDA array interface (nothing reads it)."""

    def __init__(self, ptr, shape, strides=None, typestr="<f2"):
        self.shape = shape
        self.__cuda_array_interface__ = {"shape": shape, "strides": strides, "typestr": typestr, "data": (ptr, False), "version": 3}


def _call(a, b):
    return Call(a, b, None, None, a.__cuda_array_interface__["data"][0], b.__cuda_array_interface__["data"][0], 0, 0, 1.0, 0.0, None)


def _rand(rng: np.random.Generator, dtype: np.dtype, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def test_device_operands_are_compared_with_the_plans():
    base = 1 << 24
    a, b = _Dev(base, (64, 32)), _Dev(base + 65536, (32, 48))
    plan = pg.Plan("cuda", "x", "test", normalize(a, b))
    check_call(plan, _call(a, b))  # the plan's own operands pass
    cases = [
        (_Dev(base, (64, 32), typestr="<f4"), b, r"a is float32, but the plan was made for .*float16"),
        (a, _Dev(base + 65536, (32, 48), (2, 64)), r"b is col-major with ld=32, but the plan was made for .*row-major \(ld=48\)"),
        (a, _Dev(base + 65536, (32, 48), (112, 2)), r"b is row-major with ld=56"),
        (_Dev(base + 2, (64, 32)), b, r"a is not 16-byte aligned as the plan's was"),
    ]
    for x, y, match in cases:
        with pytest.raises(ArgumentError, match=match):
            check_call(plan, _call(x, y))
    wrong_ptr = Call(a, b, None, None, base + 4096, base + 65536, 0, 0, 1.0, 0.0, None)
    with pytest.raises(ArgumentError, match=r"a is at 0x1000000 but the call passes a_ptr=0x1001000"):
        check_call(plan, wrong_ptr)


def test_device_batch_strides_are_compared_with_the_plans():
    base = 1 << 24
    a, b = _Dev(base, (3, 16, 16)), _Dev(base + 65536, (16, 16))
    plan = pg.Plan("cuda", "x", "test", normalize(a, b))
    check_call(plan, _call(a, b))
    spread = _Dev(base, (3, 16, 16), (1024, 32, 2))  # matrices 512 elements apart, not 256
    with pytest.raises(ArgumentError, match="a has batch strides"):
        check_call(plan, _call(spread, b))


def test_host_batch_strides_are_compared_with_the_plans():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 8, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    cpu = pg.get_backend("cpu")
    plan = cpu.plan(normalize(a, b))
    shared = np.broadcast_to(a[:1], (3, 8, 4))  # the same shape, every matrix the first
    with pytest.raises(ArgumentError, match="a has batch strides"):
        cpu.execute(plan, Call(shared, b, None, None, 0, 0, 0, 0, 1.0, 0.0, None))


def test_bench_output_through_a_symlink_keeps_the_link(tmp_path):
    """bench's whole-or-nothing writer replaced a symlinked --json with a regular file (the
    link's target kept the last run); it writes through the link, and a new file gets the
    process umask's mode."""
    import os

    from polygemm.apps.outputs import write_file

    target = tmp_path / "results" / "r.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "r.json"
    link.symlink_to(target)
    write_file(str(link), lambda fh: fh.write("new"))
    assert link.is_symlink() and target.read_text() == "new"
    fresh = tmp_path / "fresh.json"
    write_file(str(fresh), lambda fh: fh.write("x"))
    mask = os.umask(0o022)
    os.umask(mask)
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~mask


def test_a_cpu_dlpack_operand_is_compared_by_what_it_holds_not_where():
    """A CPU DLPack array (torch CPU, JAX) in a Call is read through NumPy: another buffer of the
    plan's shape, dtype and layout passes, whatever its address's alignment."""
    class DLPackOnly:
        def __init__(self, arr):
            self._a = arr

        def __dlpack__(self, stream=None, **kw):
            return self._a.__dlpack__()

        def __dlpack_device__(self):
            return self._a.__dlpack_device__()

    rng = np.random.default_rng(1)
    a = rng.standard_normal((8, 4)).astype(np.float32)
    b = rng.standard_normal((4, 3)).astype(np.float32)
    cpu = pg.get_backend("cpu")
    plan = cpu.plan(normalize(a, b))
    raw = np.empty(8 * 4 + 1, np.float32)[1:].reshape(8, 4)  # 4 bytes off the plan's array's alignment
    raw[...] = a
    check_call(plan, Call(DLPackOnly(raw), b, None, None, 0, 0, 0, 0, 1.0, 0.0, None))  # no alignment class on the host
    with pytest.raises(ArgumentError, match="a is float64"):
        check_call(plan, Call(DLPackOnly(raw.astype(np.float64)), b, None, None, 0, 0, 0, 0, 1.0, 0.0, None))


def test_plans_hold_no_data_and_are_the_callers_own(rng):
    a, b = _rand(rng, np.float32, 4, 3), _rand(rng, np.float32, 3, 5)
    pg.gemm(a, b)
    lp = pg.last_plan()
    assert {f.name for f in fields(lp)} >= {"backend", "variant", "reason", "problem", "device", "layouts", "copies",
                                            "padding", "launch", "candidates", "notes", "cached"}
    assert all(op.array is None for op in lp.problem.operands())
    lp.copies.append("mine"), lp.layouts.clear()
    again = pg.last_plan()
    assert "mine" not in again.copies and again.layouts
    with pytest.raises(ArgumentError, match="holds no operands"):
        pg.get_backend("cpu").execute(lp, pg.problem.Call.from_problem(lp.problem))
