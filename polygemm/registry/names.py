"""Device names as users write them: ``"cuda:1"``, ``torch.device``, ``$POLYGEMM_DEVICE``, and
what an unknown one probably meant. Text only: nothing here imports or probes a backend."""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

from ..core.text import short_repr
from ..errors import ArgumentError, ArgumentTypeError, UnknownDeviceError, did_you_mean

__all__ = ["split_index", "index_like", "entry_name", "lookup_in", "unknown_device", "name_hint", "from_env", "resolve_device",
           "device_arg_name", "ENV_DEVICE_WAY"]

#: the GPU backends a device="gpu" may mean, with whose GPUs they run on
_GPU_BACKENDS = {"cuda": "NVIDIA", "musa": "Moore Threads"}


def name_hint(name: str, known: list[str]) -> str:
    """What an unknown device or backend ``name`` probably meant, as " (...)", or "".

    "gpu" is no typo of "cpu" (the nearest name by spelling): a user asking for a GPU is told the
    GPU backends instead of "did you mean 'cpu'?"."""
    if name.strip().lower() in ("gpu", "gpus"):
        gpus = [f"{g!r} ({_GPU_BACKENDS[g]})" for g in _GPU_BACKENDS if g in known]
        if gpus:
            return f" (a GPU is {' or '.join(gpus)}; `polygemm info` says which is available here)"
    return did_you_mean([name.strip()], known)


def unknown_device(name: str, entries: Mapping[str, Any]) -> UnknownDeviceError:
    known = sorted(entries)
    return UnknownDeviceError(f"unknown device {short_repr(name)}{name_hint(name, known + ['auto'])}; known devices: {', '.join(known)} (or 'auto')")


#: a device index as torch.device writes one: ASCII digits, no sign, no spaces, no leading zeros
_INDEX = re.compile(r"0|[1-9][0-9]*")


#: what reads as a try at one (" 1", "01", "+1", "-1", a non-ASCII digit): refused, saying how to write it
_INDEX_LIKE = re.compile(r"\s*[+-]?\d+\s*")


def split_index(name: str) -> tuple[str, int | None]:
    """``name`` split into (base, device index): ``"cuda:1"`` -> ``("cuda", 1)``.

    The split is at the first ``:``, and only where what follows it is an index written as
    torch.device writes one (ASCII digits, no sign, no spaces, no leading zeros); any other
    name, ``"cuda"``, ``"cuda:01"`` or ``"cuda: 1"`` among them, comes back whole with None.
    Text only: it neither strips nor case-folds ``name``, nor asks whether ``base`` names a
    backend (:func:`lookup` does, and refuses a backend's index written otherwise).
    """
    base, sep, index = name.partition(":")
    if sep and base and _INDEX.fullmatch(index):
        return base, int(index)
    return name, None


def index_like(name: str) -> bool:
    """Whether ``name`` reads as ``backend:N``, the index written well or not (``"dev:01"``, ``"dev: 2"``)."""
    base, sep, index = name.partition(":")
    return bool(sep and base and _INDEX_LIKE.fullmatch(index))


def bad_index(name: str, base: str, index: str, note: str = "") -> ArgumentError:
    """The refusal of ``base:index`` whose index is not written as :data:`_INDEX` writes one."""
    try:
        value: int | None = int(index)
    except ValueError:  # a digit int() does not read ("²")
        value = None
    like = f"{base}:{value}" if value is not None and value >= 0 else f"{base}:0"
    return ArgumentError(f"device={short_repr(name)}: a device index is a whole number >= 0 written in ASCII digits without a sign, "
                         f"spaces or leading zeros (as torch.device writes it), e.g. {like!r}; got {index!r}{note}")


def entry_name(name: str, entries: Mapping[str, Any]) -> str | None:
    """The discovered backend ``name`` designates: the entry of that exact name, else the one
    entry equal to it up to case (device names are case-insensitive, as ``"CPU"`` is ``cpu``;
    a plugin's entry point may be named ``MyDev``); None when there is none."""
    if name in entries:
        return name
    folded = [n for n in entries if n.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


def lookup_in(name: str, entries: Mapping[str, Any], note: str = "") -> tuple[str | None, int | None]:
    """``name`` (``"cuda:1"`` included) as (entry name, device index); (None, None) when no
    discovered backend has that name. A backend's name with an index written otherwise
    (``"cpu:01"``, ``"cuda: 1"``) is an ArgumentError saying how to write it (``note`` appended)."""
    found = entry_name(name, entries)
    if found is not None:
        return found, None
    base, index = split_index(name)
    if index is None:
        base, _, text = name.partition(":")
        if index_like(name) and entry_name(base, entries) is not None:
            raise bad_index(name, base, text, note)
        return None, None
    found = entry_name(base, entries)
    return (found, index) if found is not None else (None, None)


def from_env(device: str | None) -> str:
    """A note for errors about the device when it came from ``$POLYGEMM_DEVICE`` (``device`` is
    None and the variable names one), else ""."""
    if device is not None:
        return ""
    raw = os.environ.get("POLYGEMM_DEVICE", "").strip()
    if not raw or raw.lower() == "auto":
        return ""
    return f" (the device comes from $POLYGEMM_DEVICE={raw!r}: unset it, or {ENV_DEVICE_WAY}, to choose another)"


#: how the note of :func:`from_env` tells a caller to name a device: the API's keyword (the CLI says --device)
ENV_DEVICE_WAY = "pass device="


def resolve_device(device: str | None) -> str:
    """``None`` means the ``POLYGEMM_DEVICE`` environment variable, else ``"auto"``.

    Returns the lower-cased name; ``"name:N"`` (as CuPy and PyTorch spell devices) names the
    backend's device N (``select`` and ``get_backend`` resolve it).
    """
    if device is None:
        device = os.environ.get("POLYGEMM_DEVICE", "").strip() or "auto"
    return device_arg_name(device).strip().lower()


def device_arg_name(device: object) -> str:
    """``device`` as polygemm names it: a string as given; the device object of an array library
    as its name says it (``torch.device("cuda", 1)`` -> ``"cuda:1"``, ``torch.device("cpu")`` ->
    ``"cpu"``, ``cupy.cuda.Device(1)`` -> ``"cuda:1"``), so ``device=tensor.device`` works.
    Anything else is an ArgumentTypeError that says what is accepted."""
    if isinstance(device, str):
        return device
    library = type(device).__module__.partition(".")[0]
    kind, index = getattr(device, "type", None), getattr(device, "index", None)
    if library == "torch" and isinstance(kind, str) and (index is None or isinstance(index, int)):
        return kind if index is None else f"{kind}:{index}"
    ordinal = getattr(device, "id", None)
    if library == "cupy" and isinstance(ordinal, int):
        return f"cuda:{ordinal}"
    raise ArgumentTypeError(f"device must be a backend name (e.g. 'cpu', 'cuda', 'cuda:1'), 'auto', a torch.device or "
                            f"a cupy.cuda.Device; got {short_repr(device)} ({type(device).__name__})")
