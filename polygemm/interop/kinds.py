"""Which library an operand belongs to.

An operand's kind is its library (``numpy``, ``cupy``, ``torch``, ``jax``, ``pycuda``, ...),
read from the type's module; a subclass of a torch tensor or a CuPy array defined elsewhere (in the user's own
code) is of its base's library. Python lists and scalars count as NumPy. One call takes one kind:
CuPy ``a`` with a torch ``b`` is refused, naming both, and so is an array of an array-API library
polygemm does not know by name (``array_api_strict``) beside a NumPy array or a list. An operand's
array namespace is read with ``array-api-compat``.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ..errors import ArgumentError

__all__ = ["kind_of", "common_kind", "takes_side", "stood_for", "Foreign", "foreign_c", "KNOWN_KINDS", "type_name", "namespace"]

_HOSTLIKE = ("numpy", "builtins")

def kind_of(obj: Any) -> str:
    """The library ``obj`` belongs to (``"numpy"`` for NumPy arrays, lists and scalars; ``"torch"`` for a subclass
    of ``torch.Tensor`` wherever it is defined)."""
    if obj is None or isinstance(obj, np.ndarray):
        return "numpy"
    root = type(obj).__module__.split(".", 1)[0]
    if root in ("jaxlib", "jax"):
        return "jax"
    if root in _HOSTLIKE:
        return "numpy"
    if root not in KNOWN_KINDS:  # (after the module's name, which answers for the libraries' own classes at once)
        return _base_library(obj) or root
    return root


def _base_library(obj: Any) -> str:
    """The library whose array class ``obj``'s class derives from, when it is defined outside that library (``class
    Plain(torch.Tensor)`` in the user's module); "" for none. Only libraries already imported are asked: an object of
    one not imported cannot be its array."""
    for name, cls in (("torch", "Tensor"), ("cupy", "ndarray")):
        module = sys.modules.get(name)
        base = getattr(module, cls, None) if module is not None else None
        if isinstance(base, type) and isinstance(obj, base):
            return name
    return ""


#: libraries whose arrays polygemm returns in kind; arrays of others conflict only where they have an array
#: namespace (:func:`_takes_side`)
KNOWN_KINDS = ("numpy", "cupy", "torch", "jax", "pycuda", "dask")


class Foreign:
    """Memory of another library's array ``of`` offered to NumPy by ``__array_interface__``: the
    arrays NumPy makes of it keep this object, and so ``of`` and ``keep`` (the capsule that holds
    its memory), alive. :func:`common_kind` takes such an array as ``of``'s: matmul writes a vector
    ``out`` through NumPy's view of it, which stands for that ``out``."""

    def __init__(self, iface: dict, of: Any, keep: Any = None) -> None:
        self.__array_interface__ = iface
        self.of, self.keep = of, keep


def stood_for(obj: Any) -> Any:
    """The array of another library a NumPy array views through :class:`Foreign` (``obj`` itself
    for any other)."""
    base = obj.base if isinstance(obj, np.ndarray) else None
    while isinstance(base, np.ndarray):
        base = base.base
    return base.of if isinstance(base, Foreign) else obj


def takes_side(kind: str, obj: Any) -> bool:
    """Whether an operand of ``kind`` sets the kind of a call's result: one of a known library, or
    an array of another library with a namespace of its own (array_api_strict's), whose results
    come back in kind. Objects offering only an interface (``__array__``, ``__array_interface__``,
    DLPack, a device interface) take no side."""
    return kind in KNOWN_KINDS or hasattr(obj, "__array_namespace__")


def common_kind(operands: list[tuple[str, Any]]) -> str:
    """The one kind of the given ``(name, object)`` operands; ArgumentError naming both
    when two libraries whose results come back in kind differ (known ones, or array-API ones:
    mixing them would leave the result's kind a guess). Objects of other libraries (device arrays
    exposing only an interface) take no side."""
    given = [(name, stood_for(obj)) for name, obj in operands if obj is not None]
    kinds = [(name, kind_of(obj), obj) for name, obj in given]
    known = [k for k in kinds if takes_side(k[1], k[2])]
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


def foreign_c(a: Any, b: Any, c: Any) -> bool:
    """Whether ``c`` is of another library than ``a`` and ``b``, which are of one, both libraries taking a side
    (:func:`_takes_side`: a Python float, a list or a NumPy array beside torch tensors or array_api_strict arrays):
    the one-library refusal is what holds for it, before its shape or dtype, whose hints would name its own library's
    ways. dask on either side is left to its own refusal (polygemm.dask.gemm)."""
    kind = kind_of(a)
    other = kind_of(c)
    return other != kind and kind == kind_of(b) and takes_side(kind, a) and takes_side(other, c) \
        and "dask" not in (kind, other)


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
