"""A demanding Dask, DLPack and command-line user, twenty-third round (CPU): ``polygemm.dask.gemm`` on CPU dask arrays
with ragged chunks, chunks of size 0 (in M, N and K), K = 0, mismatched chunks over K (the warning's text, the operand
rechunked, and the line it points at), half-precision chunked products with ``out_dtype``, and its refusals; DLPack
producers of every protocol generation (DLPack 1.0 keywords, ``stream`` only, no argument at all) as operands and as
``out``, and what polygemm passes them for CPU data (never a stream); ``out_dtype`` over every pair of input and result
dtype with ``c`` and ``out`` (refusals leave both untouched) and ml_dtypes' 8- and 4-bit types refused by name; and
the command line's output paths in a folder where ``os.access`` says yes but no file can be made (root, /proc, /sys),
``polygemm compile --out`` such a folder, ``bench`` options of one mode given in the other, ``plot`` of hand-made
records whose counts are negative or past any float, ``info --json`` on stdout beside a warning on stderr.
(torch and JAX are not installed on the CPU machine: their tensors are left to test_user_edges_r8_gpu.py and
test_jax.py.) The tests marked "defect" failed before the fix they name; the others check edges that were right."""

from __future__ import annotations

import json
import os
import warnings

import ml_dtypes
import numpy as np
import pytest

import polygemm as pg
from polygemm.errors import ArgumentError, DTypeError, ShapeError
from polygemm.testing import reference_for

da = pytest.importorskip("dask.array", reason="dask[array] not installed (pip install 'polygemm[dask]'); the [test] extra has it")
import polygemm.dask as pgd  # noqa: E402
from polygemm.dask import DaskRechunkWarning  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)


def within(got, a, b, c=None, alpha=1.0, beta=0.0, out_dtype=None):
    kw = {} if out_dtype is None else {"out_dtype": out_dtype}
    res = reference_for(np.asarray(a), np.asarray(b), c, alpha, beta, **kw).compare(np.asarray(got))
    assert res.ok, res.message


def cli(capsys, argv):
    """(exit status, stdout, stderr) of ``polygemm argv``: a usage error's SystemExit or main's return."""
    from polygemm.apps.cli import main

    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


# -- polygemm.dask.gemm on CPU dask arrays ---------------------------------------------------------------------------

@pytest.mark.parametrize("chunks_a, chunks_b", [
    (((3, 4), (2, 7)), ((2, 7), (1, 4))),              # ragged everywhere, K chunks alike
    (((3, 0, 4), (2, 0, 7)), ((2, 0, 7), (0, 5))),     # a 0-size chunk in M, K and N
    (((7,), (9,)), ((9,), (5,))),                        # one block
    (((1,) * 7, (1,) * 9), ((1,) * 9, (1,) * 5)),        # 1x1 blocks: nine gemm calls a block
])
def test_dask_ragged_and_empty_chunks_match_the_reference(rng, chunks_a, chunks_b):
    a = rng.standard_normal((7, 9)).astype(np.float32)
    b = rng.standard_normal((9, 5)).astype(np.float32)
    A, B = da.from_array(a, chunks=chunks_a), da.from_array(b, chunks=chunks_b)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DaskRechunkWarning)  # chunks alike over K: no rechunk
        C = pgd.gemm(A, B, device="cpu")
    assert C.chunks == (chunks_a[0], chunks_b[1]) and C.dtype == np.float32
    within(C.compute(), a, b)


