"""Fitting auto's ranked candidates to the operands: the first candidate (in estimate order) whose launch
plan these operands allow runs. A candidate may be passed over (an alignment, index range or shared
memory its builds cannot take: the plan says why), weighed again on aligned copies of the operands
(a TMA rung that cannot describe them), or weighed again at its unaligned build's pace; the plan's
reason, notes and runners-up say what was weighed and why the winner won."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from ...backend import Plan
from ...errors import UnsupportedProblemError
from .catalog import anchored_aligned, check_smem, explain_choice
from .cost import TMA_PITCH, Candidate, copy_bytes, copy_us
from .planning import LaunchPlan, Mat, TmaUnsuitable, pitch_off, transposed_copy
from .variants import KernelSpec

__all__ = ["fit_ranked", "fit_named_on_copies", "copies_named"]

_NONE: tuple[Mat | None, Mat | None, Mat | None] = (None, None, None)


def _transposed_pads(cand: Candidate, a: Mat, b: Mat) -> tuple[Mat | None, Mat | None, Mat | None]:
    """The scratch a candidate on a transposed copy reads: the copy of A or of B in the other layout."""
    return (transposed_copy(a), None, None) if cand.transposed == "a" else (None, transposed_copy(b), None)


def _copies_read(copies: tuple[Mat | None, Mat | None, Mat | None], splits: int,
                 spec: KernelSpec) -> tuple[Mat | None, Mat | None, Mat | None]:
    """The copies a rung's launch reads of ``copies`` (a, b, c): C's only for a rung that stores it through a tensor map
    (the others' epilogues, and a K-split's reduction from its aligned workspace, write any C in place)."""
    return copies if splits <= 1 and spec.tma_store else (copies[0], copies[1], None)


def copies_named(mats: Sequence[Mat], pads: Sequence[Mat | None]) -> str:
    """The plan's ``padding`` line for aligned copies ``pads`` of ``mats`` (a, b, c; None: read as it is)."""
    return "; ".join(f"{x.name} ({x.rows}x{x.cols}, ld={x.ld}) -> an aligned copy (ld={pad.ld})"
                     for x, pad in zip(mats, pads) if pad is not None)


def fit_named_on_copies(fit: Callable[..., tuple[LaunchPlan, Any]], spec: KernelSpec, mats: tuple[Mat, Mat, Mat],
                        copies: tuple[Mat | None, Mat | None, Mat | None], *, splits: int, count: int,
                        **kw: Any) -> tuple[LaunchPlan, tuple[Mat | None, Mat | None, Mat | None]] | str:
    """A named TMA rung's launch on ``copies`` (the aligned scratch of the operands it cannot describe), as auto runs
    it, and the copies it reads; else why not (a batch or panels, which the copies are not made for, nothing to copy,
    or what the rung refuses of the copies too: the caller hands the operands to another rung). ``fit``: the backend's
    launch planning, given ``splits`` and ``kw``."""
    wanted = _copies_read(copies, splits, spec)
    if all(x is None for x in wanted):
        return ""
    if count > 1:
        return "aligned copies are made for one product, not a batch"
    a, b, c = mats
    try:
        lp, parts = fit(spec, wanted[0] or a, wanted[1] or b, wanted[2] or c, splits=splits, **kw)
    except (TmaUnsuitable, UnsupportedProblemError) as exc:
        return f"on aligned copies: {exc}"
    return (lp, wanted) if parts is None else "aligned copies are made for one launch, not panels of the result"


