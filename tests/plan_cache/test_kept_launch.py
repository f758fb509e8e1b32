"""A launch's parameters kept packed per thread for its last call (on the CPU, through a driver whose launches are
recorded): the bytes launched are those the full prepare packs, for every call; a new pointer, scalar, stream
workspace or thread packs anew; a failed packing keeps nothing."""

from __future__ import annotations

import struct
import threading

import pytest

from tests.plan_cache.launch_fakes import FakeRuntime, fake_driver, fake_maps, launches  # noqa: F401


def _kernel_class():
    from polygemm.backends.cuda import driver as drv_mod

    class NaturalKernel(drv_mod.Kernel):
        """A loaded kernel whose parameters lie where the formats place them (naturally aligned; tensor maps at 64)."""

        def struct_for(self, codes):
            self.params, self.param_bytes = drv_mod.natural_params(codes)
            return super().struct_for(codes)

        def resident_blocks(self, threads, smem):
            return 64

        def resident_clusters(self, size, threads, smem):
            return 16

    return NaturalKernel


class _Runtime(FakeRuntime):
    """FakeRuntime whose kernels are the driver's own Kernel on a recording driver."""

    def __init__(self, drv):
        super().__init__()
        self.drv_ = drv
        self.released = []
        self.kernel_class = _kernel_class()

    def function(self, source, entry, macros):
        self.built += 1
        return self.kernel_class(self.drv_, entry, None, self.drv_.ffi.NULL, ())

    def release(self, ptr, stream):
        self.released.append((ptr, stream))


def test_a_kept_launch_packs_once_per_key_and_thread():
    from polygemm.backends.cuda import driver as drv_mod
    from polygemm.errors import DeviceError

    drv, launched, rc = fake_driver()
    k = drv_mod.Kernel(drv, "entry", None, drv.ffi.NULL, [(0, 8), (8, 4)])
    layout = k.struct_for(("Q", "f"))
    made = []

    def args_of(key):
        made.append(key)
        return key

    go = k.kept_launcher(layout, (4,), (128,), 0)
    go((1, 0.5), 0, args_of)
    go((1, 0.5), 7, args_of)  # the same key on another stream: packed once, launched on 7
    go((2, 0.5), 0, args_of)
    assert made == [(1, 0.5), (2, 0.5)]
    assert [(buf, stream) for _, buf, stream, *_ in launched] == [
        (layout.pack(1, 0.5), 0), (layout.pack(1, 0.5), 7), (layout.pack(2, 0.5), 0)]
    assert launched[0][3] == (4, 1, 1, 128, 1, 1, 0)

    def broken(key):
        raise ValueError("no maps")

    with pytest.raises(ValueError):
        go((3, 0.5), 0, broken)
    with pytest.raises(struct.error):  # packing fails half way: the buffer holds no key's bytes
        go((-1, 0.5), 0, args_of)
    go((2, 0.5), 0, args_of)  # the last good key packs again: the buffer was written since
    assert made[-1] == (2, 0.5) and launched[-1][1] == layout.pack(2, 0.5)
    rc["next"] = 700
    with pytest.raises(DeviceError, match="CUresult 700"):
        go((2, 0.5), 0, args_of)
    rc["next"] = 0

    seen = []

    def other():
        go((2, 0.5), 3, args_of)  # this thread's first launch: its own buffer, packed
        seen.append(launched[-1])

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert made[-1] == (2, 0.5) and len(made) == 5 and seen[0][1] == layout.pack(2, 0.5)
    assert seen[0][4] != launched[0][4]  # not this thread's buffer


def test_kept_launches_send_the_bytes_the_full_prepare_packs(fake_maps):  # noqa: F811
    """Every plain rung (swapped, batched, TMA, TMA store): a sequence of calls through queue() launches, call by
    call, what prepare() packs for it, repeated pointers, a new c, new scalars and signed zeros among them."""
    from polygemm.backends.cuda.launch import PreparedLaunch

    plain, _ = launches()
    calls = [(0x100000, 0x200000, 0x300000, 1.0, 0.0), (0x100000, 0x200000, 0x300000, 1.0, 0.0),
             (0x100000, 0x200000, 0x340000, 1.0, 0.0), (0x100000, 0x200000, 0x340000, 0.5, 2.0),
             (0x100000, 0x200000, 0x340000, 1.0, -0.0), (0x100000, 0x200000, 0x340000, 1.0, 0.0),
             (0x100000, 0x200000, 0x340000, -0.0, 0.0), (0x100000, 0x200000, 0x340000, 0.0, 0.0),
             (0x110000, 0x200000, 0x340000, 0.0, 0.0)]
    for what, (spec, lp) in plain.items():
        drv, launched, _ = fake_driver()
        pl = PreparedLaunch(_Runtime(drv), spec, lp)  # type: ignore[arg-type]
        for call in calls:
            pl.queue(*call, stream=1)
            assert pl._kept is not None and pl._plain, what
            pl._plain = False
            want = pl.prepare(*call)
            pl._plain = True
            assert launched[-1][1] == want and launched[-1][2] == 1, (what, call)
        assert len(launched) == len(calls)
        assert launched[4][1] != launched[5][1] and launched[6][1] != launched[7][1], what  # -0.0 is not 0.0's bytes


def test_split_launches_keep_their_parameters_only_with_a_kept_workspace(fake_maps):  # noqa: F811
    """Split-K and stream-K: on a default stream the workspace is the plan's, and the parameters naming it are kept;
    on a stream the caller may destroy each call takes a workspace of its own, packed and released every time."""
    from polygemm.backends.cuda.launch import PreparedLaunch

    _, other = launches()
    for what in ("split-K", "tma split-K", "stream-K"):
        spec, lp = other[what]
        drv, launched, _ = fake_driver()
        rt = _Runtime(drv)
        pl = PreparedLaunch(rt, spec, lp)  # type: ignore[arg-type]
        for stream in (1, 1, 0, 1, 0x7F00, 0x7F00):
            scratches = rt.scratches
            pl.queue(0x100000, 0x200000, 0x300000, 0.5, 1.0, stream)
            prepared = pl.prepare(0x100000, 0x200000, 0x300000, 0.5, 1.0, stream)
            pl.discard(prepared)
            if stream != 0x7F00:
                assert launched[-1][1] == prepared.main and launched[-1][2] == stream, (what, stream)
                assert prepared.workspace == pl._workspaces[stream] and not prepared.owned
            else:  # a workspace of the call's own, for the queued call and the prepare above, both given back
                assert rt.scratches == scratches + 2 and [s for _, s in rt.released[-2:]] == [0x7F00, 0x7F00], what
                queued_ws = rt.released[-2][0]
                assert launched[-1][1] == pl._pack(*pl._split_args((0x100000, 0x200000, 0x300000, 0.5, 1.0, queued_ws)))
        assert set(pl._workspaces) == {0, 1}, what
        assert launched[0][5] == launched[-1][5]  # cooperative or not as the plain launcher would be
