"""Placeholder until the MUSA backend lands: registered, honestly unavailable."""

from __future__ import annotations

from typing import Any, Sequence

from ...backend import Availability, Backend, Plan, Variant
from ...errors import BackendUnavailableError
from ...problem import GemmProblem


class MusaBackend(Backend):
    name = "musa"
    priority = 400
    residencies = ("host", "musa")

    def probe(self) -> Availability:
        return Availability(False, "the MUSA backend is not implemented in this version of polygemm")

    def variants(self) -> Sequence[Variant]:
        return ()

    def plan(self, problem: GemmProblem, variant: str = "auto") -> Plan:
        raise BackendUnavailableError(self.probe().reason)

    def run(self, plan: Plan) -> Any:
        raise BackendUnavailableError(self.probe().reason)
