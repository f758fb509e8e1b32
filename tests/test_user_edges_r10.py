"""A demanding user's edges, tenth round (CPU): ``polygemm.dask.gemm`` beyond test_dask.py (laziness,
zero-size chunks, one array on both sides, masked operands, the advice of a c of another dtype),
plugins broken in ways test_plugins_robust.py leaves out (a ``for_device`` that raises, a read-only
``name``, a missing module or attribute, a constructor that needs arguments, a silent probe), and the
command line as a first-time user tries it (no arguments, ``--help``, shapes written otherwise, empty
output paths, malformed JSON for ``plot``, comma-separated backend lists, the files a run wrote).
The tests marked "defect" failed before the fix they name."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import polygemm as pg
from polygemm.apps.cli import main
from polygemm.errors import ArgumentError, BackendUnavailableError, DTypeError
from polygemm.testing import assert_close
from conftest import usage_error
from test_plugins_robust import BASE
from test_registry import install_fake_plugins

ROOT = Path(__file__).resolve().parents[1]


def _error_line(capsys, argv: list[str], status: int = 2) -> str:
    """Run the command line; it must return ``status`` with one error line on stderr, no traceback."""
    assert main(argv) == status
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("polygemm: error: "), err
    return lines[0]


# -- polygemm.dask.gemm ---------------------------------------------------------------------------------------------

try:
    import dask.array as da
except ImportError:  # the other tests of this file run without dask
    da = None
import polygemm.dask as pgd  # noqa: E402  (imports no dask)

pytestmark_dask = pytest.mark.skipif(da is None, reason="dask[array] not installed (pip install 'polygemm[dask]')")


@pytestmark_dask
def test_dask_gemm_computes_nothing_before_compute(rng):
    """Building the graph reads no block of A, B or c, also where it rechunks (K chunks that differ,
    a c chunked otherwise) and checks a named variant; compute() then gives the right product."""
    a, b, c = rng.standard_normal((12, 10)), rng.standard_normal((10, 8)), rng.standard_normal((12, 8))
    seen: list[tuple[int, ...]] = []

    def watched(x: np.ndarray, chunks) -> "da.Array":
        def note(block):
            seen.append(block.shape)
            return block
        return da.from_array(x, chunks=chunks).map_blocks(note, dtype=x.dtype, meta=np.empty((0, 0), x.dtype))

    A, B, C = watched(a, (4, (3, 7))), watched(b, ((5, 5), 4)), watched(c, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pgd.DaskRechunkWarning)
        R = pgd.gemm(A, B, C, alpha=0.5, beta=-2.0, device="cpu", variant="reference")
    assert seen == [] and R.shape == (12, 8) and R.dtype == np.float64
    assert_close(R.compute(), a, b, c, 0.5, -2.0)
    assert seen  # the blocks were read by compute(), not before


@pytestmark_dask
@pytest.mark.parametrize("case", ["zero-width K chunks", "zero-height M chunks", "K is 0", "M is 0", "N is 0"])
def test_dask_zero_size_chunks_and_dimensions(rng, case):
    m, k, n, ca, cb = {
        "zero-width K chunks": (6, 9, 4, ((6,), (0, 4, 0, 5)), ((0, 4, 0, 5), (2, 2))),
        "zero-height M chunks": (6, 9, 4, ((3, 0, 3), (9,)), ((9,), (0, 4))),
        "K is 0": (5, 0, 3, ((2, 3), (0,)), ((0,), (3,))),
        "M is 0": (0, 4, 3, ((0,), (2, 2)), ((2, 2), (3,))),
        "N is 0": (5, 4, 0, ((5,), (4,)), ((4,), (0,))),
    }[case]
    a, b, c = rng.standard_normal((m, k)), rng.standard_normal((k, n)), rng.standard_normal((m, n))
    A, B = da.from_array(a, chunks=ca), da.from_array(b, chunks=cb)
    r = pgd.gemm(A, B, device="cpu").compute()
    assert r.shape == (m, n) and r.dtype == np.float64
    assert_close(r, a, b)
    r = pgd.gemm(A, B, c, alpha=3.0, beta=0.5, device="cpu").compute()
    assert_close(r, a, b, c, 3.0, 0.5)
    if case == "K is 0":  # no product: beta * c exactly
        np.testing.assert_array_equal(r, 0.5 * c)


@pytestmark_dask
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dask_one_array_on_both_sides(rng, dtype):
    """A @ A.T and A.T @ A: one dask array (one graph layer) read as both operands."""
    a = rng.standard_normal((14, 9)).astype(dtype)
    A = da.from_array(a, chunks=(5, 4))
    assert_close(pgd.gemm(A, A.T, device="cpu").compute(), a, a.T)
    assert_close(pgd.gemm(A.T, A, device="cpu").compute(), a.T, a)


@pytestmark_dask
def test_dask_k_chunks_of_equal_count_but_other_sizes_and_a_numpy_c_left_untouched(rng):
    a = rng.standard_normal((9, 11)).astype(np.float32)
    b = rng.standard_normal((11, 7)).astype(np.float32)
    c = rng.standard_normal((9, 7)).astype(np.float32)
    before = c.copy()
    A = da.from_array(a, chunks=(3, (4, 7)))
    B = da.from_array(b, chunks=((7, 4), 3))  # as many K chunks as A: B follows A
    with pytest.warns(pgd.DaskRechunkWarning, match="rechunking B's rows to A's column chunks"):
        R = pgd.gemm(A, B, c, alpha=-1.5, beta=0.25, device="cpu")
    r = R.compute()
    assert r.dtype == np.float32 and R.chunks == ((3, 3, 3), (3, 3, 1))
    assert_close(r, a, b, c, -1.5, 0.25)
    np.testing.assert_array_equal(c, before)  # c's blocks are read, never written


@pytestmark_dask
def test_dask_bfloat16_in_float32_out_over_k_blocks(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = ml_dtypes.bfloat16
    a = rng.standard_normal((10, 70)).astype(bf16)
    b = rng.standard_normal((70, 6)).astype(bf16)
    c = rng.standard_normal((10, 6)).astype(np.float32)
    A, B = da.from_array(a, chunks=(5, 20)), da.from_array(b, chunks=(20, 3))
    R = pgd.gemm(A, B, c, alpha=2.0, beta=1.0, device="cpu", out_dtype="float32")
    r = R.compute()
    assert R.dtype == np.float32 and r.dtype == np.float32
    assert_close(r, a, b, c, 2.0, 1.0, out_dtype=np.float32)


@pytestmark_dask
def test_dask_masked_operands_are_refused_when_the_graph_is_built_by_their_names(rng):
    # defect: a dask array of masked chunks built a graph that failed in compute(), naming "a" (the
    # task's polygemm.gemm argument), not A; a masked NumPy c the same (polygemm/dask.py)
    a, b = rng.standard_normal((6, 5)), rng.standard_normal((5, 4))
    mask = np.zeros((6, 5), bool)
    Am = da.ma.masked_array(da.from_array(a, chunks=3), mask=da.from_array(mask, chunks=3))
    B = da.from_array(b, chunks=((3, 2), 2))
    with pytest.raises(ArgumentError, match=r"^A is a masked array.*dask\.array\.ma\.filled\(A, 0\)"):
        pgd.gemm(Am, B)
    with pytest.raises(ArgumentError, match=r"^B is a masked array"):
        pgd.gemm(da.from_array(a, chunks=3), da.ma.masked_array(B))
    with pytest.raises(ArgumentError, match=r"^c is a masked array.*c\.filled\(0\)"):
        pgd.gemm(da.from_array(a, chunks=3), B, np.ma.ones((6, 4)), beta=1.0)
    # the advice, followed literally, works; a masked c that is not read (beta = 0) is no error
    assert_close(pgd.gemm(da.ma.filled(Am, 0), B, device="cpu").compute(), a, b)
    assert_close(pgd.gemm(da.ma.getdata(Am), B, np.ma.ones((6, 4)), beta=0.0, device="cpu").compute(), a, b)


@pytestmark_dask
def test_dask_c_of_another_dtype_is_told_the_cast(rng):
    # defect: "c must have the dtype of the result (float16); got float32" and no more: polygemm.gemm
    # says the cast to make and, for float16 inputs, out_dtype (polygemm/dask.py)
    a, b = rng.standard_normal((4, 6)).astype(np.float16), rng.standard_normal((6, 3)).astype(np.float16)
    c32 = rng.standard_normal((4, 3)).astype(np.float32)
    A, B = da.from_array(a, chunks=2), da.from_array(b, chunks=2)
    with pytest.raises(DTypeError, match=r"Cast it, e\.g\. c\.astype\(numpy\.float16\) \(or out_dtype=numpy\.float32"):
        pgd.gemm(A, B, c32, beta=1.0)
    r = pgd.gemm(A, B, c32.astype(np.float16), beta=1.0, device="cpu").compute()  # the cast, as told
    assert_close(r, a, b, c32.astype(np.float16), 1.0, 1.0)
    r = pgd.gemm(A, B, c32, beta=1.0, device="cpu", out_dtype=np.float32).compute()  # or the wider result
    assert_close(r, a, b, c32, 1.0, 1.0, out_dtype=np.float32)
    with pytest.raises(DTypeError, match=r"Cast it, e\.g\. c\.astype\(numpy\.float64\)$"):
        pgd.gemm(A.astype(np.float64), B.astype(np.float64), c32, beta=1.0)


# -- plugins ----------------------------------------------------------------------------------------------------------

BROKEN = {
    "fordev": (BASE + """
