"""Backend discovery through entry points: built-ins, plugins, availability and its reasons."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import polygemm as pg
from polygemm.errors import ArgumentError, ArgumentTypeError, BackendUnavailableError
from polygemm.testing import assert_close, run_conformance

from tests.helpers import BROKEN, PLUGIN, REPO_ROOT
from tests.plugin_sources import BROKEN_BASE, install_fake_distribution, install_fake_plugins


PROBE_FAILS = """
from polygemm.backend import Backend
class Flaky(Backend):
    name = "flaky"
    def probe(self):
        raise OSError("driver version 1.0 is too old")
    def variants(self):
        return ()
    def plan(self, problem, variant="auto"):
        raise AssertionError
    def run(self, plan):
        raise AssertionError
"""


@pytest.fixture
def plugins(tmp_path, monkeypatch, fresh_registry):
    install_fake_distribution(tmp_path, "pg_double", "pg_double_plugin", PLUGIN, {"double": "pg_double_plugin:DoubleBackend"})
    install_fake_distribution(tmp_path, "pg_broken", "pg_broken_plugin", BROKEN, {"broken": "pg_broken_plugin:Nothing"})
    install_fake_distribution(tmp_path, "pg_flaky", "pg_flaky_plugin", PROBE_FAILS, {"flaky": "pg_flaky_plugin:Flaky"})
    monkeypatch.syspath_prepend(str(tmp_path))
    fresh_registry.refresh()
    yield tmp_path
    for mod in ("pg_double_plugin", "pg_broken_plugin", "pg_flaky_plugin"):
        sys.modules.pop(mod, None)


RENAMED = PLUGIN.replace('name = "double"', 'name = "something_else"')


VENDOR_ONLY = """
from polygemm.backend import Availability, Backend, Variant

class VendorOnly(Backend):
    name = "vendoronly"
    priority = 360
    def probe(self):
        return Availability(True)
    def variants(self):
        return (Variant("lib", ("float32",), "a vendor library", auto=False, vendor=True),)
    def plan(self, problem, variant="auto"):
        raise AssertionError("auto must not pick a backend without auto variants")
    def run(self, plan):
        raise AssertionError
"""


ROOT = REPO_ROOT


SLOW = BROKEN_BASE + """
import time
class B(Base):
    priority = 600  # above every built-in: device="auto" would take it once it answers
    def probe(self):
        time.sleep(8)
        return Availability(True)
"""


DRIVER = """
import time, numpy as np, polygemm as pg
a = np.ones((2, 3), np.float32)
t0 = time.monotonic()
r = pg.gemm(a, a.T)
print("ELAPSED", time.monotonic() - t0)
plan = pg.last_plan()
t1 = time.monotonic()
pg.gemm(np.ones((3, 4), np.float32), np.ones((4, 5), np.float32))  # a new shape plans again: no second wait
print("AGAIN", time.monotonic() - t1)
print("BACKEND", plan.backend)
print("PASSED", dict(plan.candidates).get("slowprobe", "-"))
infos = {i.name: i for i in pg.backends()}  # waits for the probe, as `polygemm info` does
print("INFO", infos["slowprobe"].available)
"""


def _ones(*shape, dtype=np.float32):
    return np.ones(shape, dtype)


def _operands(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)


def test_builtins_listed():
    infos = {i.name: i for i in pg.backends()}
    assert {"cpu", "cuda", "musa"} <= set(infos)
    assert infos["cpu"].available and infos["cpu"].priority == 0
    assert infos["cuda"].priority == 500 and infos["musa"].priority == 400
    for i in infos.values():
        assert i.available or i.reason  # unavailable always says why


def test_import_is_lazy():
    # ml_dtypes' import is most of the cost of importing polygemm: only bfloat16 needs it
    code = ("import sys, polygemm; assert not {'pycuda', 'cffi', 'ml_dtypes'} & set(sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_bfloat16_by_name_before_ml_dtypes_is_imported():
    # NumPy knows the name "bfloat16" only once ml_dtypes is imported; polygemm imports it when a
    # name asks for it, so a user (or the command line) naming the dtype first is understood
    code = textwrap.dedent("""
        import sys, numpy as np, polygemm as pg
        from polygemm.core.dtypes import as_dtype, finfo, parse_dtype
        from polygemm.testing.bounds import accumulation_dtype
        assert "ml_dtypes" not in sys.modules
        assert parse_dtype("out_dtype", "bfloat16").name == "bfloat16"
        assert as_dtype("bfloat16").itemsize == 2 and float(finfo("bfloat16").eps) == 2.0 ** -7
        assert accumulation_dtype("bfloat16") == np.float32
        a = np.ones((3, 4), np.float32)
        try:
            pg.gemm(a, a.T, out_dtype="bfloat16")
        except pg.DTypeError as exc:
            assert "float32" in str(exc), exc
        else:
            raise AssertionError("float32 inputs into a bfloat16 result were taken")
        import ml_dtypes
        x = np.ones((3, 4), ml_dtypes.bfloat16)
        assert pg.gemm(x, x.T, device="cpu").dtype.name == "bfloat16"
        print("OK")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-3000:]
    r = subprocess.run([sys.executable, "-m", "polygemm", "bench", "--device", "cpu", "--dtype", "bfloat16", "--shapes", "8x8x8",
                        "--repeats", "1", "--no-progress"], capture_output=True, text=True)
    assert r.returncode == 0 and "8x8x8" in r.stdout, r.stderr[-3000:]


