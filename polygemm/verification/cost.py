"""What ``explain(..., verify=...)`` says of the check: how it is made and what it costs."""

from __future__ import annotations

import numpy as np

from .. import registry
from ..backend import Plan
from ..errors import PolygemmError

__all__ = ["describe_check", "host_check_us"]

# What the host check costs (polygemm/verification/host.py), from what it does: every element of A, B, the result
# (and c) is read once from memory, widened to float64 a block of rows at a time, and passed over in cache by float64
# matrix-vector products (B·r and A·(B·r), |A|·||B_k||, C·r: 4 flops an element) and one pass of abs or squares; then
# a fixed cost of Python (the threshold, the comparison, the report). The rates were measured on one core of a 2-core
# x86-64 machine (AMD EPYC with AVX-512, NumPy 2.4 and its OpenBLAS), where the estimate holds to about a third
# (float32 256³: 210-230 µs measured, 2048³: 11-12 ms); another machine's memory and caches move them.
#: ns an element: reading one byte from memory (about 15 GB/s)
_READ_NS_PER_BYTE = 0.07
#: ns an element: widening to float64 (NumPy casts float16 and bfloat16 element by element; others as a copy)
_WIDEN_NS = {"float16": 0.85, "bfloat16": 0.55}
_WIDEN_OTHER_NS = 0.2
#: ns an element: the float64 matrix-vector products and the pass of abs or squares over a cached block
_PASSES_NS = 0.5
_FIXED_US = 90.0
# integers are widened to 64 bits whole and multiplied by NumPy's own loops (about 0.9 ns an element, 40 µs fixed);
# bool recounts the product on the BLAS in float32 (about 0.01 ns a flop of 2·M·N·K a thread, its operands widened at
# about 0.3 ns an element); complex builds the real form of its operands whole (about 12 ns a complex element, 220 µs
# fixed)
_INTEGER_NS, _INTEGER_US = 0.9, 40.0
_BOOL_NS_PER_FLOP, _BOOL_WIDEN_NS = 0.01, 0.3
_COMPLEX_NS, _COMPLEX_US = 12.0, 220.0


def host_check_us(plan: Plan, given_out: bool) -> float:
    """A rough estimate of the host check's µs for ``plan``'s product (besides copying device operands back):
    the bytes it reads and widens, its float64 passes and a fixed cost, at rates of a small x86-64 server (above);
    ``given_out``: the checked result is copied into out besides."""
    p = plan.problem
    count, m, n, k = p.count, p.m, p.n, p.k
    reads_c = p.c is not None and p.beta != 0.0
    ins, outs = count * (m * k + k * n), count * m * n * (2 if reads_c else 1)
    copy = 2 * count * m * n * p.out_dtype.itemsize * _READ_NS_PER_BYTE / 1e3 if given_out else 0.0
    if p.out_dtype.kind == "b":
        return _INTEGER_US + copy + (_BOOL_WIDEN_NS * ins + _INTEGER_NS * outs + _BOOL_NS_PER_FLOP * 2 * count * m * n * k) / 1e3
    if p.dtype.kind in "iub" or p.out_dtype.kind in "iu":
        return _INTEGER_US + copy + _INTEGER_NS * (ins + outs) / 1e3
    if p.dtype.kind == "c" or p.out_dtype.kind == "c":
        return _COMPLEX_US + copy + _COMPLEX_NS * (ins + outs) / 1e3

    def per_element(dtype: np.dtype) -> float:
        return _WIDEN_NS.get(dtype.name, _WIDEN_OTHER_NS) + _PASSES_NS + dtype.itemsize * _READ_NS_PER_BYTE

    return _FIXED_US + copy + (ins * per_element(p.dtype) + outs * per_element(p.out_dtype)) / 1e3


def _product_us(plan: Plan, backend: object) -> float | None:
    """The product's own estimate: the backend's (``product_cost_us``) or its plan's (``estimate_us``); None without."""
    hook = getattr(backend, "product_cost_us", None)
    us = hook(plan) if hook is not None else getattr(plan.private, "estimate_us", None)
    return float(us) if us else None


def _two(x: float) -> str:
    """``x`` to two significant digits, written out (120, not 1.2e+02)."""
    return f"{float(f'{x:.2g}'):g}"


def _rough(us: float) -> str:
    """``us`` to two significant digits, in µs, ms or s."""
    value, unit = (us / 1e6, "s") if us >= 1e6 else (us / 1e3, "ms") if us >= 1e3 else (us, "µs")
    return f"{_two(value)} {unit}"


def _beside(check_us: float, product_us: float) -> str:
    """How ``check_us`` compares with the product's ``product_us``, as roughly as both are known."""
    ratio = check_us / product_us
    if ratio >= 1.15:
        return f"about {_two(ratio)} times the product's roughly {_rough(product_us)}"
    if ratio > 0.87:
        return f"about as much as the product's roughly {_rough(product_us)}"
    return f"about {_two(100 * ratio)}% of the product's roughly {_rough(product_us)}"


def describe_check(plan: Plan, mode: str, given_out: bool) -> str:
    """The note ``explain`` adds for a verified call: the test, where it runs, the threshold, and its cost
    (the bytes it reads and its arithmetic as a share of the product's 2·M·N·K; its time: where the backend estimates
    a check on its device, ``verify_cost_us``, beside the product's estimate; on the host, :func:`host_check_us`'s
    rough estimate, beside the product's where the backend or its plan estimates one). An empty result (M, N or the batch 0)
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
    sums = ("counts in float32 or float64, whole numbers up to K" if p.out_dtype.kind == "b"
            else "in 64-bit integers" if p.out_dtype.kind in "iu" else "in float64")
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
    # warn hands a product that failed its check over all the same: into out, which may be c
    failed_kept = kept if mode != "warn" else "c" if p.c is not None and not given_out else ""
    if given_out:
        tail = ("; the product goes to scratch or a result of its own, copied into out once checked" +
                (f" ({failed_kept} untouched on failure)" if mode != "warn" else
                 " or, where it failed, once warned (out then holds the product that failed)"))
    else:
        tail = f"; {failed_kept} is untouched on failure" if failed_kept else ""
    timing = ""
    if costs is not None:
        check_us, product_us = costs
        timing = f", about {check_us:.0f} µs" + (f" ({100.0 * check_us / product_us:.0f}% of the product's estimated "
                                                  f"{product_us:.0f} µs)" if product_us else "")
    elif not on_device:
        check_us = host_check_us(plan, given_out)
        product_us = _product_us(plan, backend) if product else None
        timing = (f", roughly {_rough(check_us)} on the host" + (" besides the copy back" if p.residency != "host" else "")
                  + (f" ({_beside(check_us, product_us)})" if product_us else ""))
    if p.out_dtype.kind == "b":  # bool: the logical product, recounted
        test, threshold = "a check of C against the counts A·B > 0 (the product once more, on the BLAS)", "exact"
    else:
        test = f"Freivalds check of C·r against alpha·A·(B·r){' + beta·c·r' if reads_c else ''} with a fresh random r of ±1"
        threshold = (f"exact, modulo 2**{8 * p.out_dtype.itemsize} as {p.out_dtype.name} wraps" if p.out_dtype.kind in "iu"
                     else f"threshold per row from the error bound of {p.dtype.name} -> {p.out_dtype.name}")
    return (f"verify={mode!r}: {test}, {where}; {threshold}; "
            f"estimated cost: reads A, B and C once more ({nbytes / 1e6:.3g} MB), {flops:.3g} flops{share}{timing}; "
            f"{what}{tail}")
