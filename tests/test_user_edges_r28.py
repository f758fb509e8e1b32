"""Review round 28: two users' probes (the array API as NumPy, torch and JAX users hold it; the CLI, plugins and
the environment as a new user meets them), each defect a test here.

- Long names: a device or variant name is quoted in errors through ``short_repr`` (a 300-character ``variant=``
  had been quoted whole, twice, in a 955-character message).
- A child forked after its parent used CUDA is told to spawn; NumPy vector results of matmul own their memory.
- torch: lazy negations read as their values, autograd told of writes into ``out``, inference tensors.
- explain makes no copies; polygemm.testing takes what gemm takes; host results are C-ordered.
- Output files that are no regular files; plugin tables of the wrong kinds; catalogs for older GPUs; the kernel
  cache's path; the CLI's wording of a device from the environment."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm
from polygemm.errors import PolygemmError


@pytest.mark.parametrize("kw", [
    {"device": "x" * 300},
    {"variant": "y" * 300},
    {"device": "cpu", "variant": "z" * 300},
    {"device": "cpu:" + "9" * 300},
])
def test_a_long_name_is_quoted_short(kw):
    a = np.ones((2, 2), np.float32)
    with pytest.raises(PolygemmError) as ei:
        polygemm.gemm(a, a, **kw)
    text = str(ei.value)
    assert "..." in text  # cut, not dropped: the message still shows what was passed
    assert "9" * 100 not in text and "x" * 100 not in text and "y" * 100 not in text and "z" * 100 not in text


def _in_forked_child(fn):
    """fn() run in a child of os.fork; what it returned, through a pipe."""
    import os
    import pickle

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without running the parent's atexit handlers
        try:
            data = pickle.dumps(fn())
        except BaseException as exc:  # noqa: BLE001
            data = pickle.dumps(exc)
        os.write(w, data)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return pickle.loads(data)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="os.fork is POSIX")
def test_cuda_errors_in_a_child_forked_after_cuda_say_to_spawn(monkeypatch):
    """CUDA does not survive a fork: a child forked after its parent opened a device gets errors saying to start workers
    with 'spawn' (torch's advice), and only such a child (one forked before any device was opened gets none)."""
    from polygemm.backends.cuda import device

    monkeypatch.setattr(device, "_runtimes", {})  # as before any call on a GPU (whatever this process ran before)
    assert _in_forked_child(device.fork_hint) == ""
    monkeypatch.setitem(device._runtimes, 0, object())  # as after a first call on cuda:0
    hint = _in_forked_child(device.fork_hint)
    assert "spawn" in hint and "fork" in hint
    assert device.fork_hint() == ""  # the parent itself is unaffected


@pytest.mark.parametrize("shapes", [((3, 4), (4,)), ((4,), (4, 3)), ((4,), (4,)), ((2, 3, 4), (4,))])
def test_a_vector_result_owns_its_memory_as_numpys_does(shapes):
    rng = np.random.default_rng(28)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    got, want = polygemm.matmul(a, b, device="cpu"), np.matmul(a, b)
    assert got.shape == np.shape(want) and got.flags.owndata and got.base is None
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# -- torch: lazy negations and autograd's version counter ---------------------------------------------------------------
def _torch():
    return pytest.importorskip("torch")


def _negated(torch, shape, where="cpu"):
    """A real tensor with torch's negative bit set, as ``z.conj().imag`` makes one: its memory holds the negatives."""
    t = torch.randn(*shape, dtype=torch.complex64, device=where).conj().imag
    assert t.is_neg()
    return t


def _where(torch, where):
    if where == "cuda" and not (torch.cuda.is_available() and polygemm.get_backend("cuda").probe().ok):
        pytest.skip("needs torch with CUDA and polygemm's cuda backend")


@pytest.mark.parametrize("where", ["cpu", "cuda"])
def test_a_torch_lazy_negation_is_read_as_its_values_in_a_b_c_and_alpha(where):
    """DLPack and the array interfaces export a tensor's memory without its negative bit: polygemm had read
    z.conj().imag with every sign flipped, silently. torch.matmul reads it right; so does polygemm now."""
    torch = _torch()
    _where(torch, where)
    a, b, c = _negated(torch, (5, 7), where), torch.randn(7, 3, device=where), _negated(torch, (5, 3), where)
    ref = a.resolve_neg() @ b
    tol = dict(rtol=1e-5, atol=1e-5) if where == "cpu" else dict(rtol=2e-3, atol=2e-3)  # tf32-free kernels, fp32 sums
    for _ in range(2):  # the second call from the plan cache
        torch.testing.assert_close(polygemm.gemm(a, b), ref, **tol)
    torch.testing.assert_close(polygemm.gemm(b.T, a.T), ref.T, **tol)
    torch.testing.assert_close(polygemm.gemm(a, b, c, beta=1.0), ref + c.resolve_neg(), **tol)
    torch.testing.assert_close(polygemm.matmul(a, b), ref, **tol)
    if where == "cuda":
        return
    alpha = torch.tensor(2 + 3j).conj().imag  # -3.0, stored as 3.0
    torch.testing.assert_close(polygemm.gemm(a, b, alpha=alpha), -3.0 * ref, rtol=1e-5, atol=1e-5)


def test_a_torch_out_with_the_negative_bit_is_refused_and_left_untouched():
    torch = _torch()
    out = torch.zeros(5, 3, dtype=torch.complex64).conj().imag
    before = out.clone()
    with pytest.raises(ValueError, match=r"out is a torch tensor with its negative bit set.*resolve_neg"):
        polygemm.gemm(torch.randn(5, 7), torch.randn(7, 3), out=out)
    assert torch.equal(out, before)


@pytest.mark.parametrize("how", ["gemm_out", "gemm_in_place_c", "matmul_out", "matmul_vector_out"])
def test_writing_a_torch_out_bumps_its_version_so_autograd_sees_it(how):
    """A tensor saved for backward and then overwritten through out= must make backward() raise, as after
    torch.matmul(a, b, out=o); polygemm's write had left o._version alone and backward() used the new values."""
    torch = _torch()
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    o = torch.ones(3) if how == "matmul_vector_out" else torch.ones(3, 5)
    w = torch.randn(*o.shape, requires_grad=True)
    loss = (w * o).sum()  # o saved for backward
    v0 = o._version
    if how == "gemm_out":
        polygemm.gemm(a, b, out=o)
    elif how == "gemm_in_place_c":
        polygemm.gemm(a, b, o, beta=1.0, out=o)
    elif how == "matmul_out":
        polygemm.matmul(a, b, out=o)
    else:
        polygemm.matmul(a, torch.randn(4), out=o)
    assert o._version > v0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


@pytest.mark.parametrize("where", ["cpu", "cuda"])
def test_an_inference_tensor_out_is_written_only_in_inference_mode(where):
    torch = _torch()
    _where(torch, where)
    a, b = torch.randn(3, 4, device=where), torch.randn(4, 5, device=where)
    with torch.inference_mode():
        out = torch.zeros(3, 5, device=where)
    with pytest.raises(ValueError, match=r"out is an inference tensor.*torch\.inference_mode"):
        polygemm.gemm(a, b, out=out)
    assert not out.any()
    ordinary = torch.zeros(3, 5, device=where)
    polygemm.gemm(a, b, out=ordinary)  # a plan for the same shapes in the cache: it must not let the next call through
    with pytest.raises(ValueError, match=r"out is an inference tensor"):
        polygemm.gemm(a, b, out=out)
    assert not out.any()
    with torch.inference_mode():
        assert polygemm.gemm(a, b, out=out) is out
    torch.testing.assert_close(out, a @ b, rtol=1e-5, atol=1e-5)


def test_store_result_hands_back_a_c_ordered_result_or_writes_out():
    """Every host backend's tail (cpu, musa, cuda's host path, plugins): a column-major result becomes C-ordered."""
    from polygemm.backend import store_result

    f = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    got = store_result(f, None)
    assert got.flags.c_contiguous and np.array_equal(got, f)
    out = np.empty((3, 4), np.float32)
    assert store_result(f, out) is out and np.array_equal(out, f)


# -- explain describes copies without making them -----------------------------------------------------------------------
def test_explain_describes_a_host_copy_without_making_it(monkeypatch):
    """explain "runs nothing": a strided view's C-order copy had been made by every explain (64 MB for a[:, ::2] of a
    4000 x 8000 float32, cached plan or not). It is described in plan.copies; no copy is made; gemm still makes it."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((40, 80)).astype(np.float32)[:, ::2]
    b = rng.standard_normal((40, 9)).astype(np.float32)

    def no_copy(*args, **kwargs):
        raise AssertionError("explain made a copy")

    with monkeypatch.context() as m:
        m.setattr(np, "ascontiguousarray", no_copy)
        first = polygemm.explain(a, b, device="cpu")
        again = polygemm.explain(a, b, device="cpu")  # from the plan cache
    assert any("a copied once into C order" in s for s in first.copies) and again.cached
    got = polygemm.gemm(a, b, device="cpu")  # the cached plan's copy is made by the call that runs
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


def test_explain_of_a_broadcast_too_large_to_copy_returns_its_plan():
    """A 100000 x 100000 broadcast of one row (37 GB as a copy) had made explain raise MemoryError."""
    a = np.broadcast_to(np.ones(100000, np.float32), (100000, 100000))
    plan = polygemm.explain(a, np.ones((100000, 2), np.float32), device="cpu")
    assert plan.backend == "cpu" and any(s.startswith("a copied") for s in plan.copies)


# -- polygemm.testing on what gemm takes --------------------------------------------------------------------------------
def test_the_checks_take_torch_bfloat16_as_gemm_does():
    torch = _torch()
    from polygemm.testing import check_result, error_bound

    a, b = torch.randn(3, 4).bfloat16(), torch.randn(4, 5).bfloat16()
    r = polygemm.gemm(a, b)
    assert r.dtype == torch.bfloat16
    res = check_result(r, a, b)
    assert res.ok, res.message
    assert error_bound(a, b).shape == (3, 5)
    assert not check_result(r + 1, a, b).ok  # a wrong result still fails


def test_a_bound_over_an_overflowing_abs_product_takes_the_exact_answer():
    from polygemm.testing import check_result

    a, b = np.array([[1e308, 1.0, -1e308]]), np.ones((3, 1))
    assert check_result(np.array([[1.0]]), a, b).ok  # |A| @ |B| overflows: the bound with it
    assert not check_result(np.array([[np.nan]]), a, b).ok


def test_the_checks_refuse_what_gemm_refuses():
    from polygemm.errors import ArgumentError
    from polygemm.testing import check_result, error_bound

    a = np.ones((2, 3), np.float32)
    with pytest.raises(ArgumentError, match=r"beta=2\.0 needs c"):
        check_result(polygemm.gemm(a, a.T), a, a.T, None, 1.0, 2.0)
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ArgumentError, match="constant must be a finite real number >= 0"):
            error_bound(a, a.T, constant=bad)


def test_a_0d_torch_alpha_that_requires_grad_is_read_as_float_reads_it():
    torch = _torch()
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    got = polygemm.gemm(a, b, alpha=torch.tensor(2.0, requires_grad=True))
    torch.testing.assert_close(got, 2.0 * (a @ b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("od", [[], np.dtype([("x", "f4")]), "U3", object])
def test_a_non_numeric_out_dtype_is_refused_as_such(od):
    from polygemm.errors import DTypeError

    a = np.ones((2, 2), np.float32)
    with pytest.raises(DTypeError, match=r"out_dtype=.* is no numeric dtype.*pass float32") as ei:
        polygemm.gemm(a, a, out_dtype=od)
    assert "astype" not in str(ei.value)


def test_a_jax_tracer_is_refused_as_no_concrete_array():
    jax = pytest.importorskip("jax")
    from polygemm.errors import ArgumentTypeError

    x = jax.numpy.ones((3, 3), jax.numpy.float32)
    with pytest.raises(ArgumentTypeError, match="JAX tracer"):
        jax.jit(lambda p, q: polygemm.gemm(p, q))(x, x)


# -- output files that are no regular files ---------------------------------------------------------------------------
@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="FIFOs are POSIX")
def test_json_into_a_fifo_is_written_into_not_replaced(tmp_path):
    """--json /dev/null (as root) had replaced the device with a regular file for the whole machine, and a FIFO
    likewise (its reader waited forever): a target that is no regular file is written into."""
    import os
    import stat
    import threading

    from polygemm.apps.cli import main

    fifo = tmp_path / "f.json"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    assert main(["info", "--json", str(fifo)]) in (0, None)
    reader.join(30)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert b'"backends"' in got[0]


def test_json_through_a_dangling_link_is_refused_before_the_run(tmp_path, capsys):
    import os

    from polygemm.apps.cli import main

    link = tmp_path / "d.json"
    os.symlink(tmp_path / "nodir" / "x.json", link)
    try:
        rc = main(["info", "--json", str(link)])
    except SystemExit as exc:  # argparse's error(): exit 2
        rc = exc.code
    assert rc == 2
    assert "nodir does not exist" in capsys.readouterr().err


# -- plugins: variant tables of the wrong kinds, entry point values that name no module ------------------------------
_VARIANT_BASE = '''
from polygemm.backend import Availability, Backend, Variant

class B(Backend):
    priority = 300
    def probe(self):
        return Availability(True)
    def plan(self, problem, variant="auto"):
        raise AssertionError("never planned")
    def run(self, plan):
        raise AssertionError("never run")
'''


@pytest.mark.parametrize("name, table, says", [
    ("tilenone", '(Variant(name="v", dtypes=("float32",), description="d", tile=None),)', "tile=None; it must be a string"),
    ("tileint", '(Variant(name="v", dtypes=("float32",), description="d", tile=128),)', "tile=128; it must be a string"),
    ("descnone", '(Variant(name="v", dtypes=("float32",), description=None),)', "description=None; it must be a string"),
    ("autostr", '(Variant(name="v", dtypes=("float32",), description="d", auto="no"),)', "auto='no'; it must be True or False"),
    ("nodtypes", '(Variant(name="v", dtypes=(), description="d"),)', "dtypes=(); name the dtypes"),
    ("emptytable", '()', "variants() returned no Variant"),
])
def test_a_variant_table_of_the_wrong_kinds_is_a_reason_not_a_crash(tmp_path, monkeypatch, fresh_registry, capsys,
                                                                    name, table, says):
    """`polygemm variants` had crashed for every backend on a plugin's tile=None (AttributeError in the table),
    and an empty table had left the plugin "available" with "it supports " and nothing after it."""
    import json

    from plugin_sources import install_fake_plugins
    from polygemm.apps.cli import main

    source = _VARIANT_BASE + f"    def variants(self):\n        return {table}\n"
    install_fake_plugins(tmp_path, monkeypatch, fresh_registry, (f"pg-{name}", f"pg_{name}_mod", source, {name: f"pg_{name}_mod:B"}))
    info = {i.name: i for i in polygemm.backends()}[name]
    assert not info.available and says in info.reason
    if name == "emptytable":  # an empty table is listed as one ("no variants"); info and calls give the reason
        return
    assert main(["variants"]) in (0, None)
    text = capsys.readouterr().out
    assert f"{name}: " in text and says in text and "cpu:" in text  # the others still listed
    assert main(["variants", "--json", "-"]) in (0, None)
    rows = {b["name"]: b for b in json.loads(capsys.readouterr().out)["backends"]}
    assert says in rows[name]["error"] and rows["cpu"]["variants"]


def test_an_entry_point_value_that_names_no_module_says_so(tmp_path, monkeypatch, fresh_registry):
    from plugin_sources import install_fake_plugins

    install_fake_plugins(tmp_path, monkeypatch, fresh_registry, ("pg-badvalue", "pg_badvalue_mod", "x = 1\n",
                                                               {"badvalue": "pg_badvalue_mod B"}))
    info = {i.name: i for i in polygemm.backends()}["badvalue"]
    assert not info.available
    assert "entry point value 'pg_badvalue_mod B' is not 'module' or 'module:attribute'" in info.reason
    assert "NoneType" not in info.reason


def test_the_catalog_for_an_older_gpu_leaves_out_the_helpers_it_cannot_build():
    """`polygemm compile --arch sm_75` (a T4) had failed on mma_peak_probe, which needs sm_80, though every variant
    built: the helpers say the oldest architecture they build for."""
    from polygemm.apps.compile import jobs

    stems = {sm: {j.source.stem for j in jobs([sm])} for sm in (70, 75, 80, 90)}
    assert "ldmatrix_probe" not in stems[70] and "mma_peak_probe" not in stems[70]
    assert "ldmatrix_probe" in stems[75] and "mma_peak_probe" not in stems[75]
    assert {"ldmatrix_probe", "mma_peak_probe"} <= stems[80] and {"ldmatrix_probe", "mma_peak_probe"} <= stems[90]
    assert "copy_scale" in stems[70]  # the utility kernels build everywhere


def test_a_device_from_the_environment_is_told_to_a_cli_user_as_device_option(monkeypatch, capsys):
    from polygemm.apps.cli import main

    monkeypatch.setenv("POLYGEMM_DEVICE", "gpu")
    assert main(["gemm", "--shape", "4x4x4"]) == 2
    err = capsys.readouterr().err
    assert "$POLYGEMM_DEVICE='gpu'" in err and "pass --device" in err and "device=," not in err


def test_the_kernel_cache_expands_a_tilde_and_names_the_file_in_the_way(tmp_path, monkeypatch):
    from polygemm.backends.cuda.compiler import cache_dir
    from polygemm.errors import BackendUnavailableError

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("POLYGEMM_CACHE_DIR", "~/kc")  # as a .env file or a Dockerfile's ENV writes it
    assert cache_dir() == tmp_path / "kc" / "cubin" and not (tmp_path / "~").exists()
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("POLYGEMM_CACHE_DIR", str(tmp_path / "afile" / "sub"))
    with pytest.raises(BackendUnavailableError, match=rf"{tmp_path / 'afile'} is a file"):
        cache_dir()


def test_compile_names_an_architecture_given_to_only_as_one(capsys):
    from polygemm.apps.cli import main

    try:
        rc = main(["compile", "--only", "cm_v01_naive", "sm_90"])
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and "--only sm_90: that is an architecture; pass it with --arch (--arch sm_90)" in err
    assert "choose from" not in err


def test_an_out_whose_matrices_overlap_is_refused_and_left_untouched():
    """An as_strided out whose batch matrices share rows had been written, each matrix racing the others (608 of 960
    elements wrong on the GPU, inconsistent on the CPU); two matrices interleaved without sharing are fine."""
    from numpy.lib.stride_tricks import as_strided

    from polygemm.errors import ArgumentError

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((3, 20, 12)).astype(np.float32), rng.standard_normal((12, 16)).astype(np.float32)
    buf = np.full(20 * 16 + 2 * 16, 7.0, np.float32)
    out = as_strided(buf, (3, 20, 16), (16 * 4, 16 * 4, 4))
    with pytest.raises(ArgumentError, match="out's elements overlap in memory"):
        polygemm.gemm(a, b, out=out, device="cpu")
    assert (buf == 7.0).all()
    side_by_side = np.zeros((20, 32), np.float32)
    two = as_strided(side_by_side, (2, 20, 16), (16 * 4, 32 * 4, 4))  # matrix 1 in columns 16..31: no element shared
    assert polygemm.gemm(a[:2], b, out=two, device="cpu") is two
    np.testing.assert_allclose(side_by_side[:, 16:], a[1] @ b, rtol=1e-5, atol=1e-5)


def test_auto_takes_a_variant_spelling_the_backend_parses_itself(monkeypatch):
    """device='auto' checked variant names against the static tables only: cuda's "rung:split_k=8", which
    device='cuda' runs, was refused as "cuda: has no variant ..." (a GPU user's probe). A backend whose get_variant
    takes the name is now asked."""
    be = polygemm.get_backend("cpu")
    plain = type(be).get_variant

    def get_variant(self_or_name, name=None):  # "blas:fast" spelled as the cuda backend spells its splits
        name = self_or_name if name is None else name
        return plain(be, name.partition(":")[0] if name.startswith("blas:") else name)

    monkeypatch.setattr(be, "get_variant", get_variant)
    a = np.ones((3, 4), np.float32)
    got = polygemm.gemm(a, a.T, variant="blas:fast")
    np.testing.assert_array_equal(got, a @ a.T)
    with pytest.raises(PolygemmError, match="has no variant 'nope:fast'"):
        polygemm.gemm(a, a.T, variant="nope:fast")


def test_a_failed_split_launch_reports_the_launchs_error_not_the_release():
    """A split-K launch refused in a CUDA graph capture had been reported as "cuMemFreeAsync failed: ... invalidated"
    (the scratch's release, in a finally, replaced the launch's own error). The workspace is still given back."""
    from polygemm.backends.cuda.launch import PreparedLaunch, SplitLaunch
    from polygemm.errors import DeviceError

    released = []

    def go(buf, stream):
        raise DeviceError("launching k cooperatively failed: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")

    class Runtime:
        def release(self, ptr, stream):
            released.append(ptr)
            raise DeviceError("cuMemFreeAsync failed: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")

    launch = PreparedLaunch.__new__(PreparedLaunch)
    launch._go, launch.rt = go, Runtime()
    with pytest.raises(DeviceError, match="launching k cooperatively failed"):
        launch._launch_split(SplitLaunch(b"", 1234, 7, True), 7)
    assert released == [1234]
