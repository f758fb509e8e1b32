"""float32 on the bfloat16 tensor cores, without a GPU: the split's arithmetic (a NumPy model of
kernels/util/split_bf16.cu) within the float32 bound, the split operands' geometry, and when auto plans the
emulation (the GPU runs are test_emulated_gpu.py)."""

from __future__ import annotations

import dataclasses
import secrets
import types

import numpy as np
import pytest

from polygemm.backends.cuda.backend import CudaBackend
from polygemm.backends.cuda.emulated_launch import HI, LO, MID, SEGMENT_PARTS, padded_k, split_operand
from polygemm.backends.cuda.emulated_plan import EMULATED
from polygemm.backends.cuda.planning import Mat
from polygemm.errors import UnsupportedProblemError
from polygemm.problem import normalize
from polygemm.testing.bounds import check_result

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)


def _rng():
    return np.random.default_rng(secrets.randbits(32))


def split(v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The kernel's split of float32 ``v`` into bfloat16 (hi, mid, lo), as float32 arrays (finite values)."""
    v = np.asarray(v, np.float32)
    hi = v.astype(BF16)
    over = np.isinf(hi.astype(np.float32)) & np.isfinite(v)  # out of bfloat16's range: hi rounded toward zero
    hi[over] = (v[over].view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32).astype(BF16)
    r1 = v - hi.astype(np.float32)
    mid = r1.astype(BF16)
    lo = (r1 - mid.astype(np.float32)).astype(BF16)
    return hi.astype(np.float32), mid.astype(np.float32), lo.astype(np.float32)


def emulated(a: np.ndarray, b: np.ndarray, segments: int) -> np.ndarray:
    """The sum of the segments' products of parts in float64 (exact for these sizes), rounded to float32."""
    pa, pb = split(a), split(b)
    total = np.zeros((a.shape[0], b.shape[1]))
    for ia, ib in SEGMENT_PARTS[segments]:
        total += pa[ia].astype(np.float64) @ pb[ib].astype(np.float64)
    return total.astype(np.float32)


def test_three_parts_hold_a_float32_value_to_2_to_the_minus_27():
    rng = _rng()
    size = 200_000  # magnitudes from 2^-100 up, every significand
    v = (rng.choice([-1.0, 1.0], size) * rng.uniform(1.0, 2.0, size) * 2.0 ** rng.integers(-100, 120, size)).astype(np.float32)
    v = np.concatenate([v, np.float32([3.4e38, -3.39e38, 1.0, -0.0, 2.0 ** -100])])
    hi, mid, lo = split(v)
    assert np.all(np.isfinite(hi))  # the largest float32 values too: hi is rounded toward zero there
    err = np.abs(v.astype(np.float64) - (hi.astype(np.float64) + mid + lo))
    assert np.all(err <= 2.0 ** -27 * np.abs(v.astype(np.float64)))


@pytest.mark.parametrize("k", [1, 16, 257, 4096])
def test_six_segments_meet_the_float32_bound_on_awkward_inputs(k):
    rng = _rng()
    m, n = 33, 17
    wide = lambda shape: (rng.standard_normal(shape) * 2.0 ** rng.integers(-40, 40, shape)).astype(np.float32)  # noqa: E731
    for a, b in [(wide((m, k)), wide((k, n))),
                 (rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32))]:
        assert check_result(emulated(a, b, 6), a, b)
    # cancellation: [x, -x] against [y; y] sums to zero exactly; the bound is relative to |A|·|B|, not to the result
    half = rng.standard_normal((m, k)).astype(np.float32)
    y = rng.standard_normal((k, n)).astype(np.float32)
    a, b = np.concatenate([half, -half], axis=1), np.concatenate([y, y], axis=0)
    assert check_result(emulated(a, b, 6), a, b)


