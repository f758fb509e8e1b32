"""A demanding user's edges, third round: plans (explain, last_plan), the registry's device
names, ``$POLYGEMM_DEVICE``. Each test failed before the fix it names."""

from __future__ import annotations

import copy
import pickle
import sys

import numpy as np
import pytest

import polygemm as pg
from polygemm.errors import ArgumentError, BackendUnavailableError
from test_registry import PLUGIN, install_fake_distribution, install_fake_plugins


def _operands(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)


def test_a_plugin_whose_entry_point_has_capitals_is_selected_by_its_name(tmp_path, monkeypatch, fresh_registry, rng):
    # device="MyDev" had said: unknown device 'mydev' (did you mean 'MyDev'?), naming itself
    install_fake_distribution(tmp_path, "pg_capitals", "pg_capitals_plugin", PLUGIN, {"MyDev": "pg_capitals_plugin:DoubleBackend"})
    monkeypatch.syspath_prepend(str(tmp_path))
    fresh_registry.refresh()
    a, b = _operands(rng)
    try:
        for name in ("MyDev", "mydev", "MYDEV", "MyDev:0"):
            np.testing.assert_allclose(pg.gemm(a, b, device=name), a @ b, rtol=1e-5, atol=1e-5)
            assert pg.last_plan().backend == "MyDev"
            assert pg.get_backend(name).name == "MyDev"
        monkeypatch.setenv("POLYGEMM_DEVICE", "MyDev")
        pg.gemm(a, b)
        assert pg.last_plan().backend == "MyDev"
        fresh_registry.check_known("mydev")  # what polygemm.dask.gemm checks when it builds its graph
    finally:
        sys.modules.pop("pg_capitals_plugin", None)


@pytest.mark.parametrize("value", ["bogus", "cpu:1", "cuda"])
def test_a_bad_polygemm_device_is_named_as_coming_from_the_environment(monkeypatch, value, rng):
    # the error had said "unknown device 'bogus'" to a caller who passed no device at all
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
    # get_backend(None) had said "unknown device 'None'" (a RuntimeError), as if a backend were missing
    for bad in (None, 1, b"cpu"):
        with pytest.raises(ArgumentError, match="backend name"):
            pg.get_backend(bad)  # type: ignore[arg-type]


def test_last_plan_says_when_the_call_reused_a_cached_plan(rng):
    # last_plan() after a cache hit printed "planned for this call" (cached was always False)
    a, b = _operands(rng)
    pg.clear_plan_cache()
    pg.gemm(a, b)
    assert pg.last_plan().cached is False
    pg.gemm(a, b)
    plan = pg.last_plan()
    assert plan.cached is True and "reused from the plan cache" in str(plan)


def test_changing_a_returned_plan_changes_nothing_polygemm_runs(rng, without_gpu):
    # last_plan() was the cached plan itself: setting its variant changed what later calls ran;
    # explain()'s copy shared its lists with the cache (a note appended showed in later plans)
    a, b = _operands(rng)
    pg.clear_plan_cache()
    pg.gemm(a, b)
    mine = pg.last_plan()
    mine.variant, mine.private = "reference", False
    mine.notes.append("the user's note")
    explained = pg.explain(a, b)
    explained.candidates.clear()
    explained.layouts.clear()
    pg.gemm(a, b)
    again = pg.last_plan()
    assert again.variant == "blas" and "the user's note" not in again.notes
    assert again.candidates and again.layouts
    assert pg.explain(a, b).candidates == again.candidates


def test_a_plan_from_explain_cannot_be_run_and_says_so(rng):
    # backend.run(explain(...)) had raised AttributeError: 'NoneType' object has no attribute 'astype'
    a, b = _operands(rng)
    plan = pg.explain(a, b, device="cpu")
    with pytest.raises(ArgumentError, match=r"holds no operands.*polygemm\.gemm"):
        pg.get_backend(plan.backend).run(plan)
    pg.gemm(a, b, device="cpu")
    with pytest.raises(ArgumentError, match="holds no operands"):
        pg.get_backend("cpu").run(pg.last_plan())


def test_plans_print_pickle_and_copy(rng):
    a, b = _operands(rng)
    plan = pg.explain(a, b, device="cpu")
    for other in (pickle.loads(pickle.dumps(plan)), copy.deepcopy(plan)):
        assert str(other) == str(plan) and other.problem.shape_str() == "4x3x5"


def test_plugin_names_equal_up_to_case_clash_as_equal_names_do(tmp_path, monkeypatch, fresh_registry, rng):
    # a plugin named "CPU" had been registered beside the built-in cpu: get_backend("CPU") gave the
    # plugin while device="CPU" ran the built-in; two plugins "MyDev" and "mydev" were both kept
    install_fake_plugins(tmp_path, monkeypatch, fresh_registry,
                         ("pg_shout", "pg_shout_plugin", PLUGIN, {"CPU": "pg_shout_plugin:DoubleBackend"}),
                         ("pg_first", "pg_first_plugin", PLUGIN, {"MyDev": "pg_first_plugin:DoubleBackend"}),
                         ("pg_second", "pg_second_plugin", PLUGIN, {"mydev": "pg_second_plugin:DoubleBackend"}))
    try:
        infos = {i.name: i for i in pg.backends()}
        assert "CPU" not in infos and "clashes with the built-in 'cpu'" in infos["CPU@pg-shout"].reason
        assert pg.get_backend("CPU") is infos["cpu"].backend
        kept = [n for n in infos if n.lower() == "mydev"]
        assert len(kept) == 1
        parked = [i for n, i in infos.items() if n.lower().startswith("mydev@")]
        assert len(parked) == 1 and "already taken" in parked[0].reason and not parked[0].available
        a, b = _operands(rng)
        pg.gemm(a, b, device="MYDEV")
        assert pg.last_plan().backend == kept[0]
    finally:
        for mod in ("pg_shout_plugin", "pg_first_plugin", "pg_second_plugin"):
            sys.modules.pop(mod, None)


def test_matrix_takes_backend_names_as_device_takes_them(capsys):
    # polygemm matrix --backends CPU said "unknown backend 'CPU'; known backends: cpu, ..."
    from polygemm.apps.cli import main

    assert main(["matrix", "--backends", "CPU", "--quick", "--dtypes", "float32", "--variants", "blas"]) == 0
    assert "\ncpu " in capsys.readouterr().out


def test_dask_c_of_unknown_chunk_sizes_says_so():
    # it had said "c must have the result's shape (4, 4) ...; got (nan, 4)"
    da = pytest.importorskip("dask.array")
    import polygemm.dask

    A = da.ones((4, 4), chunks=2)
    c = da.ones((4, 4), chunks=2)
    with pytest.raises(pg.ShapeError, match=r"c has unknown chunk sizes.*compute_chunk_sizes"):
        polygemm.dask.gemm(A, A, c[c[:, 0] > 0], beta=1.0)
