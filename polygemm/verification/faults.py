"""Faults injected into verified products (:func:`polygemm.testing.inject_fault` holds them): one
element of a product's result set to a value, or one bit of it flipped, after the product is
computed and before it is checked, so a pipeline's handling of a failed check can be tested."""

from __future__ import annotations

import math
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.complex_form import part_dtype
from ..core.dtypes import as_dtype, finfo
from ..errors import ArgumentError
from ..interop.torch import torch_from_host, torch_host_array

__all__ = ["Fault", "FaultOutsideResult", "active_faults", "add_fault", "remove_fault", "corrupt"]

_UINTS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@dataclass(eq=False)  # each fault is its own, however alike two are: removed by identity
class Fault:
    """Set ``result[batch + (row, col)]`` to ``value``, or flip its ``bit`` (0 = least significant), in
    ``times`` verified products (None: every one while it is active); ``hits`` counts those corrupted, a product
    whose element the fault leaves equal to what it was (the value it held already, a NaN for a NaN) being neither
    corrupted nor counted, so the fault stays due for the next. ``owner``: the thread that made it, whose products it
    does not fit are told so (other threads' are passed over)."""

    row: int
    col: int
    value: float | complex | int | None = None
    bit: int | None = None
    batch: tuple[int, ...] = ()
    times: int | None = None
    hits: int = 0
    owner: int = field(default_factory=threading.get_ident)


_lock = threading.Lock()
_faults: list[Fault] = []


def active_faults() -> bool:
    """Whether any fault waits to be injected (read by every verified call; a list's truth, no lock)."""
    return bool(_faults)


def add_fault(fault: Fault) -> None:
    with _lock:
        _faults.append(fault)


def remove_fault(fault: Fault) -> None:
    with _lock:
        if fault in _faults:
            _faults.remove(fault)


def _fits(f: Fault, shape: tuple[int, ...]) -> bool:
    """Whether ``f``'s element lies inside a result of ``shape``."""
    idx = tuple(f.batch) + (f.row, f.col)
    return len(idx) == len(shape) and all(-n <= i < n for i, n in zip(idx, shape))


def _due(shape: tuple[int, ...]) -> list[Fault]:
    """The faults due to a result of ``shape``, each counted (reserved) under the lock: another thread's fault only
    where its element lies inside this result (one it cannot take, reserved and given back, would have let its own
    thread's product pass it by in between); this thread's whatever the shape (it is told of one that does not fit)."""
    me = threading.get_ident()
    with _lock:
        due = [f for f in _faults if (f.times is None or f.hits < f.times) and (f.owner == me or _fits(f, shape))]
        for f in due:
            f.hits += 1
        return due


