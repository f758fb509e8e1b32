"""Which library an operand belongs to.

An operand's kind is its library (``numpy``, ``cupy``, ``torch``, ``jax``, ``pycuda``, ...),
read from the type's module. Python lists and scalars count as NumPy. One call takes one kind:
CuPy ``a`` with a torch ``b`` is refused, naming both. An operand's array namespace is read
with ``array-api-compat``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ArgumentError

__all__ = ["kind_of", "common_kind", "KNOWN_KINDS", "type_name", "namespace"]

_HOSTLIKE = ("numpy", "builtins")

def kind_of(obj: Any) -> str:
    """The library ``obj`` belongs to (``"numpy"`` for NumPy arrays, lists and scalars)."""
    if obj is None or isinstance(obj, np.ndarray):
        return "numpy"
    root = type(obj).__module__.split(".", 1)[0]
    if root in ("jaxlib", "jax"):
        return "jax"
    return "numpy" if root in _HOSTLIKE else root


#: libraries whose arrays polygemm returns in kind; arrays of others never conflict
KNOWN_KINDS = ("numpy", "cupy", "torch", "jax", "pycuda", "dask")


def common_kind(operands: list[tuple[str, Any]]) -> str:
    """The one kind of the given ``(name, object)`` operands; ArgumentError naming both
    when two known libraries differ (mixing them would leave the result's kind a guess).
    Objects of other libraries (device arrays exposing only an interface) take no side."""
    kinds = [(name, kind_of(obj), obj) for name, obj in operands if obj is not None]
    known = [k for k in kinds if k[1] in KNOWN_KINDS]
    if not known:
        return kinds[0][1]
    kinds = known
    first = kinds[0]
    for name, kind, obj in kinds[1:]:
        if kind != first[1]:
            raise ArgumentError(
                f"{first[0]} is a {type_name(first[2])} and {name} a {type_name(obj)}: pass operands of one library "
                f"(convert one, e.g. with {first[1]}'s asarray / from_dlpack)"
            )
    return first[1]


def type_name(obj: Any) -> str:
    t = type(obj)
    return f"{t.__module__.split('.', 1)[0]}.{t.__name__}" if t.__module__ not in _HOSTLIKE else t.__name__


def namespace(like: Any) -> Any:
    """``like``'s array namespace (None: a library array-api-compat does not know). Without
    array-api-compat (a core dependency, missing only where polygemm is used from a source tree
    put on the path by hand) this raises rather than hand back a pycuda array for a CuPy or
    torch operand."""
    try:
        from array_api_compat import array_namespace
    except ImportError as exc:
        raise ImportError(f"polygemm returns {kind_of(like)} results of {type(like).__name__} "
                          "operands through array-api-compat, a dependency of polygemm that is not installed here: "
                          "pip install array-api-compat (or install polygemm with pip)") from exc
    try:
        return array_namespace(like)
    except TypeError:
        return None
