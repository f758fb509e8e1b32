"""Backend discovery and dispatch.

Backends come from the entry-point group ``polygemm.backends`` (the built-ins ``cpu``,
``cuda`` and ``musa`` are registered there too) and are imported lazily, on first use. A
backend whose import or probe fails is kept, unavailable, with the original exception
text as its reason; it never breaks ``import polygemm``, ``device="auto"`` or
``polygemm.backends()``:

* anything a plugin raises while it is imported, instantiated or probed (``SystemExit``
  included; only ``KeyboardInterrupt`` goes through) makes it unavailable with the reason;
* the checks of a backend (its ``priority`` is an integer, ``variants()`` returns
  ``Variant`` objects, ``probe()`` returns an ``Availability``) run in a daemon thread that
  gets ``$POLYGEMM_PROBE_TIMEOUT`` seconds (default 30); a probe that does not return in
  time leaves its backend unavailable ("probe did not return within N s");
* ``device="auto"`` waits for a probe still running at most ``AUTO_PROBE_WAIT`` seconds (2), once:
  it passes that backend over, naming it in the plan's reasons ("probe still running"), and takes
  the next one; the probe goes on, later calls do not wait for it again, and the first call after
  it has answered plans anew (cached plans are forgotten);
* a probe may itself call ``polygemm.backends()``: no lock is held while plugin code runs,
  and the probing backend is then listed as "probe still running";
* a plugin entry point named like a built-in (``cpu``, ``cuda``, ``musa``) or like another
  plugin's entry point does not replace it: it is listed, unavailable, under
  ``name@distribution`` with the clash as its reason.

Reasons are one line of at most 120 characters (``BackendInfo.reason``); the backend's
whole text is ``BackendInfo.detail`` (``polygemm info -v``, ``BackendUnavailableError.details``).
"""

from __future__ import annotations

from ..core.env import FALSE_WORDS, TRUE_WORDS, env_flag
from .checks import DEFAULT_PLUGIN_PRIORITY, BackendInfo, variant_table_error
from .discover import (AUTO_PROBE_WAIT, BUILTIN_PRIORITY, ENTRY_POINT_GROUP, MAX_PROBE_TIMEOUT, PROBE_TIMEOUT_ENV, backend_name, backends,
                       generation, known_names, probe_timeout, refresh)
from .names import ENV_DEVICE_WAY, device_arg_name, name_hint, resolve_device, split_index
from .dispatch import check_known, get_backend, locate_device, lookup, select
from .text import REASON_LIMIT, one_line

__all__ = [
    "BackendInfo",
    "backends",
    "get_backend",
    "select",
    "refresh",
    "resolve_device",
    "device_arg_name",
    "generation",
    "one_line",
    "split_index",
    "lookup",
    "locate_device",
    "check_known",
    "backend_name",
    "known_names",
    "name_hint",
    "variant_table_error",
    "probe_timeout",
    "ENTRY_POINT_GROUP",
    "DEFAULT_PLUGIN_PRIORITY",
    "PROBE_TIMEOUT_ENV",
    "MAX_PROBE_TIMEOUT",
    "AUTO_PROBE_WAIT",
    "BUILTIN_PRIORITY",
    "REASON_LIMIT",
    "ENV_DEVICE_WAY",
    "env_flag",
    "TRUE_WORDS",
    "FALSE_WORDS",
]