def test_three_segments_are_one_pass_class_not_float32():
    rng = _rng()
    a = rng.standard_normal((64, 512)).astype(np.float32)
    b = rng.standard_normal((512, 64)).astype(np.float32)
    mag = np.abs(a).astype(np.float64) @ np.abs(b)
    ref = a.astype(np.float64) @ b
    err3 = np.abs(emulated(a, b, 3) - ref) / mag
    assert err3.max() <= 2 * 2.0 ** -11  # "medium": inputs to 10 bits and better
    assert err3.max() > 2.0 ** -24  # and not float32's (it must never stand for "highest")
    assert (np.abs(emulated(a, b, 6) - ref) / mag).max() < 2.0 ** -22


def test_segments_pair_the_parts_smallest_first_and_end_with_hi_hi():
    for segments, pairs in SEGMENT_PARTS.items():
        assert len(pairs) == segments and pairs[-1] == (HI, HI)
        order = [2 * ia + 2 * ib for ia, ib in pairs]  # 2^-9 per part below hi: the product's size class
        assert order == sorted(order, reverse=True)
    assert set(SEGMENT_PARTS[6]) == {(LO, HI), (HI, LO), (MID, MID), (HI, MID), (MID, HI), (HI, HI)}


@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("is_a", [True, False])
def test_split_operands_keep_the_users_orientation_and_16_byte_segments(layout, is_a):
    rows, cols = (37, 1001) if is_a else (1001, 37)  # K = 1001
    ld = (cols if layout == "row" else rows) + 3
    op = split_operand(Mat("a" if is_a else "b", rows, cols, layout, ld, 0, 4), is_a, 6)
    lines, width, real_lines, real_width, src_pitch, dst_pitch, seg = op.geometry
    ks = padded_k(1001)
    assert ks == 1008 and src_pitch == ld
    assert op.mat.layout == layout and op.mat.itemsize == 2
    assert (op.mat.rows, op.mat.cols) == ((37, 6 * ks) if is_a else (6 * ks, 37))
    assert width % 8 == 0 and dst_pitch % 8 == 0 and seg % 8 == 0  # every store 16 bytes, aligned
    if (layout == "row") == is_a:  # lines run along K: segments side by side in each line
        assert (lines, width, real_lines, real_width, seg) == (37, ks, 37, 1001, ks) and dst_pitch == 6 * ks
    else:  # lines are k: segments are blocks of lines
        assert (lines, real_lines, real_width) == (ks, 1001, 37) and seg == ks * dst_pitch and dst_pitch == 40
    assert op.nbytes == 6 * ks * (40 if (layout == "row") != is_a else 37) * 2
    codes = [(op.codes >> (2 * s)) & 3 for s in range(6)]
    assert codes == [pair[0 if is_a else 1] for pair in SEGMENT_PARTS[6]]


@pytest.fixture
def backend():
    be = CudaBackend()
    be._rt = None  # planned as for a device of 132 SMs
    return be


def _problem(m, n, k, dtype=np.float32, batch=(), precision="highest"):
    p = normalize(np.ones(batch + (m, k), dtype), np.ones(batch + (k, n), dtype))
    return dataclasses.replace(p, precision=precision)


def test_auto_emulates_a_large_float32_product_and_says_what_it_weighed(backend):
    plan = backend.plan(_problem(4096, 4096, 4096))
    assert plan.variant == "emulated_bf16x6"
    assert "6 bfloat16 products" in plan.reason and "float32 rungs" in plan.reason
    assert "CUDA cores" in plan.candidates[0][1]  # the float32 rung it beat, with its estimate
    assert "emulation" in plan.launch and "24576" in plan.reason  # inner size 6 x 4096
    assert any("6 bfloat16 segments" in c for c in plan.copies)
    assert plan.private.estimate_us > 0


@pytest.mark.parametrize("shape,dtype,batch", [((128, 128, 128), np.float32, ()), ((4096, 4096, 4096), np.float16, ()),
                                               ((2048, 2048, 2048), np.float32, (2,))])
