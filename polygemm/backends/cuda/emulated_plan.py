"""float32 products on the bfloat16 tensor cores (:mod:`.emulated_launch`): the variants, when auto weighs
them, and their plans.

``emulated_bf16x6`` meets ``precision="highest"``: six products of bfloat16 parts leave under ``2^-25`` of
``|a||b|`` per product, inside the float32 bound's single rounding, and the bfloat16 rung accumulates in float32
as SGEMM does. auto weighs it beside the float32 rungs for every single float32 product on a device with
bfloat16 tensor cores (sm_80 and newer) and runs the faster estimate: the split's copies and six times the
inner size cost more than they save on small or thin products. ``emulated_bf16x3`` (three products, the error
of one pass: ``2^-16``) runs when a call asks ``precision="medium"``.

Its domain: float32 values of magnitude ``2^-100`` and over keep their full precision; smaller ones (near
float32's underflow, where the parts fall below bfloat16's normal range) keep an absolute error of about
``2^-134``, as float32 subnormals do near ``2^-149``. Infinities and nans give SGEMM's results.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ...backend import Plan, Variant, host_layouts
from ...core.dtypes import bfloat16
from ...core.operand import Operand
from ...core.problem import GemmProblem
from ...errors import DTypeError, UnsupportedProblemError
from .cost import copy_us
from .decisions import CudaPlan, batch_bytes, device_memory, device_sm, plan_mats, split_suffix
from .emulated_launch import EmulatedLaunch, SplitOperand, split_operand

__all__ = ["EMULATED", "EMULATED_VARIANTS", "MARGIN", "UNALIGNED_SPLIT_PACE", "SCRATCH_SHARE", "emulation_for", "plan_emulated", "choose", "with_emulations"]

#: the emulations by variant name: how many segments (products of parts) each sums
EMULATED: dict[str, int] = {"emulated_bf16x6": 6, "emulated_bf16x3": 3}

EMULATED_VARIANTS: tuple[Variant, ...] = (
    Variant("emulated_bf16x6", ("float32",),
            "float32 as six bfloat16 products on the tensor cores (each operand split into three bfloat16 parts; "
            "the three smallest cross products dropped, under 2^-25 of |a||b|): float32-level error",
            layout="any", tile="the bfloat16 rung's", requirements="sm_80+", precision="highest"),
    Variant("emulated_bf16x3", ("float32",),
            "float32 as three bfloat16 products on the tensor cores (high and middle parts): one pass's error (2^-16)",
            layout="any", tile="the bfloat16 rung's", requirements="sm_80+", precision="medium"),
)

#: the estimate an emulation must beat the float32 rungs' by before auto runs it (its split is a pass over the
#: operands the cost model times only roughly)
MARGIN = 0.9
#: how much longer than estimated a bfloat16 product takes where its rung splits K and the reduction writes a result
#: whose rows are not 16-byte aligned, as measured on an H100: 997x1009x1013 ran 78.6 µs against 53.7 estimated,
#: 512x1500x2816 94.6 against 63.3 (700x700x700, one launch unsplit, ran faster than estimated)
UNALIGNED_SPLIT_PACE = 1.5
_MIN_SM = 80


#: the most of the device's memory auto lets the split operands take (six bfloat16 segments are three times the
#: float32 operands): past it the float32 rungs run, which need none
SCRATCH_SHARE = 0.25


class Planner(Protocol):
    """What the emulation asks of the backend: the plan of a (bfloat16) problem on a device."""

    @property
    def name(self) -> str: ...

    def plan_on(self, problem: GemmProblem, variant: str, rt: Any, record: bool = True) -> Plan: ...


def emulation_for(p: GemmProblem, sm: int) -> str | None:
    """The emulation auto weighs for ``p`` on an ``sm`` device (0: planned without one), or None: float32, one
    product (a batch runs on the float32 rungs), a device with bfloat16 tensor cores; six segments for
    ``"highest"`` and ``"high"``, three for ``"medium"``."""
    if p.dtype.name != "float32" or p.count != 1 or p.empty or (sm and sm < _MIN_SM):
        return None
    return "emulated_bf16x3" if p.precision == "medium" else "emulated_bf16x6"


def _inner_problem(p: GemmProblem, a: SplitOperand, b: SplitOperand) -> GemmProblem:
    """The bfloat16 product the rung computes: the split operands (scratch, no pointer yet), float32 results
    into the destination as planned (its layout, pitch and alignment), beta as the call's."""
    try:
        bf = bfloat16()
    except DTypeError as exc:  # the rung's operands are described in NumPy's bfloat16 (ml_dtypes)
        raise UnsupportedProblemError(f"the bfloat16 emulation plans its operands as ml_dtypes.bfloat16: {exc}") from None

    def scratch(op: SplitOperand) -> Operand:
        m = op.mat
        return Operand(m.name, None, (m.rows, m.cols), bf, m.layout, m.ld, "cuda", 0)  # type: ignore[arg-type]

    _, _, dest = plan_mats(p)
    out = Operand("out", None, (p.m, p.n), np.dtype(np.float32), dest.layout, dest.ld, "cuda", dest.ptr)  # type: ignore[arg-type]
    return GemmProblem(p.m, p.n, a.mat.cols, bf, scratch(a), scratch(b), None, out, p.alpha, p.beta, "cuda",
                       kind=p.kind, precision="highest")