def test_plugin_discovered_and_auto_prefers_it(plugins, rng):
    infos = {i.name: i for i in pg.backends()}
    assert infos["double"].available and infos["double"].priority == 350
    a = rng.standard_normal((5, 4)).astype(np.float32)
    b = rng.standard_normal((4, 3)).astype(np.float32)
    plan = pg.explain(a, b, device="auto")
    unavailable = {i.name for i in pg.backends() if not i.available}
    if not ({"cuda", "musa"} - unavailable):  # no GPU backend outranks the plugin here
        assert plan.backend == "double"
    assert_close(pg.gemm(a, b, device="double"), a, b)
    # float64 is not the plugin's: auto passes it over, with the reason
    plan64 = pg.explain(a.astype(np.float64), b.astype(np.float64))
    assert plan64.backend == "cpu"
    why = dict(plan64.candidates)["double"]
    assert why.startswith("backend 'double' does not support dtype float64; it supports float32")


def test_plugin_passes_conformance(plugins):
    results = run_conformance("double", quick=True)
    fails = [r for r in results if r.status == "fail"]
    assert results and not fails, fails


def test_broken_plugin_is_listed_with_reason(plugins):
    infos = {i.name: i for i in pg.backends()}
    assert not infos["broken"].available
    assert "vendor runtime libfoo.so.3 not found" in infos["broken"].reason
    assert not infos["flaky"].available
    assert "driver version 1.0 is too old" in infos["flaky"].reason
    with pytest.raises(pg.BackendUnavailableError, match="libfoo.so.3"):
        pg.gemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), device="broken")
    with pytest.raises(pg.BackendUnavailableError, match="could not be loaded"):
        pg.get_backend("broken")
    # the rest of polygemm keeps working
    assert pg.gemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), device="cpu")[0, 0] == 2.0


def test_get_backend_unknown():
    with pytest.raises(pg.BackendUnavailableError, match="known devices"):
        pg.get_backend("nosuch")


def test_entry_point_name_is_the_backend_name(tmp_path, monkeypatch, without_gpu, fresh_registry, rng):
    install_fake_distribution(tmp_path, "pg_renamed", "pg_renamed_plugin", RENAMED, {"renamed": "pg_renamed_plugin:DoubleBackend"})
    install_fake_distribution(tmp_path, "pg_vendoronly", "pg_vendoronly_plugin", VENDOR_ONLY, {"vendoronly": "pg_vendoronly_plugin:VendorOnly"})
    monkeypatch.syspath_prepend(str(tmp_path))
    fresh_registry.refresh()
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    assert_close(pg.gemm(a, b, device="renamed"), a, b)
    assert pg.last_plan().backend == "renamed"
    plan = pg.explain(a, b)
    assert ("vendoronly", "no auto-selectable variant for float32") in plan.candidates
    for mod in ("pg_renamed_plugin", "pg_vendoronly_plugin"):
        sys.modules.pop(mod, None)