def test_auto_keeps_the_native_rungs_for_small_half_and_batched_products(backend, shape, dtype, batch):
    plan = backend.plan(_problem(*shape, dtype=dtype, batch=batch))
    assert not plan.variant.startswith("emulated")
    if dtype == np.float32 and not batch:  # weighed and passed over, with its estimate
        assert any(name == "emulated_bf16x6" and "estimated" in why for name, why in plan.candidates)


def test_medium_precision_takes_three_segments(backend):
    plan = backend.plan(_problem(4096, 4096, 4096, precision="medium"))
    assert plan.variant == "emulated_bf16x3" and "3 bfloat16 products" in plan.reason
    assert backend.get_variant("emulated_bf16x3").precision == "medium"
    assert backend.get_variant("emulated_bf16x6").precision == "highest"


def test_a_named_emulation_refuses_batches_and_devices_without_bfloat16_tensor_cores(backend):
    with pytest.raises(UnsupportedProblemError, match="batch.*variant='auto'"):
        backend.plan(_problem(64, 64, 64, batch=(3,)), "emulated_bf16x6")
    old = CudaBackend()
    old._rt = types.SimpleNamespace(cc=(7, 5), name="fake sm_75", arch="sm_75", max_smem_per_block=65536, sms=40)
    with pytest.raises(UnsupportedProblemError, match="sm_80"):
        old.plan(_problem(64, 64, 64), "emulated_bf16x6")
    assert not old.plan(_problem(4096, 4096, 4096)).variant.startswith("emulated")


def test_a_named_emulation_runs_on_small_products_too(backend):
    for name, segments in EMULATED.items():
        plan = backend.plan(_problem(7, 9, 13, precision="medium"), name)
        assert plan.variant == name and f"inner size {segments * 16}" in plan.reason
    with pytest.raises(UnsupportedProblemError, match="precision='medium'"):  # three segments never stand for float32
        backend.plan(_problem(7, 9, 13), "emulated_bf16x3")


def test_complex64_runs_its_four_products_on_the_emulation_where_auto_picks_it(backend):
    p = normalize(np.ones((4096, 4096), np.complex64), np.ones((4096, 4096), np.complex64))
    plan = backend.plan(p)
    assert plan.variant == "emulated_bf16x6" and "four real products" in plan.reason


def test_a_split_product_into_an_unaligned_result_is_weighed_at_its_measured_pace(backend):
    # rows of 1501 float32 values are not 16-byte aligned: where the bfloat16 rung splits K, its reduction writes them
    # element by element, which ran half as long again as estimated; rows of 1500 are aligned
    import re

    from polygemm.backends.cuda.emulated_plan import UNALIGNED_SPLIT_PACE

    def product_us(n):
        plan = backend.plan(_problem(512, n, 2816), "emulated_bf16x6")
        assert ":split_k=" in plan.reason.partition(" launch")[0], plan.reason
        return float(re.search(r"product ([0-9.]+)\)", plan.reason).group(1))

    assert product_us(1501) == pytest.approx(UNALIGNED_SPLIT_PACE * product_us(1500), rel=0.02)