def _flip_host(x: np.ndarray, idx: tuple[int, ...], bit: int) -> None:
    """Flip ``bit`` of element ``idx`` of ``x`` in its storage (a complex128's 128 bits: its real part's 64, then
    its imaginary part's)."""
    raw = bytearray(np.asarray(x[idx]).tobytes())
    raw[bit // 8 if sys.byteorder == "little" else len(raw) - 1 - bit // 8] ^= 1 << (bit % 8)
    x[idx] = np.frombuffer(bytes(raw), dtype=x.dtype)[0]


#: the libraries whose arrays a fault is written into in place (NumPy's too; pycuda's and MusaArray through .set)
_WRITTEN_IN_PLACE = ("cupy", "torch")


class FaultOutsideResult(ArgumentError, IndexError):
    """A fault the result cannot take: its element outside the result, or its bit outside the element. An
    ArgumentError, as the rest of inject_fault's misuse is, and an IndexError, as NumPy's for an index outside an array."""


def corrupt(result: Any, to_host: Any = None, to_device: Any = None) -> Any:
    """Apply the faults due to ``result`` (a NumPy array, a CuPy array or torch tensor, or another device
    array that ``to_host``/``.set`` move) and return the result to check: ``result`` itself, written in place, or, for
    a device array with no ``.set`` (a plugin's), ``to_device`` of its corrupted values (the product's own result,
    never the caller's ``out``, is what is corrupted). A fault ``result`` cannot take (its element outside the result, a
    value or bit its dtype does not hold) raises FaultOutsideResult or ArgumentError in the thread that made the fault; another
    thread's product passes it over (faults apply to every thread's calls: a server's other requests go on)."""
    if not hasattr(result, "set") and type(result).__module__.partition(".")[0] not in _WRITTEN_IN_PLACE \
            and not isinstance(result, np.ndarray) and to_host is not None and to_device is not None:
        # a plugin's array, which polygemm has no way to write (no .set, perhaps no shape or dtype): its values
        # corrupted on the host, handed to the check anew
        return to_device(corrupt(np.array(to_host(result))))
    due = _due(tuple(result.shape))
    me = threading.get_ident()
    for i, f in enumerate(due):
        try:
            if not _apply(f, result, to_host):  # the element holds what it held: nothing corrupted, not counted
                with _lock:
                    f.hits -= 1
        except (IndexError, ArgumentError):
            if f.owner != me:  # another thread's fault that this product cannot take: not this call's error
                with _lock:
                    f.hits -= 1
                continue
            with _lock:  # this fault and those after it changed nothing: not counted (hits counts changes)
                for g in due[i:]:
                    g.hits -= 1
            raise
        except BaseException:
            with _lock:
                for g in due[i:]:
                    g.hits -= 1
            raise
    return result


def _same(before: Any, after: Any) -> bool:
    """Whether an element (a Python scalar) is what it was: equal, or NaN where it was NaN, part by part for a complex
    one (a NaN's payload, or the sign of a zero, is no corruption a check could see in the value)."""
    def parts(v: Any) -> tuple[Any, ...]:
        return (v.real, v.imag) if isinstance(v, complex) else (v,)

    return all(x == y or (x != x and y != y) for x, y in zip(parts(before), parts(after)))


def _apply(f: Fault, result: Any, to_host: Any) -> bool:
    """Set or flip ``f``'s element of ``result`` (see :func:`corrupt`); whether that changed the element's value."""
    shape = tuple(result.shape)
    idx = tuple(f.batch) + (f.row, f.col)
    if len(idx) != len(shape) or any(not -s <= i < s for i, s in zip(idx, shape)):
        raise FaultOutsideResult(f"inject_fault: element {idx} is outside the result of shape {shape}")
    value = f.value
    if value is not None:
        _check_storable(value, result)
        if isinstance(value, complex) and not _dtype_name(result).startswith("complex"):
            value = value.real  # (no imaginary part: _check_storable refused one) stored as the real number it is
    if f.bit is not None and f.bit > 0 and _dtype_name(result) == "bool":
        raise FaultOutsideResult(f"inject_fault: bit={f.bit} of a bool result: its elements hold one bit, bit=0")
    if f.bit is not None and not 0 <= f.bit < 8 * _itemsize(result):
        raise FaultOutsideResult(f"inject_fault: bit={f.bit} is outside the result's {8 * _itemsize(result)}-bit elements")
    if isinstance(result, np.ndarray):
        before = result[idx].item()
        if f.bit is None:
            result[idx] = value
        else:
            _flip_host(result, idx, f.bit)
        return not _same(before, result[idx].item())
    module = type(result).__module__.partition(".")[0]
    if module in _WRITTEN_IN_PLACE and f.bit is None:
        before = result[idx].item()  # one element read back, to tell whether the fault changed it
        result[idx] = value
        return not _same(before, result[idx].item())
    if module == "torch":  # a tensor's bits through the host (bfloat16's too)
        host = torch_host_array(result).copy()
    else:  # a bit of a device array: through the host
        host = np.array(to_host(result) if to_host is not None else result.get())
    before = host[idx].item()
    if f.bit is None:
        host[idx] = value
    else:
        _flip_host(host, idx, f.bit)
    if _same(before, host[idx].item()):
        return False  # nothing to write back
    if module == "torch":
        result.copy_(torch_from_host(host))
    elif module == "cupy":
        result.set(host)
    else:  # pycuda and the like: moved as the elements' bits (bfloat16 has no buffer format)
        raw = _UINTS.get(host.dtype.itemsize)
        if raw is None or not hasattr(result, "view"):  # complex128: a buffer format of its own; a MusaArray: no views
            result.set(host)
        else:
            result.view(raw).set(host.view(raw))  # host in the device array's own memory order (np.array keeps it)
    return True


def _check_storable(value: float | complex | int, result: Any) -> None:
    """ArgumentError unless ``value`` lands in ``result``'s elements as given: an integer result
    would truncate 3.5 to 3 (or no fault at all where 3 is the right value), a real one drop an
    imaginary part, a float one turn a finite value past its largest into an infinity; NaN and
    infinities are refused by integers as NumPy refuses them."""
    name = _dtype_name(result)
    imag = value.imag if isinstance(value, complex) else 0.0
    real = value.real if isinstance(value, complex) else value if isinstance(value, int) else float(value)  # an int whole
    if imag != 0.0 and not name.startswith("complex"):
        raise ArgumentError(f"inject_fault: value={value!r} has an imaginary part; the result is {name}: pass a real value")
    if name.startswith(("float", "bfloat", "complex")):
        part = name if name == "bfloat16" else part_dtype(name).name
        if any(_rounds_to_infinity(v, part) for v in (real, imag)):
            raise ArgumentError(f"inject_fault: value={value!r} is past the {name} result's largest finite value "
                                f"({float(finfo(part).max):.4g}): it would be stored as an infinity; pass float('inf') "
                                f"for one")
        return
    if name == "bool":
        if real not in (0.0, 1.0):
            raise ArgumentError(f"inject_fault: value={value!r} is not a bool; the result is bool: pass 0 or 1 (or use bit=0)")
    elif name.startswith(("int", "uint")):
        info = np.iinfo(np.dtype(name))
        # an int compared as it is (an int64 result holds integers past float64's 53 bits), a float only when whole
        whole = value if isinstance(value, int) else int(real) if math.isfinite(real) and float(real).is_integer() else None
        if whole is None or not info.min <= whole <= info.max:
            raise ArgumentError(f"inject_fault: value={value!r} does not fit the {name} result exactly (it would not be "
                                f"stored as given); pass an integer from {info.min} to {info.max}")


def _rounds_to_infinity(value: float | int, dtype: str) -> bool:
    """Whether a finite ``value`` is stored in ``dtype`` as an infinity (past its largest finite value by more than
    rounding takes back)."""
    try:
        f = float(value)
    except OverflowError:  # an int past every float
        return True
    if not math.isfinite(f):
        return False
    with np.errstate(all="ignore"):
        return bool(np.isinf(np.asarray(f).astype(as_dtype(dtype))))


def _dtype_name(x: Any) -> str:
    """The name of ``x``'s dtype, torch's as NumPy names it (``torch.float32`` -> ``float32``)."""
    return str(getattr(x, "dtype", "")).removeprefix("torch.")


def _itemsize(x: Any) -> int:
    """Bytes an element of ``x`` (a NumPy, CuPy or pycuda array, or a torch tensor) takes."""
    return int(getattr(x, "itemsize", None) or getattr(x, "element_size", lambda: 4)())
