"""Edges a NumPy user runs into on the CPU, second round: numpy.matmul's scalars and vectors
beside lists, and the command line's one-line errors."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm as pg


@pytest.mark.parametrize("a, b, name", [
    (np.array(2.0, np.float32), np.ones(3, np.float32), "a"),  # a 0-D array beside a vector
    (np.ones(3, np.float32), np.float32(2.0), "b"),  # a NumPy scalar beside a vector
    (2.0, np.ones(3, np.float32), "a"),  # a Python float
    (np.float32(2.0), np.float32(3.0), "a"),
    (np.ones((2, 3), np.float32), np.array(1.0, np.float32), "b"),
])
def test_matmul_refuses_scalars_as_numpy_does(a, b, name):
    """numpy.matmul raises ValueError for a 0-D operand; so does polygemm.matmul (a ShapeError
    naming it), not an IndexError or AttributeError from inside."""
    with pytest.raises(ValueError):
        np.matmul(a, b)
    with pytest.raises(pg.ShapeError, match=rf"^{name} is a scalar \(0-D"):
        pg.matmul(a, b, device="cpu")


@pytest.mark.parametrize("a, b, named", [
    (np.ones(3, np.float32), [[1.0, 2.0], [3.0, 4.0]], "a, a vector of 3"),
    ([[1.0, 2.0, 3.0]], np.ones(2), "b, a vector of 2"),
])
def test_matmul_vector_mismatch_beside_a_list(a, b, named):
    """A vector beside a list matrix of the wrong size is a ShapeError naming the vector (the
    message had read the list's .shape: AttributeError)."""
    with pytest.raises(pg.ShapeError, match=named):
        pg.matmul(a, b, device="cpu")