def test_the_emulated_launch_splits_both_operands_into_one_block_before_the_rung():
    from polygemm.backends.cuda.emulated_launch import EmulatedLaunch

    calls = []

    class Rt:
        blocks = iter(range(1 << 20, 1 << 30, 1 << 20))

        def scratch(self, nbytes, stream):
            return next(self.blocks)

        def release(self, ptr, stream):
            calls.append(("release", ptr))

        def give_back(self, ptrs):
            pass

        def split_bf16(self, geometry, src, dst, segments, codes, stream):
            calls.append(("split", src, dst, segments))

    class Inner:
        lp = spec = None

        def prepare(self, a, b, c, alpha, beta, stream):
            return (a, b, c)

        def launch(self, prepared, stream):
            calls.append(("rung",) + prepared)

        def discard(self, prepared):
            calls.append(("discard",))

    a = split_operand(Mat("a", 40, 100, "row", 100, 0, 4), True, 6)
    b = split_operand(Mat("b", 100, 30, "row", 30, 0, 4), False, 6)
    launch = EmulatedLaunch(Inner(), Rt(), a, b)  # type: ignore[arg-type]
    launch.queue(0x10, 0x20, 0x30, 1.0, 0.0, 1)
    base = calls[0][2]
    assert calls[0] == ("split", 0x10, base, 6) and calls[1] == ("split", 0x20, base + launch.b_offset, 6)
    assert calls[2] == ("rung", base, base + launch.b_offset, 0x30) and launch.b_offset % 256 == 0 and launch.b_offset >= a.nbytes
    calls.clear()
    launch.queue(0x10, 0x20, 0x30, 1.0, 0.0, 1)
    assert calls[0][2] == base and not any(c[0] == "release" for c in calls)  # the kept block, the same pointers
    launch.discard(launch.prepare(0x10, 0x20, 0x30, 1.0, 0.0, 7))  # a stream of the caller's: its own block, given back
    assert calls[-2] == ("discard",) and calls[-1][0] == "release"


def test_auto_keeps_the_float32_rungs_where_the_split_would_take_a_quarter_of_the_devices_memory(monkeypatch):
    from polygemm.backends.cuda import emulated_plan

    class Launch:
        nbytes = 3 << 30  # split operands of 3 GiB

    def planned(be, p, name, rt):  # an emulated plan estimated at 1 µs: only the scratch can keep it out
        plan = be.plan_on(p, "auto", None)
        plan.private = dataclasses.replace(plan.private, launch=Launch())
        return plan, 1.0

    monkeypatch.setattr(emulated_plan, "plan_emulated", planned)
    p = _problem(4096, 4096, 4096)
    small = types.SimpleNamespace(device=types.SimpleNamespace(total_memory=lambda: 8 << 30))
    native = CudaBackend().plan_on(p, "auto", None)
    kept = emulated_plan.choose(CudaBackend(), p, "emulated_bf16x6", small, native)
    assert kept is native and any("scratch" in why and "memory" in why for _, why in kept.candidates)
    big = types.SimpleNamespace(device=types.SimpleNamespace(total_memory=lambda: 80 << 30))
    native = CudaBackend().plan_on(p, "auto", None)
    assert emulated_plan.choose(CudaBackend(), p, "emulated_bf16x6", big, native) is not native


def test_infinities_and_nans_in_the_hi_hi_segment_only_give_ieee_results():
    # the kernel's rule: a value that is not finite is itself in the last (hi·hi) segment and 0 in every other, where a
    # partner's part may be 0 (0·inf would be nan where a·inf is not)
    rng = _rng()
    a = rng.standard_normal((40, 64)).astype(np.float32)
    b = rng.standard_normal((64, 24)).astype(np.float32)
    a[3, 5], a[7, 9], b[11, 2] = np.inf, np.nan, -np.inf
    a[20, 0], b[0, :] = 3.4e38, b[0, :] * 1e-3  # past bfloat16's range: hi rounded toward zero

    def segments(x):
        finite = np.isfinite(x)
        hi, mid, lo = split(np.where(finite, x, 0))
        return (hi, mid, lo), np.where(finite, hi, x), finite

    (pa, a_last, fa), (pb, b_last, fb) = segments(a), segments(b)
    total = np.zeros((40, 24))
    pairs = SEGMENT_PARTS[6]
    with np.errstate(invalid="ignore"):
        for s, (ia, ib) in enumerate(pairs):
            last = s == len(pairs) - 1
            total = total + (a_last if last else np.where(fa, pa[ia], 0)).astype(np.float64) @ \
                (b_last if last else np.where(fb, pb[ib], 0)).astype(np.float64)
    got = total.astype(np.float32)
    assert check_result(got, a, b)
    assert np.isinf(got[3, 0]) and np.isnan(got[7]).all() and np.isfinite(np.delete(got[20], 2)).all()