def test_failed_builtin_keeps_its_priority(monkeypatch, fresh_registry):
    monkeypatch.setitem(fresh_registry.discover._BUILTINS, "cuda", "polygemm_no_such_module:Backend")
    monkeypatch.setattr(fresh_registry.discover.metadata, "entry_points", lambda group: ())
    fresh_registry.refresh()
    info = {i.name: i for i in pg.backends()}["cuda"]
    assert not info.available and info.priority == 500 and "polygemm_no_such_module" in info.reason


def test_conformance_of_an_unregistered_backend_object():
    from polygemm.backends.cpu_ref import CpuReferenceBackend

    class Unregistered(CpuReferenceBackend):
        name = "unregistered"

    results = run_conformance(Unregistered(), dtypes=["float32"], quick=True)
    assert results and not [r for r in results if r.status == "fail"]


def test_cuda_colon_zero_is_cuda_and_other_indices_say_what_to_do(rng):
    from polygemm import registry

    assert registry.resolve_device(" CPU:0 ") == "cpu:0"
    assert registry.get_backend("cpu:0") is registry.get_backend("cpu")  # one device: index 0 is itself
    a = rng.standard_normal((3, 4)).astype(np.float32)
    assert pg.explain(a, a.T, device="cpu:0").backend == "cpu"
    with pytest.raises(pg.BackendUnavailableError, match=r"device 'cpu:1': backend 'cpu' has one device; use 'cpu'"):
        pg.gemm(a, a.T, device="cpu:1")
    cuda = {i.name: i for i in pg.backends()}["cuda"]
    if not cuda.available:
        with pytest.raises(pg.BackendUnavailableError, match="device 'cuda' is unavailable"):
            pg.gemm(a, a.T, device="cuda:0")


def test_unknown_device_suggests_the_nearest(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    for typo, near in (("cpux", "cpu"), ("cdua", "cuda"), ("mussa", "musa"), ("atuo", "auto")):
        with pytest.raises(pg.BackendUnavailableError, match=f"unknown device '{typo}' \\(did you mean '{near}'\\?\\); known devices"):
            pg.gemm(a, a.T, device=typo)
    with pytest.raises(pg.BackendUnavailableError) as exc:
        pg.get_backend("nosuch")
    assert "did you mean" not in str(exc.value)


def test_reason_is_one_short_line_and_details_hold_everything():
    from polygemm.registry import BackendInfo, one_line

    text = "libfoo not loaded; tried " + "; ".join(f"/opt/vendor{i}/lib64/deep/folder/libfoo.so: no such file" for i in range(8)) + "\nsee the docs"
    short = one_line(text)
    assert len(short) <= 120 and "\n" not in short and short.startswith("libfoo not loaded; tried")
    assert one_line("short enough") == "short enough"
    # a URL is never cut into a path's ".../tail": the user follows it whole (or the line is cut after it)
    url = "https://example.com/dl/libfoo/linux/x86_64/3.2"
    said = one_line(f"libfoo not found in /opt/vendor/lib64/deep/folder/libfoo.so; install it from {url} and retry it")
    assert url in said and ".../folder/libfoo.so" in said
    assert BackendInfo("x", True, "", 1, "s", None).detail == ""  # the new field has a default
    for info in pg.backends():
        assert len(info.reason) <= 120 and "\n" not in info.reason, info
        assert info.available or info.detail  # the whole text is kept


def test_unavailable_device_error_says_each_reason_once():
    missing = [i for i in pg.backends() if not i.available]
    if not missing:
        pytest.skip("every backend is available here")
    for info in missing:
        with pytest.raises(pg.BackendUnavailableError) as exc:
            pg.gemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), device=info.name)
        msg = str(exc.value)
        assert msg.count(info.reason) == 1 and "\n" not in msg, msg
        for other in missing:
            if other is not info:
                assert other.reason not in msg, msg
        assert info.detail in exc.value.details and "cpu: available" in exc.value.details