def test_dask_mismatched_k_chunks_rechunk_the_operand_with_more_and_warn_at_the_callers_line(rng):
    a = rng.standard_normal((7, 9)).astype(np.float32)
    b = rng.standard_normal((9, 5)).astype(np.float32)
    A, B = da.from_array(a, chunks=((3, 4), (2, 3, 4))), da.from_array(b, chunks=((5, 4), (5,)))
    with pytest.warns(DaskRechunkWarning) as rec:
        C = pgd.gemm(A, B, device="cpu")
    msg = str(rec[0].message)
    assert "(2, 3, 4)" in msg and "(5, 4)" in msg and "rechunking A's columns to B's row chunks" in msg
    assert rec[0].filename == __file__  # the user's line, not polygemm's
    assert C.chunks == ((3, 4), (5,))
    within(C.compute(), a, b)
    # the same number of K chunks, of other sizes: B follows A
    A, B = da.from_array(a, chunks=(7, (4, 5))), da.from_array(b, chunks=((5, 4), 5))
    with pytest.warns(DaskRechunkWarning, match="rechunking B's rows to A's column chunks"):
        C = pgd.gemm(A, B, device="cpu")
    within(C.compute(), a, b)


def test_dask_k_zero_gives_beta_c_and_zeros(rng):
    A = da.zeros((3, 0), chunks=(2, 1), dtype=np.float32)
    B = da.zeros((0, 4), chunks=(1, 2), dtype=np.float32)
    assert np.array_equal(pgd.gemm(A, B, device="cpu").compute(), np.zeros((3, 4), np.float32))
    c = rng.standard_normal((3, 4)).astype(np.float32)
    got = pgd.gemm(A, B, c, beta=2.0, device="cpu").compute()
    assert got.dtype == np.float32 and np.array_equal(got, 2 * c)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("out_dtype", [None, np.float32])
def test_dask_half_precision_over_several_k_chunks_with_a_zero_one(rng, dtype, out_dtype):
    a = rng.standard_normal((6, 8)).astype(dtype)
    b = rng.standard_normal((8, 5)).astype(dtype)
    A, B = da.from_array(a, chunks=((3, 3), (3, 0, 5))), da.from_array(b, chunks=((3, 0, 5), (2, 3)))
    C = pgd.gemm(A, B, device="cpu", out_dtype=out_dtype)
    got = C.compute()
    want = np.dtype(out_dtype or dtype)
    assert C.dtype == want and got.dtype == want
    within(got, a, b, out_dtype=out_dtype)


def test_dask_refusals_name_the_argument_and_the_way_out(rng):
    ab = da.from_array(rng.standard_normal((6, 8)).astype(BF16), chunks=3)
    bb = da.from_array(rng.standard_normal((8, 5)).astype(BF16), chunks=4)
    with pytest.raises(DTypeError, match=r"got out_dtype float64: omit out_dtype"):
        pgd.gemm(ab, bb, out_dtype=np.float64)
    with pytest.raises(DTypeError, match=r"A bfloat16 and B float16.*astype"):
        pgd.gemm(ab, bb.astype(np.float16))
    with pytest.raises(DTypeError, match=r"c must have the dtype of the result \(bfloat16\); got float32"):
        pgd.gemm(ab, bb, np.zeros((6, 5), np.float32), beta=1.0)
    with pytest.raises(ShapeError, match=r"A\.shape\[1\] \(K=8\) must equal B\.shape\[0\] \(5\)"):
        pgd.gemm(ab, bb.T)
    with pytest.raises(ArgumentError, match=r"beta=1\.0 needs c: pass c \(shape \(6, 5\)\)"):
        pgd.gemm(ab, bb, beta=1.0)
    f8 = da.from_array(np.zeros((4, 4), ml_dtypes.float8_e4m3fn), chunks=2)
    with pytest.raises(DTypeError, match="A has dtype float8_e4m3fn"):
        pgd.gemm(f8, f8)


# -- DLPack producers of every generation ------------------------------------------------------------------------------

class _Producer:
    def __init__(self, x, log):
        self.x, self.log = x, log

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


class Dlpack1(_Producer):
    """DLPack 1.0: keyword-only stream, max_version, dl_device, copy; CPU data refuses a stream, as the spec says."""

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.log.append({"stream": stream, "max_version": max_version})
        if stream is not None:
            raise BufferError("a CPU array takes no stream")
        if max_version is None:
            return self.x.__dlpack__()
        return self.x.__dlpack__(max_version=max_version, dl_device=dl_device, copy=copy)


