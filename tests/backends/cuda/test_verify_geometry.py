"""The cuda device check's pure parts (no GPU): how the matrix-vector kernel walks each layout, the
transposed view the column check uses, the retry's choice of rung."""

from __future__ import annotations

import numpy as np
import pytest

from polygemm.backend import Plan
from polygemm.backends.cuda.verify import retry_variant
from polygemm.backends.cuda.verify_geometry import RECORD, matvec_geometry, strided


def test_row_major_is_walked_along_its_rows_and_column_major_across():
    row = strided(0x1000, 100, 40, "row", 64, 0, 1, "float16")
    assert (row.rs, row.cs, row.batch) == (64, 1, 1)
    mode, grid = matvec_geometry(row)
    # aligned rows, 16-byte loads; 40 columns: one slice, 8 lanes a row (5 vectors of 8), 4 rows a warp, 32 a block
    assert mode == 2 and grid[0] == -(-100 // 32) and grid[1] == 1
    assert matvec_geometry(strided(0x1000, 4096, 4096, "row", 4096, 0, 1, "float16"))[1][0] == 4096 // 8  # a warp a row
    # rows of 2 (4 bytes: scalar loads): 2 lanes a row, 16 rows a warp, 128 a block
    assert matvec_geometry(strided(0x1000, 500000, 2, "row", 2, 0, 1, "float16")) == (1, (-(-500000 // 128), 1, 1))
    assert matvec_geometry(strided(0x1000, 100, 40, "row", 63, 0, 1, "float16"))[0] == 1  # rows off 16 bytes: scalar
    assert matvec_geometry(strided(0x1002, 100, 40, "row", 64, 0, 1, "float16"))[0] == 1
    col = strided(0x1000, 100, 40, "col", 128, 0, 1, "float32")
    assert (col.rs, col.cs) == (1, 128)
    mode, grid = matvec_geometry(col)
    assert mode == 3 and grid[0] == -(-100 // 128)  # 4 float32 rows a thread, 128 a block
    mode, grid = matvec_geometry(strided(0x1000, 100, 40, "col", 101, 0, 1, "float32"))
    assert mode == 0 and grid[0] == -(-100 // 32)


def test_the_transpose_swaps_rows_columns_and_strides_and_keeps_the_batch():
    x = strided(0x2000, 7, 9, "row", 9, 63, 5, "bfloat16")
    assert x.batch == 5 and x.kind == "bf16"
    t = x.t
    assert (t.rows, t.cols, t.rs, t.cs, t.bs, t.batch) == (9, 7, 1, 9, 63, 5)
    assert matvec_geometry(t)[0] == 0  # adjacent rows, but columns off 16 bytes (ld 9): a thread a row


def test_a_broadcast_operand_is_one_matrix_and_a_batch_beyond_the_grid_is_looped():
    assert strided(0, 4, 4, "row", 4, 0, 9, "float32").batch == 1
    big = strided(0, 4, 4, "row", 4, 16, 100_000, "float32")
    assert matvec_geometry(big)[1][2] == 65535


def test_few_long_rows_are_sliced_to_fill_the_device_and_many_rows_are_not():
    skinny_b = strided(0, 4096, 6144, "col", 4096, 0, 1, "float16")  # B (K x N) of a 16-token product, column-major
    mode, (gx, splits, gz) = matvec_geometry(skinny_b, sms=132)
    assert mode == 3 and gx == 16 and splits == 24  # slices of 256 columns: 384 blocks of 256 rows
    one_row = strided(0, 1, 262_144, "row", 262_144, 0, 1, "float16")
    assert matvec_geometry(one_row, sms=132)[1][1] == 64  # capped
    square = strided(0, 8192, 8192, "row", 8192, 0, 1, "float16")
    assert matvec_geometry(square, sms=132)[1][1] == 1


def test_the_record_matches_the_kernels_struct():
    # PgvRecord: 4 uint32, then 8 int64 indices, 8 double diffs, 8 double thresholds
    assert RECORD.itemsize == 16 + 8 * 8 + 8 * 8 + 8 * 8 + 8  # the counts, the shown rows, the blocks arrived
    assert RECORD.fields["index"][1] == 16


def _plan(variant, candidates):
    plan = Plan.__new__(Plan)
    plan.variant, plan.candidates = variant, candidates
    return plan


def test_retry_takes_the_next_rung_auto_weighed_that_could_run():
    cands = [("musa", "unavailable: no library"), ("hg_v3_wgmma_pingpong:split_k=2", "estimated 9.0 µs"),
             ("hg_v2_wgmma_tma", "estimated 9.5 µs, but its rows are unaligned"), ("hg_v1_mma_ldmatrix", "estimated 12.0 µs")]
    known = lambda name: name.startswith("hg_")  # noqa: E731
    assert retry_variant(_plan("hg_v3_wgmma_pingpong", cands), known) == "hg_v1_mma_ldmatrix"
    assert retry_variant(_plan("hg_v1_mma_ldmatrix", cands), known) == "hg_v3_wgmma_pingpong:split_k=2"
    assert retry_variant(_plan("cm_v14", []), known) is None


def test_a_slice_of_a_row_stays_under_two_to_the_thirty_first_elements_however_full_the_grid():
    # the pass along rows indexes its slice in 32 bits: a batch that fills the grid still slices a row of 2^33
    from dataclasses import replace

    long_row = replace(strided(0, 1, 2**33, "row", 2**33, 0, 1, "float16"), batch=132)  # a broadcast A over 132 products
    mode, (gx, splits, gz) = matvec_geometry(long_row, sms=132)
    chunk = (-(-long_row.cols // splits) + 255) // 256 * 256  # as the kernel cuts it
    assert mode == 2 and gz == 132 and chunk + 32 * 8 * 4 < 2**31


def test_explain_prices_the_device_check_beside_the_products_estimate(monkeypatch):
    from polygemm import registry
    from polygemm.backends.cuda.backend import CudaBackend
    from polygemm.backends.cuda.verify_geometry import CHECK_FIXED_US, COPY_BYTES_PER_US, PASS_BYTES_PER_US, ROW_US, check_cost_us
    from polygemm.problem import normalize
    from polygemm.verification.cost import describe_check

    class Device:
        def __init__(self, shape, dtype):
            self.shape = shape
            self.__cuda_array_interface__ = {"shape": shape, "typestr": np.dtype(dtype).str, "data": (1 << 30, False),
                                              "version": 3, "strides": None, "stream": None}

    be = CudaBackend()
    be._rt = None
    p = normalize(Device((4096, 4096), np.float16), Device((4096, 4096), np.float16))
    nbytes = 3 * 4096 * 4096 * 2
    assert check_cost_us(p, False) == pytest.approx(CHECK_FIXED_US + nbytes / PASS_BYTES_PER_US["f16"])
    assert check_cost_us(p, True) == pytest.approx(check_cost_us(p, False) + 2 * 4096 * 4096 * 2 / COPY_BYTES_PER_US)
    # a matrix of many short rows is paced by its rows: C of 401408x64 and A of 401408x147 cost their rows' time
    tall = normalize(Device((401408, 147), np.float16), Device((147, 64), np.float16))
    assert check_cost_us(tall, False) == pytest.approx(CHECK_FIXED_US + 2 * 401408 * ROW_US + 147 * ROW_US)
    assert check_cost_us(normalize(np.zeros((4, 4)), np.zeros((4, 4))), False) is None  # host operands: the host checks
    monkeypatch.setattr(registry, "get_backend", lambda name: be)
    note = describe_check(be.plan(p), "raise", True)
    assert "µs (" in note and "of the product's estimated" in note and "copied into out" in note


def test_explain_says_when_device_operands_are_read_back_for_a_host_check(monkeypatch):
    from polygemm import registry
    from polygemm.backends.cuda.backend import CudaBackend
    from polygemm.problem import normalize
    from polygemm.verification.cost import describe_check

    class Device:
        def __init__(self, shape):
            self.shape = shape
            self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f8", "data": (1 << 30, False), "version": 3,
                                              "strides": None, "stream": None}

    be = CudaBackend()
    be._rt = None
    monkeypatch.setattr(registry, "get_backend", lambda name: be)
    note = describe_check(be.plan(normalize(Device((1000, 1000)), Device((1000, 1000)))), "raise", False)
    assert "on the host" in note and "copying A, B and C back from the device (24 MB)" in note  # float64: no device check
