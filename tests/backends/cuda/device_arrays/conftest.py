"""Fixtures of the device-array tests: the cuda backend (or one skip reason for every test without a GPU),
and the array library each test runs with."""

from __future__ import annotations

import pytest

from tests.helpers import cuda_or_skip

from .support import CPL, LIBS, TL


@pytest.fixture(autouse=True)
def _cuda() -> None:
    """Every test here needs the cuda backend: without it, each skips with the backend's reason."""
    cuda_or_skip()


@pytest.fixture(params=["torch", "cupy"])
def L(request: pytest.FixtureRequest):
    """torch's or CuPy's arrays on cuda:0, behind ``support.Lib``; skipped where that library cannot use the GPU."""
    lib = TL if request.param == "torch" else CPL
    if lib is None:
        pytest.skip(f"{request.param} with CUDA is not usable here")
    return lib


@pytest.fixture
def torch_lib():
    if TL is None:
        pytest.skip("torch with CUDA is not usable here")
    return TL


@pytest.fixture
def cupy_lib():
    if CPL is None:
        pytest.skip("CuPy is not usable here")
    return CPL


@pytest.fixture
def both_libs():
    if TL is None or CPL is None:
        pytest.skip("needs both torch with CUDA and CuPy")


@pytest.fixture
def any_lib():
    if not LIBS:
        pytest.skip("neither torch with CUDA nor CuPy is usable here")
    return LIBS[0]
