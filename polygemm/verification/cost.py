"""What ``explain(..., verify=...)`` says of the check: how it is made and what it costs."""

from __future__ import annotations

from .. import registry
from ..backend import Plan
from ..errors import PolygemmError

__all__ = ["describe_check"]


def describe_check(plan: Plan, mode: str, given_out: bool) -> str:
    """The note ``explain`` adds for a verified call: the test, where it runs, the threshold, and its cost
    (the bytes it reads and its arithmetic as a share of the product's 2·M·N·K; where the backend estimates
    it, ``verify_cost_us``, its time beside the product's estimate). An empty result (M, N or the batch 0)
    has nothing to check; K = 0 has no product to compute, and its result, beta·c, is checked all the same."""
    p = plan.problem
    empty = [name for name, size in (("M", p.m), ("N", p.n)) if size == 0] + (["the batch"] if p.count == 0 else [])
    if empty:
        return f"verify={mode!r}: nothing to check: {' and '.join(empty)} {'are' if len(empty) > 1 else 'is'} 0, so the result is empty"
    try:
        backend = registry.get_backend(plan.backend)
    except PolygemmError:
        backend = None
    on = getattr(backend, "verify_on_device", None)
    on_device = bool(on is not None and on(p))
    timed = getattr(backend, "verify_cost_us", None)
    costs = timed(plan, given_out) if timed is not None else None
    count, m, n, k = p.count, p.m, p.n, p.k
    reads_c = p.c is not None and p.beta != 0.0
    size_in, size_out = p.dtype.itemsize, p.out_dtype.itemsize
    nbytes = count * ((m * k + k * n) * size_in + m * n * size_out * (2 if reads_c else 1))
    product = 2 * count * m * n * k
    # bool: the counts A·B once more (the product's own arithmetic again); else three matrix-vector products
    flops = product if p.out_dtype.kind == "b" else 2 * count * (m * k + k * n + m * n * (2 if reads_c else 1))
    pct = 100.0 * flops / product if product else 0.0
    if product:
        share = f" = {pct:.0f}%" if pct >= 10 else f" = {pct:.2g}%"
        share += " of the product's arithmetic"
    else:  # K = 0: alpha·A·B is zero, and the result still has to be what beta·c (or zeros) makes it
        result = "alpha·0 + beta·c = beta·c" if reads_c else "alpha·0, all zeros"
        share = f" (K = 0: there is no product to compute; the result is {result}, and the check tests it all the same)"
    sums = "in 64-bit integers" if p.out_dtype.kind in "iub" else "in float64"
    if on_device:
        where = ("on the device, on the call's stream (kernels/verify: B·r, A·(B·r), C·r and the comparison; the host reads "
                 "back a count of failed rows)")
    elif p.residency != "host":  # device operands the device does not check: read back whole first
        where = f"on the host, {sums}, after copying A, B and C back from the device ({nbytes / 1e6:.3g} MB)"
    else:
        where = f"on the host, {sums}"
    what = {"raise": "a failed check raises VerificationError", "warn": "a failed check warns (VerificationWarning) and returns",
            "retry": "a failed check recomputes once (another rung where the backend has one) and raises if that fails too"}[mode]
    # what a failed check leaves untouched: what was given, as VerificationError names it
    kept = " and ".join(name for name, given in (("out", given_out), ("c", p.c is not None)) if given)
    if given_out:
        tail = f"; the product goes to a result of its own, copied into out once checked ({kept} untouched on failure)"
    else:
        tail = f"; {kept} is untouched on failure" if kept else ""
    timing = ""
    if costs is not None:
        check_us, product_us = costs
        timing = f", about {check_us:.0f} µs" + (f" ({100.0 * check_us / product_us:.0f}% of the product's estimated "
                                                  f"{product_us:.0f} µs)" if product_us else "")
    if p.out_dtype.kind == "b":  # bool: the logical product, recounted
        test, threshold = "a check of C against the counts A·B > 0 (the product once more, in 64-bit integers)", "exact"
    else:
        test = f"Freivalds check of C·r against alpha·A·(B·r){' + beta·c·r' if reads_c else ''} with a fresh random r of ±1"
        threshold = (f"exact, modulo 2**{8 * p.out_dtype.itemsize} as {p.out_dtype.name} wraps" if p.out_dtype.kind in "iu"
                     else f"threshold per row from the error bound of {p.dtype.name} -> {p.out_dtype.name}")
    return (f"verify={mode!r}: {test}, {where}; {threshold}; "
            f"estimated cost: reads A, B and C once more ({nbytes / 1e6:.3g} MB), {flops:.3g} flops{share}{timing}; "
            f"{what}{tail}")
