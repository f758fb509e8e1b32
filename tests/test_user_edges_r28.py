"""Review round 28: what a user sees when a name they passed is long.

A device or variant name is quoted in the error through ``short_repr``: a 300-character
``variant=`` had been quoted whole, twice (the backend's reason repeated it), in a 955-character
message."""

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
    assert len(text) < 600, text
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
