"""The registry's checks of a loaded backend: a priority, a variant table or a probe that fails is an
"unavailable" with the reason, never an exception out of the registry."""

from __future__ import annotations

import pytest

import polygemm as pg
from polygemm.registry.checks import BackendInfo, check_backend, variant_table_error


class _Backend:
    """A backend as a plugin writes it, duck-typed as the checks read it."""

    priority = 300

    def variants(self):
        return [pg.Variant("v", ("float32",), "a plugin's kernel")]

    def probe(self):
        return pg.Availability(True)


def test_a_backend_that_keeps_the_contract_passes_with_its_priority():
    assert check_backend(_Backend(), fallback=7) == (True, "", 300)


def test_a_priority_that_raises_is_unavailable_with_the_fallback_priority():
    class Raising(_Backend):
        @property
        def priority(self):
            raise RuntimeError("license server down")

    ok, reason, prio = check_backend(Raising(), fallback=7)
    assert not ok and prio == 7
    assert "reading priority failed" in reason and "RuntimeError" in reason and "license server down" in reason


def test_variants_that_raise_are_unavailable_with_the_backends_priority():
    class Raising(_Backend):
        def variants(self):
            raise OSError("kernel table missing")

    ok, reason, prio = check_backend(Raising(), fallback=7)
    assert not ok and prio == 300
    assert "variants() failed" in reason and "OSError" in reason and "kernel table missing" in reason


@pytest.mark.parametrize("name", ["", "   ", 5])
def test_a_variant_without_a_name_is_refused_naming_the_field(name):
    says = variant_table_error([pg.Variant(name, ("float32",), "no name")])  # type: ignore[arg-type]
    assert says is not None and "name must be a non-empty string" in says and repr(name) in says


def test_backend_info_reads_as_its_name_priority_and_state():
    up = BackendInfo("vendor", True, "", 250, "entry point", None)
    down = BackendInfo("vendor", False, "libvendor.so not found", 250, "entry point", None)
    assert str(up) == "vendor (priority 250): available"
    assert "vendor (priority 250): unavailable" in str(down) and "libvendor.so not found" in str(down)