def test_probe_timeout_setting(monkeypatch):
    from polygemm import registry

    monkeypatch.setenv(registry.PROBE_TIMEOUT_ENV, "2.5")
    assert registry.probe_timeout() == 2.5
    for bad in ("", "zero", "-1", "nan"):
        monkeypatch.setenv(registry.PROBE_TIMEOUT_ENV, bad)
        assert registry.probe_timeout() == registry.discover.DEFAULT_PROBE_TIMEOUT


def test_public_name_helpers_other_modules_use():
    """split_index, lookup and locate_device: what cli, matrix, bench and dask ask of names."""
    from polygemm import registry
    from polygemm.errors import ArgumentError, BackendUnavailableError

    assert registry.split_index("cuda:1") == ("cuda", 1)
    assert registry.split_index("cuda:0") == ("cuda", 0)
    for whole in ("cuda", "cuda:01", "cuda: 1", "cuda:-1", ":1", "CUDA:x"):
        assert registry.split_index(whole) == (whole, None)
    assert registry.split_index("Dev:2") == ("Dev", 2)  # text only: no case folding, no lookup
    assert registry.split_index("nosuch:3") == ("nosuch", 3)

    assert registry.lookup("cpu") == ("cpu", None)
    assert registry.lookup("CPU:1") == ("cpu", 1)
    assert registry.lookup("nosuch:1") == (None, None)
    with pytest.raises(ArgumentError, match=r"e.g. 'cpu:1'; got '01', see here"):
        registry.lookup("cpu:01", ", see here")

    info, index, note = registry.locate_device("cpu:0")
    assert (info.name, info.available, index, note) == ("cpu", True, 0, "")
    with pytest.raises(BackendUnavailableError, match="did you mean 'cpu'"):
        registry.locate_device("cpy")
    with pytest.raises(ArgumentError, match="'auto' is not a backend"):
        registry.locate_device("auto")


def test_locate_device_notes_the_environment(monkeypatch):
    from polygemm import registry
    from polygemm.errors import BackendUnavailableError

    monkeypatch.setenv("POLYGEMM_DEVICE", "cpu")
    info, index, note = registry.locate_device(None)
    assert (info.name, index) == ("cpu", None) and "$POLYGEMM_DEVICE='cpu'" in note
    assert registry.locate_device("cpu")[2] == ""  # passed explicitly: no note
    monkeypatch.setenv("POLYGEMM_DEVICE", "cpy")
    with pytest.raises(BackendUnavailableError, match=r"did you mean 'cpu'.*\$POLYGEMM_DEVICE='cpy'"):
        registry.locate_device(None)


def test_two_fake_distributions_with_hyphenated_names_are_both_discovered(tmp_path, monkeypatch, fresh_registry):
    # a hyphenated distribution's .dist-info folder is named with "_", as pip names it (importlib.metadata reads the
    # text before a hyphen as the distribution's name), so two such fakes do not hide each other
    from tests.plugin_sources import THIRD_PARTY_BASE

    install_fake_plugins(tmp_path, monkeypatch, fresh_registry,
                         ("polygemm-first", "pg_first_plugin", THIRD_PARTY_BASE, {"first": "pg_first_plugin:Good"}),
                         ("polygemm-second", "pg_second_plugin", THIRD_PARTY_BASE, {"second": "pg_second_plugin:Good"}))
    try:
        found = {info.name: info for info in pg.backends()}
        assert found["first"].available and found["second"].available
    finally:
        for mod in ("pg_first_plugin", "pg_second_plugin"):
            sys.modules.pop(mod, None)


def test_auto_does_not_wait_for_a_slow_probe(tmp_path):
    install_fake_distribution(tmp_path, "pg_slowprobe", "pg_slowprobe_plugin", SLOW, {"slowprobe": "pg_slowprobe_plugin:B"})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("POLYGEMM_DEVICE", None)
    env.pop("POLYGEMM_PROBE_TIMEOUT", None)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(DRIVER)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    out = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert float(out["ELAPSED"]) < 6, r.stdout  # a few seconds at most, not the probe's 8 (nor the 30 s timeout)
    assert float(out["AGAIN"]) < 1.5, r.stdout  # waited for once, not at every new plan
    assert out["BACKEND"] != "slowprobe"
    assert "probe still running" in out["PASSED"], r.stdout
    assert out["INFO"] == "True", r.stdout  # the probe went on and answered
    assert time.monotonic() - t0 < 60