def fit_ranked(fit: Callable[..., tuple[LaunchPlan, Any]], plan: Plan, ranked: Sequence[Candidate], timed: Candidate | None,
               mats: tuple[Mat, Mat, Mat], copies: tuple[Mat | None, Mat | None, Mat | None], pitched: bool, *,
               specs: Mapping[str, KernelSpec], batch: tuple[int, int, int, int], rt: Any, dtype: str,
               count: int) -> tuple[LaunchPlan | None, Any, tuple[Mat | None, Mat | None, Mat | None], KernelSpec | None, float]:
    """The launch of the first of ``ranked`` that ``fit`` (the backend's launch planning) can take for
    ``mats`` (a, b, c as stored), its panels, the aligned copies it reads (``_NONE``: the operands as they
    are), its rung and its estimate in µs; a launch of None when none can (``plan.candidates`` says why). ``timed``:
    the candidate measured fastest on this GPU (autotune), which is not weighed again at another pace;
    ``specs``: the rungs by name;
    ``copies``: the aligned (or pitched) copies a TMA rung would read instead; ``pitched``: TMA reads
    these rows, off 32-byte boundaries. Writes the plan's variant, reason, padding, notes and candidates."""
    a, b, c = mats
    lp: LaunchPlan | None = None
    parts: Any = None
    pads = _NONE
    spec: KernelSpec | None = None
    estimate = 0.0
    pending = list(ranked)
    while pending:
        cand = pending.pop(0)
        wanted = _copies_read(copies, cand.splits, specs[cand.variant])
        pads = _transposed_pads(cand, a, b) if cand.transposed else wanted if cand.padded else _NONE
        try:
            lp, parts = fit(specs[cand.variant], pads[0] or a, pads[1] or b, pads[2] or c, batch=batch, rt=rt,
                            splits=cand.splits, dtype=dtype)
            if cand.padded and (parts is not None or count > 1):
                raise UnsupportedProblemError(f"{'a transposed copy is' if cand.transposed else 'aligned copies are'} "
                                              "made for one product in one launch")
            if rt is not None:  # a build this device's shared memory cannot hold is passed over
                check_smem(lp, rt.max_smem_per_block)
        except TmaUnsuitable as exc:
            if not cand.padded and count <= 1 and any(x is not None for x in wanted):
                # the rung on aligned copies of the unaligned operands, at the copies' cost
                # A's and B's copies are one launch (CudaRuntime.repitch_pair), C's copy out another
                moved = [sum(copy_bytes(x, pad) for x, pad in zip((a, b), wanted[:2]) if pad is not None)]
                moved += [copy_bytes(c, wanted[2])] if wanted[2] is not None else []
                again = replace(cand, estimate_us=cand.estimate_us + copy_us(moved), padded=True)
                pending.insert(next((i for i, o in enumerate(pending) if o.estimate_us > again.estimate_us), len(pending)), again)
            plan.candidates.append((cand.label, f"estimated {cand.estimate_us:.1f} µs, but {exc}"))
            continue
        except UnsupportedProblemError as exc:
            plan.candidates.append((cand.label, f"estimated {cand.estimate_us:.1f} µs, but {exc}"))
            continue
        pace = specs[cand.variant].unaligned_pace
        if not lp.vec and pace < 1.0 and not cand.unaligned and cand is not timed \
                and anchored_aligned(cand, dtype):
            # measured at aligned rows, run on unaligned ones: weighed again at that build's pace
            slower = replace(cand, estimate_us=cand.estimate_us / pace, unaligned=True)
            pending.insert(next((i for i, o in enumerate(pending) if o.estimate_us > slower.estimate_us), len(pending)), slower)
            plan.candidates.append((cand.label, f"estimated {cand.estimate_us:.1f} µs at aligned rows, but these operands take "
                                    f"its unaligned build (PG_VEC=0), which keeps about {pace:.0%} of that pace"))
            continue
        if cand is not ranked[0]:
            # a rung weighed again at its unaligned build's pace follows its own aligned estimate, not a refusal
            refused = any(name != cand.label for name, _ in plan.candidates)
            plan.reason = explain_choice(cand, ranked, dtype) + (
                " (faster estimates could not take these operands)" if refused else "")
            if timed is not None:
                plan.reason += f"; {timed.label}, measured fastest on this GPU, cannot take these operands"
            if cand.unaligned:
                plan.reason += f" (weighed at its unaligned build's pace, about {pace:.0%} of its aligned one)"
        plan.variant, spec, estimate = cand.name, specs[cand.variant], cand.estimate_us
        if cand.transposed:
            src, pad = (a, pads[0]) if cand.transposed == "a" else (b, pads[1])
            assert pad is not None
            major = {"row": "row-major", "col": "column-major"}
            plan.padding = f"{src.name} ({src.rows}x{src.cols}, {major[src.layout]}, ld={src.ld}) -> a {major[pad.layout]} copy (ld={pad.ld})"
            plan.notes.append(f"{cand.variant} reads A and B at full speed where both are row-major or both column-major: "
                              f"{src.name}, the smaller, is copied into the other layout on the call's stream first "
                              f"(estimated {cand.estimate_us:.1f} µs with the copy)")
        elif cand.padded:
            plan.padding = copies_named((a, b, c), pads)
            if pitched:
                plan.notes.append(f"{cand.variant} reads rows that start on {TMA_PITCH}-byte boundaries at full speed: "
                                  "the operands whose rows do not are copied into such scratch on the call's stream "
                                  f"first (estimated {cand.estimate_us:.1f} µs with the copies)")
            else:
                plan.notes.append(f"{cand.variant} reads 16-byte aligned tiles only: the unaligned operands are copied "
                                  f"into aligned scratch on the call's stream first (estimated {cand.estimate_us:.1f} µs with the copies)")
        elif pitched and specs[cand.variant].abi == "tma":
            plan.notes.append(f"{cand.variant} reads rows of " + " and ".join(x.name for x in (a, b) if pitch_off(x))
                              + f" that start off {TMA_PITCH}-byte boundaries (estimated {cand.estimate_us:.1f} µs with "
                              "that cost; copies that avoid it were estimated slower)")
        seen = {name for name, _ in plan.candidates}
        plan.candidates.extend([(o.label, f"estimated {o.estimate_us:.1f} µs") for o in ranked
                                if o is not cand and o.label not in seen][:4])
        break
    return lp, parts, pads, spec, estimate