class B(Base):
    def for_device(self, index):
        raise RuntimeError("device table unreadable")
""", "B"),
    "roname": (BASE + """
class B(Base):
    @property
    def name(self):
        return "something else"
""", "B"),
    "noattr": (BASE, "Missing"),
    "initargs": (BASE + """
class B(Base):
    def __init__(self, path):
        super().__init__()
""", "B"),
    "initraises": (BASE + """
class B(Base):
    def __init__(self):
        raise RuntimeError("no licence file")
""", "B"),
    "notbackend": ("def B():\n    return 42\n", "B"),
    "syntaxerr": ("def (:\n", "B"),
    "silentprobe": (BASE + """
class B(Base):
    def probe(self):
        return Availability(False, "")
""", "B"),
}


@pytest.fixture
def broken(tmp_path, monkeypatch, fresh_registry):
    install_fake_plugins(tmp_path, monkeypatch, fresh_registry,
                         *((f"pg_{n}", f"pg_{n}_plugin", src, {n: f"pg_{n}_plugin:{attr}"}) for n, (src, attr) in BROKEN.items()),
                         ("pg_nomod", "pg_nomod_plugin", "x = 1\n", {"nomod": "pg_nomod_no_such_module:B"}))
    yield tmp_path
    for n in [*BROKEN, "nomod"]:
        sys.modules.pop(f"pg_{n}_plugin", None)


def test_plugins_broken_otherwise_are_listed_with_their_reason_and_nothing_else_breaks(broken, capsys, rng):
    infos = {i.name: i for i in pg.backends()}
    expect = {
        "noattr": "import failed: AttributeError", "nomod": "ModuleNotFoundError", "initargs": "missing 1 required positional",
        "initraises": "no licence file", "notbackend": "is not a polygemm Backend", "syntaxerr": "SyntaxError",
        "silentprobe": "probe said unavailable without a reason",
    }
    for name, says in expect.items():
        assert not infos[name].available and says in infos[name].reason, (name, infos[name].reason)
        with pytest.raises(BackendUnavailableError, match=f"'{name}'"):
            pg.gemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), device=name)
    assert infos["cpu"].available
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((3, 4))
    assert_close(pg.gemm(a, b, device="cpu"), a, b)
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    for name in expect:
        assert name in out
    assert "no licence file" in out and "probe said unavailable without a reason" in out


def test_a_plugins_for_device_that_raises_is_that_device_unavailable(broken, capsys, rng):
    # defect: device="fordev:1" raised the plugin's RuntimeError (from polygemm.gemm, get_backend, and as a
    # traceback from polygemm gemm/variants/bench --device fordev:1); now the device is unavailable, with the
    # reason (polygemm/registry.py)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    says = r"device 'fordev:1' is unavailable: for_device\(1\) failed: RuntimeError: device table unreadable"
    with pytest.raises(BackendUnavailableError, match=says):
        pg.gemm(a, b, device="fordev:1")
    with pytest.raises(BackendUnavailableError, match=says):
        pg.get_backend("fordev:1")
    for argv in (["variants", "--device", "fordev:1"], ["gemm", "--shape", "2x2x2", "--device", "fordev:1"]):
        assert "device table unreadable" in _error_line(capsys, argv)
    assert_close(pg.gemm(a, b, device="cpu"), a, b)  # the rest is untouched


def test_a_plugin_with_a_read_only_name_is_told_what_to_change(broken):
    # defect: its reason was "import failed: AttributeError: property 'name' of 'B' object has no setter":
    # the import had worked, polygemm's own assignment had failed (polygemm/registry.py)
    info = {i.name: i for i in pg.backends()}["roname"]
    assert not info.available
    assert info.reason.startswith("name is read-only") and "plain class attribute" in info.reason
    assert "import failed" not in info.reason and "AttributeError" in info.detail


# -- the command line as a first-time user tries it ---------------------------------------------------------------------

COMMANDS = ["info", "variants", "gemm", "bench", "plot", "matrix", "ceiling", "compile"]


def test_no_command_is_a_usage_error_listing_the_commands(capsys):
    line = usage_error(capsys, [])
    assert "required: command" in line
    r = subprocess.run([sys.executable, "-m", "polygemm"], capture_output=True, text=True, cwd=str(ROOT), timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stdout == ""
    assert all(c in r.stderr for c in COMMANDS), r.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(capsys, command):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and out.startswith(f"usage: polygemm {command}") and "options:" in out


@pytest.mark.parametrize("shape", ["3x4x5", "3X4X5", "3×4×5", " 3 x 4 x 5 "])
def test_gemm_takes_a_shape_written_otherwise(capsys, shape):
    assert main(["gemm", "--shape", shape, "--device", "cpu", "--repeat", "1", "--seed", "1", "--check"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("polygemm plan: 3x4x5 (MxNxK) float32") and "check: PASS" in out


@pytest.mark.parametrize("shape", ["3x4", "3,4,5", "3x4x5x6", "1e3x2x2", "3x4.0x5", "x4x5"])
def test_gemm_shapes_it_cannot_read_name_the_option_and_the_form(capsys, shape):
    line = usage_error(capsys, ["gemm", "--shape", shape])
    assert "argument --shape" in line and "MxNxK" in line and repr(shape) in line


@pytest.mark.parametrize("argv, option", [
    (["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--json", ""], "--json"),
    (["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--markdown", " "], "--markdown"),
    (["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--plot", ""], "--plot"),
    (["matrix", "--backends", "cpu", "--quick", "--json", ""], "--json"),
])
def test_an_empty_output_path_is_refused_before_the_run(capsys, argv, option):
    # defect: "--json $OUT" with OUT unset ran the whole benchmark and wrote nothing, saying nothing
    # (polygemm/apps/cli.py)
    line = _error_line(capsys, argv)
    assert f"{option} " in line and "an empty path; name a file" in line
    assert capsys.readouterr().out == ""  # refused before anything ran


def test_plot_output_empty_is_refused(tmp_path, capsys):
    records = tmp_path / "r.json"
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--json", str(records), "--no-progress"]) == 0
    capsys.readouterr()
    assert "--output '': an empty path" in _error_line(capsys, ["plot", str(records), "-o", ""])


def test_bench_says_which_files_it_wrote(tmp_path, capsys):
    # defect: bench --json/--markdown/--plot wrote its files and said nothing of them (plot -o says
    # "wrote ..."); a typo in a path went unnoticed until the file was looked for (polygemm/apps/bench.py)
    js, md = tmp_path / "b.json", tmp_path / "b.md"
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--json", str(js), "--markdown", str(md),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1] == f"wrote {js}, {md}"
    records = json.loads(js.read_text())["records"]
    assert len(records) == 1 and (records[0]["m"], records[0]["n"], records[0]["k"]) == (8, 8, 8)
    assert "8x8x8" in md.read_text().replace(" ", "") or "| 8 |" in md.read_text()
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--no-progress"]) == 0
    assert "wrote" not in capsys.readouterr().out  # no file, no such line


def test_matrix_json_says_where_it_went_and_backends_take_commas(tmp_path, capsys):
    # defects: matrix --json wrote silently (and in place, not whole or not at all as bench writes);
    # "--backends cpu,CPU" was one unknown name; "cpu CPU" ran the suite twice, its counts doubled
    # (polygemm/apps/matrix.py)
    path = tmp_path / "m.json"
    assert main(["matrix", "--backends", "cpu", "--quick", "--dtypes", "float64", "--variants", "reference", "--no-progress"]) == 0
    once = capsys.readouterr().out
    assert main(["matrix", "--backends", "cpu,CPU", "cpu", "--quick", "--dtypes", "float64", "--variants", "reference",
                 "--no-progress", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1] == f"wrote {path}"
    summary = [ln for ln in once.splitlines() if " passed, " in ln]
    assert summary and summary[0] in out  # the same counts: cpu ran once
    rows = json.loads(path.read_text())["rows"]
    assert rows and {r["backend"] for r in rows} == {"cpu"} and all(r["status"] in ("pass", "skip") for r in rows)


def test_variants_take_comma_separated_backends(capsys):
    # defect: "variants --device cpu,musa" was "unknown device 'cpu,musa'" (polygemm/apps/cli.py)
    assert main(["variants", "--device", "cpu,musa"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cpu:") and "\nmusa:" in out
    assert "names no backend" in _error_line(capsys, ["variants", "--device", ","])
    assert "names no backend" in _error_line(capsys, ["matrix", "--backends", " , ", "--quick"])


def test_matrix_with_a_device_index_is_told_to_name_the_backend(capsys):
    # defect: "--backends cuda:1" was an "unknown backend 'cuda:1' (did you mean 'cuda'?)": no typo, and the
    # suite takes no index (polygemm/apps/matrix.py)
    line = _error_line(capsys, ["matrix", "--backends", "cpu:1", "--quick"])
    assert "'cpu:1'" in line and "without a device index: 'cpu'" in line and "did you mean" not in line


PLOT_INPUTS = {
    "truncated": '{"records": [',
    "not json": "not json at all",
    "a list": "[1, 2, 3]",
    "no records": "{}",
    "records of numbers": '{"records": [1, 2]}',
    "null": "null",
}


@pytest.mark.parametrize("kind", [*PLOT_INPUTS, "binary", "missing", "a folder"])
def test_plot_of_a_file_it_cannot_read_is_one_line_naming_the_file(tmp_path, capsys, kind):
    path = tmp_path / "records.json"
    if kind in PLOT_INPUTS:
        path.write_text(PLOT_INPUTS[kind])
    elif kind == "binary":
        path.write_bytes(b"\xff\xfe\x00\x01")
    elif kind == "a folder":
        path.mkdir()
    line = _error_line(capsys, ["plot", str(path), "-o", str(tmp_path / "p.png")])
    assert str(path) in line
    assert not (tmp_path / "p.png").exists()


def test_info_and_variants_say_what_they_list(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"polygemm {pg.__version__}") and "backends (highest priority first):" in out
    assert any(ln.split()[:1] == ["cpu"] and "available" in ln for ln in out.splitlines())
    assert main(["variants", "-v", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cpu:") and "reference" in out and "dtypes: float16, bfloat16, float32, float64" in out
