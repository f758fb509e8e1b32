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


def run_concurrently(work, threads: int = 8) -> list[str]:
    """Run ``work(i)`` in ``threads`` threads at once; return each failure as text."""
    import threading

    errors: list[str] = []

    def wrap(i: int) -> None:
        try:
            work(i)
        except Exception as exc:  # report, do not hang the other threads
            errors.append(f"thread {i}: {type(exc).__name__}: {exc}")

    pool = [threading.Thread(target=wrap, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return errors