def plan_emulated(be: Planner, p: GemmProblem, name: str, rt: Any) -> tuple[Plan, float]:
    """The plan of float32 problem ``p`` as emulation ``name`` on ``rt``'s device (None: without one), and its
    estimated µs (0.0 where the inner rung was named, not estimated)."""
    if p.dtype.name != "float32":
        raise UnsupportedProblemError(f"variant {name!r} computes float32 products, not {p.dtype.name}")
    if p.count != 1:
        raise UnsupportedProblemError(f"variant {name!r} takes one product, not a batch of {p.count}; "
                                      f"pass variant='auto' (a batch runs on the float32 rungs)")
    sm = device_sm(rt)
    if sm and sm < _MIN_SM:
        raise UnsupportedProblemError(f"variant {name!r} needs bfloat16 tensor cores (sm_80 or newer); this device is sm_{sm}")
    segments = EMULATED[name]
    ua, ub, _ = plan_mats(p)
    sa, sb = split_operand(ua, True, segments), split_operand(ub, False, segments)
    inner = be.plan_on(_inner_problem(p, sa, sb), "auto", rt, record=False)  # the caller's shape is the one recorded
    decided: CudaPlan = inner.private
    split_us = copy_us([sa.read_bytes, sb.read_bytes])
    product_us = decided.estimate_us
    if split_suffix(inner.variant)[1] and not plan_mats(p)[2].aligned(4):
        product_us *= UNALIGNED_SPLIT_PACE
    estimate = product_us + split_us if product_us else 0.0
    plan = Plan(be.name, name, f"float32 as {segments} bfloat16 products on the tensor cores, one {inner.variant} launch "
                f"of inner size {sa.mat.cols} ({segments} x {sa.mat.cols // segments}) after splitting A and B "
                f"(estimated {estimate:.1f} µs: split {split_us:.1f}, product {product_us:.1f}); "
                f"bfloat16 product: {inner.reason}", p, device=inner.device, layouts=host_layouts(p), padding=inner.padding)
    if p.residency == "host":
        plan.copies.append("host -> device: a, b" + (", c" if p.c is not None and p.beta != 0 else "") + "; device -> host: result")
    plan.copies.append(f"a -> {segments} bfloat16 segments ({sa.mat.rows}x{sa.mat.cols}, ld={sa.mat.ld}), b -> {segments} "
                       f"({sb.mat.rows}x{sb.mat.cols}, ld={sb.mat.ld}): one scratch block of {sa.nbytes + sb.nbytes} bytes on "
                       f"the call's stream")
    plan.launch = dict(inner.launch)
    plan.launch["emulation"] = f"{inner.variant} on the split operands ({segments} segments of K = {p.k})"
    plan.notes = list(inner.notes) + ["values under 2^-100 in magnitude keep an absolute error near 2^-134 (their low parts "
                                      "fall below bfloat16's normal range), as float32 subnormals keep one near 2^-149"]
    plan.candidates = list(inner.candidates)
    launch = None
    if rt is not None and decided.launch is not None:
        assert not isinstance(decided.launch, EmulatedLaunch)
        launch = EmulatedLaunch(decided.launch, rt, sa, sb)  # type: ignore[arg-type]
    plan.private = CudaPlan(launch, p.result_layout, batch_bytes(p), rt, launch is not None, estimate_us=estimate)
    return plan, estimate


def choose(be: Planner, p: GemmProblem, name: str, rt: Any, native: Plan) -> Plan:
    """auto's choice between ``native`` (the float32 rungs' plan) and emulation ``name``: the emulation where its
    estimate beats the native one's by :data:`MARGIN`, else ``native``; the plan's runners-up name the other."""
    ours: CudaPlan = native.private
    try:
        emulated, estimate = plan_emulated(be, p, name, rt)
    except UnsupportedProblemError as exc:
        native.candidates.append((name, f"cannot take this problem: {exc}"))
        return native
    if not ours.estimate_us or not estimate:
        return native
    launch = emulated.private.launch
    total = device_memory(rt)
    if launch is not None and total and launch.nbytes > SCRATCH_SHARE * total:
        native.candidates.append((name, f"estimated {estimate:.1f} µs, but its split operands would take {launch.nbytes} bytes "
                                        f"of scratch, over {SCRATCH_SHARE:.0%} of the device's memory"))
        return native
    if estimate < MARGIN * ours.estimate_us:
        emulated.reason = (f"{name} estimated {estimate:.1f} µs against {ours.estimate_us:.1f} µs for {native.variant} "
                           f"on the float32 rungs; " + emulated.reason)
        emulated.candidates = [(native.variant, f"estimated {ours.estimate_us:.1f} µs (float32 on the CUDA cores)")] + \
            [c for c in native.candidates if c[0] != native.variant][:3]
        return emulated
    native.candidates.append((name, f"estimated {estimate:.1f} µs (split into bfloat16 parts on the tensor cores)"))
    return native


def with_emulations(variants: tuple[Variant, ...]) -> tuple[Variant, ...]:
    """``variants`` and the emulations."""
    return variants + EMULATED_VARIANTS

