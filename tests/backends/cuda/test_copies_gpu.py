"""The repitch copy (kernels/util/repitch.cu) on its own, marked ``cuda``: into aligned scratch from rows at every
2-byte phase, back out of it into rows at every phase, and between two unaligned sides; widths that end mid-chunk;
2- and 4-byte elements. Every element of the destination's lines is compared, and the gaps between them must be
left as they were."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import cuda_or_skip


@pytest.fixture(scope="module")
def rt():
    return cuda_or_skip().runtime


def _copy(rt, src_host: np.ndarray, src_off: int, src_pitch: int, dst_off: int, dst_pitch: int, width: int, lines: int):
    """Upload ``src_host`` (a flat array), copy ``lines`` x ``width`` from element ``src_off`` (pitch ``src_pitch``)
    to element ``dst_off`` (pitch ``dst_pitch``) of a destination filled with a marker, and return the destination."""
    itemsize = src_host.itemsize
    size = dst_off + lines * dst_pitch + 16
    marker = np.full(size, 7 if itemsize == 2 else 9, src_host.dtype)
    out = _on_device(rt, src_host, marker, lambda src, dst: rt.repitch(dst + dst_off * itemsize, dst_pitch, src + src_off * itemsize,
                                                                       src_pitch, width, lines, itemsize, 0))
    return out, marker


def _on_device(rt, src_host: np.ndarray, marker: np.ndarray, launch) -> np.ndarray:
    """Upload ``src_host`` and a destination holding ``marker``, run ``launch(src, dst)`` (device pointers), and
    return the destination."""
    import pycuda.driver as drv

    with rt.active():
        src, dst = drv.mem_alloc(src_host.nbytes), drv.mem_alloc(marker.nbytes)
        try:
            drv.memcpy_htod(src, src_host)
            drv.memcpy_htod(dst, marker)
            launch(int(src), int(dst))
            drv.Context.synchronize()
            out = np.empty_like(marker)
            drv.memcpy_dtoh(out, dst)
        finally:
            src.free()
            dst.free()
    return out


def _expect(src_host, src_off, src_pitch, dst_off, dst_pitch, width, lines, marker):
    want = marker.copy()
    for line in range(lines):
        want[dst_off + line * dst_pitch:dst_off + line * dst_pitch + width] = \
            src_host[src_off + line * src_pitch:src_off + line * src_pitch + width]
    return want


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [np.uint16, np.uint32])
@pytest.mark.parametrize("direction", ["into aligned", "out of aligned", "unaligned both"])
@pytest.mark.parametrize("phase", range(8))
def test_repitch_copies_every_element_at_every_phase(rt, dtype, direction, phase):
    rng = np.random.default_rng(phase)
    per = 16 // np.dtype(dtype).itemsize
    width, lines = 3 * per + 5, 37  # chunks and a partial chunk per line; lines that do not fill a block
    odd_pitch = width + 2 * phase + 1  # every row at another phase
    aligned_pitch = -(-width // per) * per + per
    if direction == "into aligned":
        src_off, src_pitch, dst_off, dst_pitch = phase, odd_pitch, 0, aligned_pitch
    elif direction == "out of aligned":
        src_off, src_pitch, dst_off, dst_pitch = 0, aligned_pitch, phase, odd_pitch
    else:
        src_off, src_pitch, dst_off, dst_pitch = phase, odd_pitch, (phase + 3) % 8, odd_pitch + 2
    src_host = rng.integers(0, np.iinfo(dtype).max, size=src_off + lines * src_pitch + 16, dtype=dtype)
    got, marker = _copy(rt, src_host, src_off, src_pitch, dst_off, dst_pitch, width, lines)
    np.testing.assert_array_equal(got, _expect(src_host, src_off, src_pitch, dst_off, dst_pitch, width, lines, marker))


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [np.uint16, np.uint32])
def test_repitch_pair_makes_both_copies_of_one_launch(rt, dtype):
    """A's and B's copies into aligned scratch in one launch: each copy whole, of its own geometry (the longer one
    sets the grid), and nothing written between the lines."""
    import pycuda.driver as drv

    rng = np.random.default_rng(dtype().itemsize)
    itemsize, per = np.dtype(dtype).itemsize, 16 // np.dtype(dtype).itemsize
    jobs = [(1, 3 * per + 5, 37), (3, 11 * per + 1, 300)]  # (source offset, width, lines): one short, one long
    sources, dests, plans = [], [], []
    with rt.active():
        try:
            for off, width, lines in jobs:
                src_pitch, dst_pitch = width + 3, -(-width // per) * per + per
                src_host = rng.integers(0, np.iinfo(dtype).max, size=off + lines * src_pitch + 16, dtype=dtype)
                marker = np.full(lines * dst_pitch + 16, 7, dtype)
                src, dst = drv.mem_alloc(src_host.nbytes), drv.mem_alloc(marker.nbytes)
                sources.append(src)
                dests.append(dst)
                drv.memcpy_htod(src, src_host)
                drv.memcpy_htod(dst, marker)
                plans.append((src_host, off, src_pitch, dst_pitch, width, lines, marker))
            first, second = ((int(dst), p[3], int(src) + p[1] * itemsize, p[2], p[4], p[5]) for src, dst, p in zip(sources, dests, plans))
            rt.repitch_pair(first, second, itemsize, 0)
            drv.Context.synchronize()
            for dst, (src_host, off, src_pitch, dst_pitch, width, lines, marker) in zip(dests, plans):
                got = np.empty_like(marker)
                drv.memcpy_dtoh(got, dst)
                np.testing.assert_array_equal(got, _expect(src_host, off, src_pitch, 0, dst_pitch, width, lines, marker))
        finally:
            for x in sources + dests:
                x.free()


@pytest.mark.cuda
@pytest.mark.parametrize("width,lines", [(1, 1), (33, 7), (64, 401), (1013, 997), (3, 70000)])
def test_transpose_moves_every_element_to_the_other_layout(rt, width, lines):
    """An 8-byte operand's lines become columns of a scratch of another pitch: every element where the other layout
    puts it (partial tiles, lines past one grid's rows), nothing written past a line's end."""
    rng = np.random.default_rng(width * lines)
    src_pitch, dst_pitch = width + 5, lines + 3
    src_host = rng.integers(0, np.iinfo(np.uint64).max, size=lines * src_pitch, dtype=np.uint64)
    marker = np.full(width * dst_pitch, 7, np.uint64)
    got = _on_device(rt, src_host, marker, lambda src, dst: rt.transpose(dst, dst_pitch, src, src_pitch, width, lines, 8, 0))
    got = got.reshape(width, dst_pitch)
    np.testing.assert_array_equal(got[:, :lines], src_host.reshape(lines, src_pitch)[:, :width].T)
    assert (got[:, lines:] == 7).all()
