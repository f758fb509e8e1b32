"""Shared fixtures: fresh random data (seed printed on failure) and registry isolation."""

from __future__ import annotations

import secrets

import numpy as np
import pytest

import polygemm.registry as registry


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    seed = secrets.randbits(32)
    request.node.user_properties.append(("seed", seed))
    print(f"random seed {seed}")
    return np.random.default_rng(seed)


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch):
    """Rediscover backends for the test and again afterwards (plugins on sys.path change)."""
    registry.refresh()
    yield registry
    registry.refresh()