class StreamOnly(_Producer):
    """Before DLPack 1.0 (older torch and JAX): ``__dlpack__(stream=None)``."""

    def __dlpack__(self, stream=None):
        self.log.append({"stream": stream})
        if stream is not None:
            raise BufferError("a CPU array takes no stream")
        return self.x.__dlpack__()


class NoArgs(_Producer):
    def __dlpack__(self):
        self.log.append({})
        return self.x.__dlpack__()


@pytest.mark.parametrize("kind", [Dlpack1, StreamOnly, NoArgs])
def test_dlpack_producers_of_each_generation_are_read_and_never_given_a_stream(rng, kind):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    log: list[dict] = []
    got = pg.gemm(kind(a, log), kind(b, log), device="cpu")
    within(got, a, b)
    got = pg.matmul(kind(a, log), kind(b[:, 0], log), device="cpu")
    assert got.shape == (3,)
    within(got[:, None], a, b[:, :1])
    assert log and all(call.get("stream") is None for call in log), log


def test_dlpack_1_0_out_is_written_in_place(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    target = np.full((3, 5), np.nan, np.float32)
    pg.gemm(a, b, out=Dlpack1(target, []), device="cpu")
    within(target, a, b)


@pytest.mark.parametrize("kind", [StreamOnly, NoArgs])
def test_pre_1_0_dlpack_out_is_refused_saying_why(rng, kind):
    # defect: a writeable array whose producer speaks only DLPack before 1.0 (older torch and JAX) was refused as out with
    # "out must be an array polygemm can write (NumPy, a writeable CPU DLPack array, ...); got a StreamOnly": it is
    # writeable; what NumPy reads read-only is the old protocol's export (it has no read-only flag). The message now says so
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    target = np.full((3, 5), 7.0, np.float32)
    with pytest.raises(ArgumentError, match=r"out \(\w+\) offers only DLPack's pre-1\.0 export \(its __dlpack__ takes no "
                                            r"max_version\).*pass a NumPy array"):
        pg.gemm(a, b, out=kind(target, []), device="cpu")
    assert np.all(target == 7.0)


def test_read_only_dlpack_1_0_out_keeps_its_message(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    ro = np.full((3, 5), 7.0, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ArgumentError, match="a writeable CPU DLPack array"):
        pg.gemm(a, b, out=Dlpack1(ro, []), device="cpu")
    assert np.all(ro == 7.0)


# -- out_dtype over every pair, with c and out -------------------------------------------------------------------------

DTYPES = [np.dtype(np.float16), BF16, np.dtype(np.float32), np.dtype(np.float64)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("out_dtype", DTYPES, ids=lambda d: d.name)
def test_out_dtype_for_every_pair_with_c_and_out(rng, dtype, out_dtype):
    """README: half precision may be stored as float32 (out_dtype, then c is float32 too); every other result dtype is
    the operands'. A refused pair leaves out and c as they were."""
    a = rng.standard_normal((5, 6)).astype(dtype)
    b = rng.standard_normal((6, 4)).astype(dtype)
    c = rng.standard_normal((5, 4)).astype(out_dtype)
    out = np.full((5, 4), 3.0, out_dtype)
    c0 = c.copy()
    ok = out_dtype == dtype or (dtype.name in ("float16", "bfloat16") and out_dtype == np.float32)
    if ok:
        got = pg.gemm(a, b, c, alpha=0.5, beta=-1.5, out=out, out_dtype=out_dtype, device="cpu")
        assert got is out and got.dtype == out_dtype
        within(got, a, b, c0, 0.5, -1.5, out_dtype=out_dtype)
        assert np.array_equal(c, c0)
        new = pg.gemm(a, b, out_dtype=out_dtype, device="cpu")
        assert new.dtype == out_dtype
        within(new, a, b, out_dtype=out_dtype)
    else:
        with pytest.raises(DTypeError, match=f"the result dtype must be {dtype.name}.*got out(_dtype)? {out_dtype.name}: "):
            pg.gemm(a, b, c, alpha=0.5, beta=-1.5, out=out, out_dtype=out_dtype, device="cpu")
        with pytest.raises(DTypeError):
            pg.gemm(a, b, c, beta=1.0, out=c, out_dtype=out_dtype, device="cpu")  # in place: refused, c kept
        assert np.all(out == 3.0) and np.array_equal(c, c0)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "int4", "float4_e2m1fn"])
def test_ml_dtypes_narrow_types_are_refused_by_name(rng, name):
    t = np.dtype(getattr(ml_dtypes, name))
    x = rng.standard_normal((3, 3)).astype(t)
    with pytest.raises(DTypeError, match=f"a has dtype {name}.*a.astype\\(np.float32\\)"):
        pg.gemm(x, x, device="cpu")
    y = np.eye(3, dtype=np.float32)
    with pytest.raises(DTypeError, match=f"{name} is no dtype polygemm computes"):
        pg.gemm(y, y, out_dtype=t, device="cpu")


# -- the command line: output folders where no file can be made ------------------------------------------------------

def _cannot_create(folder):
    try:
        fd = os.open(os.path.join(folder, ".polygemm-r23-probe"), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
    except OSError:
        return True
    os.close(fd)
    os.unlink(os.path.join(folder, ".polygemm-r23-probe"))
    return False


@pytest.fixture
def no_file_folder(monkeypatch):
    """/proc: a folder on every Linux where no file can be made, which os.access calls writable for root (and, here,
    for any user: its answer for root is given whoever runs the tests)."""
    assert os.path.isdir("/proc") and _cannot_create("/proc")
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, *a, **k: True if str(path).startswith("/proc")
                        else access(path, mode, *a, **k))
    return "/proc"


@pytest.mark.parametrize("argv", [
    ["info", "--json", "{d}/x.json"],
    ["variants", "--device", "cpu", "--json", "{d}/x.json"],
    ["bench", "--device", "cpu", "--shapes", "8x8x8", "--json", "{d}/x.json"],
    ["bench", "--device", "cpu", "--shapes", "8x8x8", "--markdown", "{d}/x.md"],
    ["bench", "--device", "cpu", "--shapes", "8x8x8", "--plot", "{d}/x.png"],
    ["matrix", "--backends", "cpu", "--quick", "--json", "{d}/x.json"],
])
def test_output_in_a_folder_where_no_file_can_be_made_is_refused_before_running(capsys, monkeypatch, no_file_folder, argv):
    # defect: os.access(folder, W_OK) is true for root in /proc or /sys (and on mounts that refuse new files): the
    # command ran whole (a benchmark, the conformance matrix), printed its results, then ended in a FileNotFoundError /
    # PermissionError traceback with exit 1 and no file. The folder is now tried by making a file in it, before anything
    from polygemm.apps import bench, matrix

    monkeypatch.setattr(bench, "run_call_bench", lambda *a, **k: pytest.fail("timed into an unwritable --json"))
    monkeypatch.setattr(matrix, "run_conformance", lambda *a, **k: pytest.fail("ran into an unwritable --json"), raising=False)
    rc, out, err = cli(capsys, [x.format(d=no_file_folder) for x in argv])
    assert rc == 2 and out == "" and "Traceback" not in err, (rc, out, err)
    assert f"no file can be made in {no_file_folder}" in err and "name a file in a folder you can write" in err


def test_plot_output_in_a_folder_where_no_file_can_be_made(capsys, tmp_path, no_file_folder):
    # defect: as above, for polygemm plot -o
    rec = dict(backend="cpu", variant="blas", dtype="float32", m=64, n=64, k=64, tflops=0.01, tflops_min=0.009,
               tflops_max=0.011, ms=0.05, vendor_variant="numpy", vendor_tflops=0.012, ratio=0.8, device="CPU",
               date="2026-01-01", repeats=5, calls_per_repeat=1)
    src = tmp_path / "r.json"
    src.write_text(json.dumps({"records": [rec]}))
    rc, out, err = cli(capsys, ["plot", str(src), "-o", f"{no_file_folder}/x.png"])
    assert rc == 2 and "Traceback" not in err and "no file can be made" in err, (rc, out, err)


def test_compile_out_a_folder_where_no_file_can_be_made_is_refused_before_building(capsys, monkeypatch, no_file_folder):
    # defect: `polygemm compile --out /proc` took the folder (it exists), built every kernel of the catalog and ended in
    # a FileNotFoundError traceback at the first cubin written (exit 1). It is now tried before any build
    from polygemm.apps import compile as compile_cmd

    monkeypatch.setattr(compile_cmd, "_one", lambda *a, **k: pytest.fail("built into an unwritable --out"))
    rc, out, err = cli(capsys, ["compile", "--out", no_file_folder, "--only", "copy_scale"])
    assert rc == 2 and "Traceback" not in err, (rc, out, err)
    assert f"--out {no_file_folder}: no file can be made in that folder" in err


def test_a_writable_output_still_written_and_no_probe_left_behind(capsys, tmp_path):
    path = tmp_path / "info.json"
    rc, out, err = cli(capsys, ["info", "--json", str(path)])
    assert rc == 0 and json.loads(path.read_text())["backends"] and f"wrote {path}" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["info.json"]


# -- the command line: bench options of the other mode -----------------------------------------------------------------

@pytest.mark.parametrize("extra, named", [
    (["--mode", "kernel", "--batch", "64"], "--batch 64: a call-mode option"),
    (["--mode", "kernel", "--inputs", "numpy"], "--inputs numpy: a call-mode option"),
    (["--mode", "kernel", "--result", "new"], "--result new: a call-mode option"),
    (["--mode", "kernel", "--array-lib", "torch"], "--array-lib torch: a call-mode option"),
    (["--mode", "kernel", "--batch", "2", "--inputs", "numpy"], "--batch 2, --inputs numpy: call-mode options"),
    (["--settle", "0.5"], "--settle 0.5: a kernel-mode option"),
    (["--mode", "call", "--settle", "1"], "--settle 1: a kernel-mode option"),
])
def test_bench_option_of_the_other_mode_is_refused_before_timing(capsys, monkeypatch, extra, named):
    # defect: an option of the other mode was ignored without a word: `--mode kernel --batch 64` timed single products
    # (records that read as a batch of 64), `--settle 1` in call mode interleaved as ever, exit 0
    from polygemm.apps import bench

    monkeypatch.setattr(bench, "run_bench", lambda *a, **k: pytest.fail("timed with an option of the other mode"))
    monkeypatch.setattr(bench, "run_call_bench", lambda *a, **k: pytest.fail("timed with an option of the other mode"))
    rc, out, err = cli(capsys, ["bench", "--device", "cpu", "--shapes", "8x8x8", "--no-progress", *extra])
    assert rc == 2 and out == "" and "Traceback" not in err, (rc, out, err)
    assert named in err and ("pass --mode call" in err or "pass --mode kernel" in err)


@pytest.mark.parametrize("extra", [["--mode", "kernel", "--settle", "0.01", "--variants", "reference"],
                                   ["--batch", "2", "--inputs", "numpy"], ["--mode", "kernel", "--inputs", "device"]])
def test_bench_options_of_their_own_mode_still_run(capsys, tmp_path, extra):
    path = tmp_path / "r.json"
    rc, out, err = cli(capsys, ["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--no-progress",
                                "--json", str(path), *extra])
    assert rc == 0, err
    recs = json.loads(path.read_text())["records"]
    assert recs and all(r["m"] == 8 for r in recs)
    if "--batch" in extra:
        assert all(r["batch"] == 2 for r in recs)
    if "--settle" in extra:
        assert all(r["method"] == "settled 0.01 s" for r in recs)


# -- the command line: plot of hand-made records, info's JSON ----------------------------------------------------------

def _record(**kw):
    rec = dict(backend="cpu", variant="blas", dtype="float32", m=64, n=64, k=64, tflops=0.01, tflops_min=0.009,
               tflops_max=0.011, ms=0.05, vendor_variant="numpy", vendor_tflops=0.012, ratio=0.8, device="CPU",
               date="2026-01-01", repeats=5, calls_per_repeat=1)
    rec.update(kw)
    return rec


@pytest.mark.parametrize("field, value, said", [
    ("m", -5, "m=-5"), ("k", -1, "k=-1"), ("repeats", -3, "repeats=-3"),
    ("n", 10**400, "n=100000000000... (401 digits)"), ("m", 2**63, "m=9223372036854775808"),
])
def test_plot_refuses_counts_out_of_range(capsys, tmp_path, field, value, said):
    # defect: a negative dimension was drawn as "an empty product (-5x64x64)" and left out, and two negative ones
    # (a positive product) plotted; a dimension of 10**400 ended plot in an OverflowError traceback (exit 1)
    src = tmp_path / "r.json"
    src.write_text(json.dumps({"records": [_record(**{field: value})]}))
    rc, out, err = cli(capsys, ["plot", str(src)])
    assert rc == 2 and "Traceback" not in err, (rc, out, err)
    assert f"record 1 has {said}; polygemm bench --json writes a whole number from 0 to 2**63 - 1 there" in err


@pytest.mark.parametrize("rec", [_record(), _record(tflops=None, tflops_min=None, tflops_max=None),
                                 _record(vendor_tflops=None, ratio=None), _record(repeats=0, calls_per_repeat=0)],
                         ids=["whole", "no-own-figure", "no-vendor", "zero-counts"])
def test_plot_of_hand_made_records_with_nulls_and_defaults(capsys, tmp_path, rec):
    src = tmp_path / "r.json"
    src.write_text(json.dumps({"records": [rec]}))
    rc, out, err = cli(capsys, ["plot", str(src), "-o", str(tmp_path / "p.svg")])
    assert rc == 0 and "Traceback" not in err, err
    assert "float32, kernel mode" in out and (tmp_path / "p.svg").stat().st_size > 0


def test_plot_records_lacking_a_field_name_it(capsys, tmp_path):
    rec = _record()
    del rec["vendor_tflops"], rec["date"]
    src = tmp_path / "r.json"
    src.write_text(json.dumps({"records": [rec]}))
    rc, out, err = cli(capsys, ["plot", str(src)])
    assert rc == 2 and "record 1 lacks 'vendor_tflops', 'date'" in err


def test_info_json_on_stdout_stays_json_beside_a_warning_on_stderr(capsys, monkeypatch, fresh_registry):
    monkeypatch.setenv("POLYGEMM_PROBE_TIMEOUT", "soon")
    monkeypatch.setenv("POLYGEMM_MUSA_EMULATION", "maybe")
    with pytest.warns(RuntimeWarning, match="POLYGEMM_PROBE_TIMEOUT='soon' is not a number; keeping 30 s"):
        rc, out, err = cli(capsys, ["info", "--json"])
    assert rc == 0
    data = json.loads(out)  # nothing but the JSON on stdout
    musa = {b["name"]: b for b in data["backends"]}["musa"]
    assert not musa["available"] and musa["reason"]  # not run (no library found), or refused for the value: never on
    assert {b["name"]: b for b in data["backends"]}["cpu"]["available"]


def test_gemm_check_at_k_zero_and_empty_m_in_bfloat16(capsys):
    for shape in ("8x8x0", "0x8x8"):
        rc, out, err = cli(capsys, ["gemm", "--shape", shape, "--device", "cpu", "--dtype", "bfloat16", "--check", "--seed", "3"])
        assert rc == 0 and "check: PASS" in out and err == "", (out, err)