def test_get_backend_of_a_non_string_is_a_type_error_as_device_of_one_is():
    # get_backend(3) raises ArgumentTypeError (also a TypeError, as Python raises for an argument of the wrong kind),
    # as device=3, variant=None and alpha=None do
    a = _ones(2, 2)
    for call in (lambda: pg.get_backend(3), lambda: pg.get_backend(None), lambda: pg.gemm(a, a, device=3)):
        with pytest.raises(ArgumentTypeError) as info:
            call()
        assert isinstance(info.value, TypeError) and isinstance(info.value, ArgumentError)
        assert "'cpu', 'cuda', 'cuda:1'" in str(info.value)
    with pytest.raises(ArgumentError, match="'auto' is not a backend") as info:  # a string, of the wrong value
        pg.get_backend("auto")
    assert not isinstance(info.value, TypeError)


def test_get_backend_quotes_a_large_value_cut_short():
    # get_backend([...]) quoted the list whole
    with pytest.raises(ArgumentTypeError, match=r"get_backend takes a backend name.*\.\.\. \(list\)") as info:
        pg.get_backend(["cpu"] * 10000)
    assert len(str(info.value)) < 300


@pytest.mark.parametrize("value", ["bogus", "cpu:1", "cuda"])
def test_a_bad_polygemm_device_is_named_as_coming_from_the_environment(monkeypatch, value, rng):
    # the error names $POLYGEMM_DEVICE to a caller who passed no device at all
    monkeypatch.setenv("POLYGEMM_DEVICE", value)
    a, b = _operands(rng)
    if value == "cuda" and {i.name: i for i in pg.backends()}["cuda"].available:
        pytest.skip("cuda is available here")
    with pytest.raises(BackendUnavailableError, match=r"\$POLYGEMM_DEVICE='" + value):
        pg.gemm(a, b)
    with pytest.raises(BackendUnavailableError) as info:  # an explicit device is the caller's own: no such note
        pg.gemm(a, b, device=value)
    assert "POLYGEMM_DEVICE" not in str(info.value)


def test_get_backend_of_a_non_name_is_an_argument_error():
    # get_backend(None) is an argument error, not "unknown device 'None'" (a RuntimeError), as if a backend were
    # missing
    for bad in (None, 1, b"cpu"):
        with pytest.raises(ArgumentError, match="backend name"):
            pg.get_backend(bad)  # type: ignore[arg-type]


def test_backends_of_one_priority_are_ordered_by_name_whatever_its_case(tmp_path, monkeypatch, fresh_registry):
    # names are one device whatever their case: "Zdev" is not taken ahead of "adev" for its capital letter
    install_fake_distribution(tmp_path, "pg_zcase", "pg_zcase_plugin", RENAMED.replace("something_else", "Zdev"),
                              {"Zdev": "pg_zcase_plugin:DoubleBackend"})
    install_fake_distribution(tmp_path, "pg_acase", "pg_acase_plugin", RENAMED.replace("something_else", "adev"),
                              {"adev": "pg_acase_plugin:DoubleBackend"})
    monkeypatch.syspath_prepend(str(tmp_path))
    fresh_registry.refresh()
    names = [i.name for i in fresh_registry.backends()]
    assert names.index("adev") < names.index("Zdev")
    for mod in ("pg_zcase_plugin", "pg_acase_plugin"):
        sys.modules.pop(mod, None)


def test_polygemm_backends_takes_the_wait_its_registry_function_takes_and_refuses_a_bad_one():
    assert [i.name for i in pg.backends(wait=0)] == [i.name for i in pg.registry.backends(wait=0)]
    with pytest.raises(ArgumentTypeError, match="wait must be a number of seconds"):
        pg.backends(wait="1")
    with pytest.raises(ArgumentError, match="got -1"):
        pg.registry.backends(wait=-1)
