"""Normalization: layouts from strides, leading dimensions, alignment, byte order, copies."""

from __future__ import annotations

import numpy as np
import pytest

from polygemm.problem import normalize


class _FakeDeviceArray:
    """A device array as the CUDA array interface describes it (never dereferenced here)."""

    def __init__(self, ptr: int, shape: tuple[int, int], typestr: str = "<f2") -> None:
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False), "strides": None, "version": 3}


def test_row_and_column_major_and_views():
    a = np.zeros((6, 4), np.float32)
    p = normalize(a, np.zeros((4, 3), np.float32, order="F"))
    assert (p.a.layout, p.a.ld) == ("row", 4)
    assert (p.b.layout, p.b.ld) == ("col", 4)
    p = normalize(a.T, np.zeros((6, 2), np.float32))
    assert (p.a.layout, p.a.ld) == ("col", 4) and not p.a.copied
    big = np.zeros((10, 8), np.float32)
    p = normalize(big[:6, :5], np.zeros((5, 2), np.float32))
    assert (p.a.layout, p.a.ld) == ("row", 8) and not p.a.copied


def test_strided_view_is_copied():
    big = np.zeros((6, 8), np.float32)
    p = normalize(big[:, ::2], np.zeros((4, 2), np.float32))
    assert p.a.copied and p.a.layout == "row" and p.a.ld == 4
    assert p.notes


def test_alignment_and_offsets():
    buf = np.zeros(1000, np.float32)
    a = buf[1:1 + 12].reshape(3, 4)
    p = normalize(a, np.zeros((4, 8), np.float32))
    assert not p.a.aligned16  # base pointer off by 4 bytes
    assert p.b.aligned16 or p.b.ptr % 16 != 0
    assert p.a.max_offset == 11


@pytest.mark.parametrize("shape", [(1, 5), (5, 1), (1, 1)])
def test_vectors_have_valid_ld(shape):
    x = np.zeros(shape, np.float32)
    p = normalize(x, np.zeros((shape[1], 2), np.float32))
    assert p.a.ld >= (p.a.cols if p.a.layout == "row" else p.a.rows)


def test_device_pointer_not_aligned_to_its_dtype_is_refused():
    from polygemm.errors import ArgumentError

    ok = _FakeDeviceArray(0x10000, (4, 4))
    with pytest.raises(ArgumentError, match=r"a is a cuda array whose data pointer 0x10001 is not a multiple"):
        normalize(_FakeDeviceArray(0x10001, (4, 4)), ok)
    with pytest.raises(ArgumentError, match=r"b is a cuda array .* element size \(4 bytes\)"):
        normalize(_FakeDeviceArray(0x10000, (4, 4), "<f4"), _FakeDeviceArray(0x10002, (4, 4), "<f4"))
