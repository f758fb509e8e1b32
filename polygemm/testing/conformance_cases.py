"""The conformance suite's cases: the grid of shapes, layouts, scalings, NaN and infinity propagation, device-resident
operands and bad inputs each backend runs (:func:`case_groups`), each case a function of one :class:`Context` (a backend,
dtype and variant, and fresh random numbers) that raises AssertionError on a failure and :class:`Skip` where it does not
apply. :mod:`.conformance` runs them.
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
from typing import Any, Callable, Iterator

import numpy as np

from .. import errors
from ..errors import UnsupportedProblemError
from ..backend import Backend
from ..core.precision import governed
from ..problem import HALF_DTYPES, dtype_named
from ..registry import get_backend
from .bounds import check_result

__all__ = ["Case", "Context", "Skip", "case_groups", "SHAPES", "QUICK_SHAPES", "FLOAT16_HINT"]

#: (M, N, K) of the "shapes" group: tiny, primes, tall-skinny, wide, K=1, tile-crossing.
SHAPES: tuple[tuple[int, int, int], ...] = (
    (1, 1, 1), (2, 3, 4), (7, 13, 5), (31, 37, 41), (127, 129, 131),
    (257, 65, 33), (1000, 3, 7), (3, 1000, 9), (64, 48, 1), (5, 300, 1),
)
#: appended to a float16 case's failure (bfloat16's says bfloat16): the usual cause is a
#: 16-bit accumulator
FLOAT16_HINT = ("the errors are of the size a float16 accumulator leaves, and float16 products must accumulate in float32 "
                "(polygemm's contract; rounding beta·c or the product to float16 before the sum shows the same way)")
QUICK_SHAPES: tuple[tuple[int, int, int], ...] = ((1, 1, 1), (7, 13, 5), (127, 129, 131), (64, 48, 1))


class Skip(Exception):
    pass


def _variant_precision(backend: Backend, variant: str) -> str | None:
    """The precision class a named variant declares (``Variant.precision``); None for ``"auto"`` or an unknown
    name (the process default applies, and the case says what the backend refuses)."""
    for v in backend.variants():
        if v.name == variant.partition(":")[0]:
            return str(getattr(v, "precision", "highest"))
    return None


def _declared_out_dtypes(backend: Backend, variant: str) -> tuple[str, ...]:
    """The result dtypes a named variant declares besides its input's (``Variant.out_dtypes``); () for ``"auto"``."""
    for v in backend.variants():
        if v.name == variant.partition(":")[0]:
            return tuple(v.out_dtypes)
    return ()


class Context:
    """What one case needs: the backend, dtype, variant and a fresh random generator."""

    def __init__(self, backend: Backend, dtype: np.dtype, variant: str, seed: int | None = None) -> None:
        self.backend = backend
        self.dtype = dtype
        self.variant = variant
        # the variant's own precision class: a "medium" (one-pass) variant is asked for "medium" and held to its bound,
        # else the process default ("highest") would refuse every product it computes and the suite check nothing
        self.precision = _variant_precision(backend, variant) if governed(dtype.name) else None
        self.seed = secrets.randbits(32) if seed is None else seed
        self.rng = np.random.default_rng(self.seed)
        try:  # polygemm.gemm(device=name) reaches this very object
            self.registered = get_backend(backend.name) is backend
        except errors.PolygemmError:
            self.registered = False

    def rand(self, rows: int, cols: int, order: str = "C") -> np.ndarray:
        x = self.rng.standard_normal((rows, cols))
        if self.dtype.kind == "c":  # both parts random: a kernel that drops or swaps one shows
            x = x + 1j * self.rng.standard_normal((rows, cols))
        x = x.astype(self.dtype)
        return np.asfortranarray(x) if order == "F" else np.ascontiguousarray(x)

    def poisoned(self, rows: int, cols: int, order: str = "C") -> np.ndarray:
        x: np.ndarray = np.full((rows, cols), np.nan, dtype=self.dtype, order=order)  # type: ignore[call-overload]
        return x

    def gemm(self, a: Any, b: Any, c: Any = None, *, alpha: float = 1.0, beta: float = 0.0, out: Any = None,
             out_dtype: Any = None) -> Any:
        """The call users make: ``polygemm.gemm(..., device=<the backend's name>, variant=...)`` when
        the registry holds this backend, so what is tested is what they get (the backend's
        ``execute``, which a plugin may override for speed, under the plan cache and the core's
        checks of a plugin's results); an unregistered backend object is planned and executed as
        the core does it (normalize, ``check_problem``, ``plan``, ``execute``). The suite had called
        ``plan`` and ``run`` only: a plugin whose ``execute`` dropped alpha passed every case."""
        from ..problem import Call, normalize

        # the inputs as they were: a backend writes out alone (their read-only flag is a flag, which it could lift)
        kept = [(name, x, x.tobytes()) for name, x in (("a", a), ("b", b), ("c", c))
                if isinstance(x, np.ndarray) and not (out is not None and isinstance(out, np.ndarray) and np.shares_memory(x, out))]
        if self.registered:
            from ..api import gemm

            got = gemm(a, b, c, alpha=alpha, beta=beta, out=out, device=self.backend.name, variant=self.variant,
                       precision=self.precision, out_dtype=out_dtype)
        else:
            problem = normalize(a, b, c, alpha=alpha, beta=beta, out=out, out_dtype=out_dtype)
            if self.precision is not None:
                problem = dataclasses.replace(problem, precision=self.precision)
            self.backend.check_problem(problem)
            with np.errstate(all="ignore"):  # as the core runs a registered backend: its NumPy warnings are not the user's
                plan = self.backend.plan(problem, self.variant)
                got = self.backend.execute(plan, Call.from_problem(plan.problem))
        for name, x, before in kept:
            if x.tobytes() != before:
                changed = int(np.count_nonzero(np.frombuffer(x.tobytes(), np.uint8) != np.frombuffer(before, np.uint8)))
                raise AssertionError(f"the call modified its input {name} ({changed} bytes of {len(before)} changed): a "
                                     f"backend writes out alone, never a, b or c (unless c is out) (seed {self.seed})")
        return got

    def check(self, got: Any, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, alpha: float = 1.0, beta: float = 0.0) -> None:
        res = check_result(np.asarray(got), a, b, c, alpha, beta, out_dtype=self.dtype, precision=self.precision)
        if not res.ok:
            # the accumulator's hint where the result is merely inaccurate (finite, of the right shape and dtype), not
            # where it is wrong in kind (NaN, infinities, another shape), which no accumulator explains
            accurate_kind = "elements outside the bound" in res.message and not any(
                w in res.message for w in ("got nan", "got inf", "got -inf"))
            # and only where the result is within the bound of an accumulator of the inputs' own dtype: a layout read
            # wrong is off by more than any accumulator explains (beta·c rounded in float16 is not, and the hint names it)
            # and only where many elements are off (an accumulator's error spreads over the result: some 10% of these
            # cases' elements; one element off, or a few, is a bug of its own)
            hint = ""
            many = res.violations >= max(2, np.asarray(got).size // 50)
            dropped = self._dropped_term(got, a, b, c, alpha, beta) if accurate_kind and many else None
            if dropped is not None:  # (such a result is often within a 16-bit accumulator's bound too: this says more)
                hint = (f"; the result is the product without the term of K index {dropped} in every dot product "
                        f"(a K loop that starts or stops one step off?)")
            elif self.dtype.name in HALF_DTYPES and accurate_kind and many and check_result(
                    np.asarray(got), a, b, c, alpha, beta, out_dtype=self.dtype, acc_dtype=self.dtype,
                    precision=self.precision).ok:
                hint = f"; {FLOAT16_HINT.replace('float16', self.dtype.name)}"
            # the product's shape: a case's name says it only in the shapes group
            shape = f"{np.shape(a)[-2]}x{np.shape(b)[-1]}x{np.shape(a)[-1]} (MxNxK) {self.dtype.name}"
            lead = np.broadcast_shapes(np.shape(a)[:-2], np.shape(b)[:-2])
            if lead:
                shape += f", batch {lead}"
            raise AssertionError(f"{shape}: {res.message} (seed {self.seed}){hint}")

    def _dropped_term(self, got: Any, a: np.ndarray, b: np.ndarray, c: np.ndarray | None, alpha: float,
                      beta: float) -> int | None:
        """The K index (the first or the last) whose term ``got`` lacks in every dot product, where it is within the
        bound of that shorter product and K has a term to spare; None otherwise."""
        k = np.shape(a)[-1]
        if k < 2:
            return None
        for index, keep in ((0, slice(1, None)), (k - 1, slice(None, -1))):
            if check_result(np.asarray(got), a[..., :, keep], b[..., keep, :], c, alpha, beta, out_dtype=self.dtype,
                            precision=self.precision).ok:
                return index
        return None


Case = Callable[[Context], None]


def _shape_case(m: int, n: int, k: int, use_out: bool) -> Case:
    def case(x: Context) -> None:
        a, b = x.rand(m, k), x.rand(k, n)
        if use_out:
            out = x.poisoned(m, n)
            got = x.gemm(a, b, out=out)
            if got is not out:
                raise AssertionError("gemm(out=...) did not return out itself")
        else:
            got = x.gemm(a, b)
            if not isinstance(got, np.ndarray):
                raise AssertionError(f"NumPy inputs gave a {type(got).__name__}, expected a NumPy array")
        x.check(got, a, b)

    return case


def _layout_case(order_a: str, order_b: str, order_c: str, m: int = 37, n: int = 29, k: int = 41) -> Case:
    def case(x: Context) -> None:
        # A "T" order is a transposed view of a matrix stored the other way round.
        def make(rows: int, cols: int, order: str) -> np.ndarray:
            if order == "T":
                return x.rand(cols, rows).T
            return x.rand(rows, cols, order)

        a, b = make(m, k, order_a), make(k, n, order_b)
        c = make(m, n, order_c)
        out = x.poisoned(m, n, "F" if order_c == "F" else "C")
        got = x.gemm(a, b, c, alpha=0.5, beta=-1.25, out=out)
        # out itself is checked: polygemm.gemm returns the caller's out whatever the backend returns, so a backend
        # that returned a correct new array and left out unwritten (here, with c beside it) would pass otherwise
        if got is not out:
            raise AssertionError("gemm(a, b, c, out=...) did not return out itself")
        x.check(out, a, b, c, 0.5, -1.25)

    return case


def _padded_case(x: Context) -> None:
    """Operands, c and out as views of wider buffers, passed in place: each matrix's leading dimension past its edge
    (A row-major, B column-major, c a transposed view; out row-major, then column-major). Read through ``.ld``; out's
    elements written, and the rest of its buffer untouched."""
    m, n, k = 37, 29, 41
    a = x.rand(m, k + 7)[:, :k]
    b = x.rand(k + 5, n, "F")[:k, :]
    c = x.rand(n, m + 3)[:, :m].T
    for order, buffer, out in _padded_outs(x, m, n):
        got = x.gemm(a, b, c, alpha=0.75, beta=0.5, out=out)
        if got is not out:
            raise AssertionError(f"gemm(..., out=a {order} view of a wider buffer) did not return out itself")
        x.check(out, a, b, c, 0.75, 0.5)
        spare = buffer.copy()
        spare[:m, :n] = np.nan
        if not np.isnan(spare).all():
            ld = max(buffer.strides) // buffer.itemsize
            raise AssertionError(f"elements of out's buffer outside out ({order}, leading dimension {ld}) were written: "
                                 f"write out's elements only, .ld apart")


def _padded_outs(x: Context, m: int, n: int) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(its order, the NaN-filled buffer, out: a view of it) for a row-major and a column-major out of padded rows."""
    rows = x.poisoned(m, n + 9)
    yield "row-major", rows, rows[:, :n]
    cols = x.poisoned(m + 6, n, "F")
    yield "column-major", cols, cols[:m, :]


def _threads_case(x: Context) -> None:
    """Calls from several threads at once, each of its own shape, as the core makes them (it serialises nothing): each
    result within the bound. Per-call state kept on the backend shows as results of another call's shape or values."""
    shapes = [(12 + i, 7 + 2 * i, 9 + 3 * i) for i in range(8)]
    inputs = [(x.rand(m, k), x.rand(k, n)) for m, n, k in shapes]
    start = threading.Barrier(len(shapes))
    failures: list[tuple[int, str]] = []
    refused: list[UnsupportedProblemError] = []

    def work(i: int) -> None:
        try:
            start.wait(timeout=60)
            for _ in range(4):
                x.check(x.gemm(*inputs[i]), *inputs[i])
        except UnsupportedProblemError as exc:  # a product the backend does not compute: the case's skip, as elsewhere
            refused.append(exc)
        except Exception as exc:  # noqa: BLE001 - every thread's failure is reported, whatever it raised
            failures.append((i, f"{'x'.join(map(str, shapes[i]))}: {type(exc).__name__}: {exc}"))

    pool = [threading.Thread(target=work, args=(i,)) for i in range(len(shapes))]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if refused and not failures:
        raise refused[0]
    if failures:
        # a call that fails from one thread alone is a fault of its own, not of threads: said as such, not blamed on
        # per-call state (a backend that drops the last row fails here as in every other case)
        for i, _ in failures:
            try:
                x.check(x.gemm(*inputs[i]), *inputs[i])
            except Exception as exc:  # noqa: BLE001 - the failure as the other cases report it
                raise AssertionError(f"calls from {len(shapes)} threads at once: {len(failures)} failed, and "
                                     f"{'x'.join(map(str, shapes[i]))} fails from one thread alone too: "
                                     f"{type(exc).__name__}: {exc}") from None
        raise AssertionError(f"calls from {len(shapes)} threads at once: {len(failures)} failed (keep per-call state in "
                             f"locals or the plan's problem, never on the backend); {failures[0][1]}")


def _out_dtype_case(x: Context) -> None:
    """The inputs' dtype and each result dtype the variant declares besides it (``Variant.out_dtypes``: float32 results
    of float16 inputs), asked as ``out_dtype=`` and as an ``out`` of that dtype: written in it, within its bound."""
    # (the core takes float32 results of float16 and bfloat16 inputs only: check_result_dtype); the inputs' own dtype
    # always, with out_dtype given as it
    wider = [d for d in _declared_out_dtypes(x.backend, x.variant) if d == "float32" and x.dtype.name in HALF_DTYPES]
    a, b = x.rand(23, 17), x.rand(17, 19)
    for name in [x.dtype.name] + wider:
        od = dtype_named(name)
        c = x.rand(23, 19).astype(od)
        for given_out in (False, True):
            out = np.full((23, 19), np.nan, od) if given_out else None
            got = x.gemm(a, b, c, alpha=0.5, beta=2.0, out=out, out_dtype=None if given_out else od)
            got = np.asarray(got)
            assert got.dtype == od, (f"variant {x.variant!r} declares {name} results (Variant.out_dtypes) but wrote "
                                     f"{got.dtype.name} for {'an out of ' + name if given_out else 'out_dtype=' + name}")
            res = check_result(got, a, b, c, 0.5, 2.0, out_dtype=od, precision=x.precision)
            assert res.ok, f"{name} results of {x.dtype.name} inputs: {res.message} (seed {x.seed})"


def _batch_case(x: Context) -> None:
    # a batch of three products, and B broadcast over it: each matrix its own product (every 2-D case passes a
    # backend that writes the first matrix's product into every slot)
    a = np.stack([x.rand(7, 5) for _ in range(3)])
    b = np.stack([x.rand(5, 6) for _ in range(3)])
    x.check(x.gemm(a, b), a, b)
    b2 = x.rand(5, 6)
    x.check(x.gemm(a, b2), a, b2)


def _strided_case(x: Context) -> None:
    big = x.rand(40, 2 * 23)
    a = big[:, ::2]  # neither row- nor column-major: copied once
    b = x.rand(23, 17)
    x.check(x.gemm(a, b), a, b)


def _scaling_cases() -> dict[str, Case]:
    def alpha_beta(x: Context) -> None:
        a, b, c = x.rand(33, 45), x.rand(45, 19), x.rand(33, 19)
        x.check(x.gemm(a, b, c, alpha=-1.5, beta=0.75), a, b, c, -1.5, 0.75)

    def in_place(x: Context) -> None:
        a, b, c = x.rand(21, 34), x.rand(34, 13), x.rand(21, 13)
        c0 = c.copy()
        got = x.gemm(a, b, c, alpha=2.0, beta=0.5, out=c)
        if got is not c:
            raise AssertionError("in-place gemm(out=c) did not return c")
        x.check(c, a, b, c0, 2.0, 0.5)

    def beta_zero_ignores_c(x: Context) -> None:
        # alpha != 1 too: a beta == 0 path that dropped alpha would pass every other case (none scales without c)
        a, b = x.rand(17, 9), x.rand(9, 23)
        c = x.poisoned(17, 23)
        x.check(x.gemm(a, b, c, alpha=-1.5, beta=0.0), a, b, None, -1.5)

    def alpha_without_c(x: Context) -> None:
        a, b = x.rand(19, 11), x.rand(11, 14)
        out = x.poisoned(19, 14)
        x.check(x.gemm(a, b, alpha=2.5), a, b, None, 2.5)
        if x.gemm(a, b, alpha=-0.75, out=out) is not out:
            raise AssertionError("gemm(a, b, alpha=..., out=...) did not return out itself")
        x.check(out, a, b, None, -0.75)

    def alpha_zero(x: Context) -> None:
        a, b, c = x.rand(8, 8), x.rand(8, 8), x.rand(8, 8)
        x.check(x.gemm(a, b, c, alpha=0.0, beta=1.0), a, b, c, 0.0, 1.0)

    def wide_scalars(x: Context) -> None:
        # alpha and beta are any finite float64, also beyond the range of the dtype (or of float32, the work type of
        # many kernels), with operands that keep the result finite: a backend scaling in float32 gives Inf for
        # alpha=1e39 and loses 40% to a float32 subnormal alpha. A backend whose kernels take
        # float32 scalars in products of this dtype (Backend.scalar_dtype) refuses those float32 cannot hold instead.
        from ..backend import fits_float32

        half = x.dtype.name == "float16"
        # (alpha, scale of a and b, beta, scale of c): past the top of the range, then below its normal numbers; the
        # products of a and b stay normal numbers (a product that underflows loses bits no error bound allows for)
        for alpha, ab, beta, cs in ((1e5, 1e-3, 1e5, 1e-4), (1e-6, 30.0, 1e-6, 1e3)) if half else \
                ((1e39, 1e-15, 1e39, 1e-37), (3e-41, 1e18, 3e-41, 1e37)):
            a, b = (x.rand(9, 7) * ab).astype(x.dtype), (x.rand(7, 6) * ab).astype(x.dtype)
            c = (x.rand(9, 6) * cs).astype(x.dtype)
            if x.backend.scalar_dtype(np.dtype(x.dtype)) == np.float32 and not (fits_float32(alpha) and fits_float32(beta)):
                try:
                    x.gemm(a, b, c, alpha=alpha, beta=beta)
                except UnsupportedProblemError:
                    continue
                raise AssertionError(f"alpha={alpha:g}, beta={beta:g} do not fit the float32 scalars this backend "
                                     f"declares (Backend.scalar_dtype), yet it computed instead of refusing them")
            x.check(x.gemm(a, b, c, alpha=alpha, beta=beta), a, b, c, alpha, beta)
            x.check(x.gemm(a, b, alpha=alpha), a, b, None, alpha)

    def fresh_results(x: Context) -> None:
        # a call without out returns an array of its own: not a buffer the next call overwrites, not c's memory (BLAS's
        # alpha = 0, beta = 1 shortcut hands back C itself)
        a, b, c = x.rand(12, 10), x.rand(10, 9), x.rand(12, 9)
        first = np.asarray(x.gemm(a, b))
        kept = first.copy()
        second = np.asarray(x.gemm((2 * a).astype(x.dtype), b))
        if np.shares_memory(first, second) or not np.array_equal(first, kept, equal_nan=True):
            raise AssertionError("a later call changed an earlier call's result (one buffer reused): each call without "
                                 "out must return a new array")
        got = np.asarray(x.gemm(a, b, c, alpha=0.0, beta=1.0))
        if np.shares_memory(got, c):
            raise AssertionError("gemm(a, b, c, alpha=0, beta=1) returned c's own memory: a call without out returns a "
                                 "new array and leaves c as it was")
        x.check(got, a, b, c, 0.0, 1.0)

    return {"alpha_beta_c": alpha_beta, "out_is_c": in_place, "beta0_nan_c": beta_zero_ignores_c, "alpha_no_c": alpha_without_c,
            "alpha0": alpha_zero, "wide_scalars": wide_scalars, "fresh_results": fresh_results}


def _empty_cases() -> dict[str, Case]:
    def mk(m: int, n: int, k: int, with_c: bool) -> Case:
        def case(x: Context) -> None:
            a, b = x.rand(m, k), x.rand(k, n)
            c = x.rand(m, n) if with_c else None
            got = np.asarray(x.gemm(a, b, c, beta=0.5 if with_c else 0.0))
            if got.shape != (m, n):
                raise AssertionError(f"result shape {got.shape}, expected {(m, n)}")
            expect = 0.5 * c if c is not None else np.zeros((m, n), x.dtype)
            want = expect.astype(x.dtype)
            if not np.array_equal(got, want):
                i, j = np.argwhere(got != want)[0] if (got != want).any() else (0, 0)
                raise AssertionError(f"K=0 must give beta*c (or zeros): at ({i}, {j}) got {got[i, j]!r}, expected "
                                     f"{want[i, j]!r} (seed {x.seed})")

        return case

    return {"M=0": mk(0, 5, 3, False), "N=0": mk(4, 0, 3, True), "K=0 beta*c": mk(6, 5, 0, True), "K=0 zeros": mk(6, 5, 0, False)}


def _nan_cases() -> dict[str, Case]:
    def nan_row(x: Context) -> None:
        a, b = x.rand(12, 10), x.rand(10, 7)
        a[3, 4] = np.nan
        got = np.asarray(x.gemm(a, b))
        if not np.isnan(got[3]).all():
            raise AssertionError("NaN in a[3, 4] must make row 3 of the result NaN")
        x.check(got, a, b)

    def inf(x: Context) -> None:
        a, b = (np.abs(x.rand(*shape)).astype(x.dtype) + 1 for shape in ((9, 6), (6, 11)))  # a complex |x| is real
        b[2, 5] = np.inf
        got = np.asarray(x.gemm(a, b))
        if x.dtype.kind == "c":  # Inf + NaN·i or NaN + NaN·i as the complex arithmetic goes (numpy.matmul's BLAS: the latter)
            if np.isfinite(got[:, 5]).any():
                raise AssertionError("+Inf in b[2, 5] must leave no element of column 5 finite")
        elif not np.isposinf(got[:, 5]).all():
            raise AssertionError("+Inf in b[2, 5] with positive a must make column 5 +Inf")
        x.check(got, a, b)

    def inf_times_zero(x: Context) -> None:
        a, b = x.rand(4, 3), x.rand(3, 4)
        a[1, 0], b[0, 2] = np.inf, 0.0
        got = np.asarray(x.gemm(a, b))
        if not np.isnan(got[1, 2]):
            raise AssertionError("Inf * 0 must give NaN (IEEE)")

    return {"nan_propagates": nan_row, "inf_propagates": inf, "inf_times_zero": inf_times_zero}


def _error_cases() -> dict[str, Case]:
    def expect(exc: type[BaseException], fragment: str, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except exc as e:
            if fragment not in str(e):
                raise AssertionError(f"{type(e).__name__} message lacks {fragment!r}: {e}") from e
            return
        except Exception as e:
            raise AssertionError(f"expected {exc.__name__}, got {type(e).__name__}: {e}") from e
        raise AssertionError(f"expected {exc.__name__}, nothing was raised")

    def cases(x: Context) -> dict[str, Callable[[], None]]:
        a, b = x.rand(4, 5), x.rand(5, 6)
        return {
            "1-D a": lambda: expect(errors.ShapeError, "at least 2-D", lambda: x.gemm(a[0], b)),
            "K mismatch": lambda: expect(errors.ShapeError, "(4, 5)", lambda: x.gemm(a, x.rand(4, 6))),
            "int dtype": lambda: _int_product(x, expect, a, b),
            "mixed dtypes": lambda: expect(errors.DTypeError, "one dtype", lambda: x.gemm(a, b.astype(_OTHER.get(x.dtype.name, np.float64)))),
            "c shape": lambda: expect(errors.ShapeError, "c must have the result's shape", lambda: x.gemm(a, b, x.rand(6, 4), beta=1.0)),
            "beta without c": lambda: expect(errors.ArgumentError, "needs c", lambda: x.gemm(a, b, beta=1.0)),
            "alpha nan": lambda: expect(errors.ArgumentError, "alpha must be finite", lambda: x.gemm(a, b, alpha=float("nan"))),
            "out overlaps a": lambda: expect(errors.ArgumentError, "out overlaps a", lambda: x.gemm(a[:, :4], x.rand(4, 5), out=a)),
            "out read-only": lambda: expect(errors.ArgumentError, "read-only", lambda: x.gemm(a, b, out=_readonly(x.poisoned(4, 6)))),
        }

    def _int_product(x: Context, expect: Callable[..., None], a: np.ndarray, b: np.ndarray) -> None:
        """int32 operands: numpy.matmul's exact result from a backend whose variant computes int32, else a DTypeError
        naming what the backend computes."""
        ai, bi = (np.real(a) * 8).astype(np.int32), (np.real(b) * 8).astype(np.int32)
        chosen = x.backend.get_variant(x.variant) if x.variant != "auto" else None
        if "int32" in (chosen.dtypes if chosen is not None else x.backend.dtypes()):
            got = np.asarray(x.backend.to_host(x.gemm(ai, bi)))
            if got.dtype != np.int32 or not np.array_equal(got, np.matmul(ai, bi)):
                raise AssertionError(f"an int32 product must be numpy.matmul's exactly; got {got.dtype} {got!r}")
            return
        expect(errors.DTypeError, "int32", lambda: x.gemm(ai, bi))

    def run_all(x: Context) -> None:
        failures = []
        for name, fn in cases(x).items():
            try:
                fn()
            except AssertionError as e:
                failures.append(f"{name}: {e}")
        if failures:
            raise AssertionError("; ".join(failures))

    return {"bad_inputs": run_all}


#: a dtype of the same kind as the one under test, for the case of operands of two dtypes
_OTHER = {"float64": np.float32, "complex64": np.complex128, "complex128": np.complex64}


def _readonly(x: np.ndarray) -> np.ndarray:
    x.flags.writeable = False
    return x


def _device_case(x: Context) -> None:
    be = x.backend
    if all(r == "host" for r in be.residencies):
        raise Skip(f"backend {be.name} takes host arrays only")
    m, n, k = 45, 38, 27
    a, b, c = x.rand(m, k), x.rand(k, n), x.rand(m, n)
    da, db, dc = be.to_device(a), be.to_device(b), be.to_device(c)
    got = x.gemm(da, db, dc, alpha=1.25, beta=-0.5)
    if isinstance(got, np.ndarray):
        raise AssertionError("device inputs gave a NumPy array; expected a device array")
    x.check(be.to_host(got), a, b, c, 1.25, -0.5)
    dout = be.to_device(x.poisoned(m, n))
    got2 = x.gemm(da, db, out=dout)
    x.check(be.to_host(got2), a, b)


#: what rule_out says of a backend whose supports() breaks the contract (raises, or answers other than None or a string)
_SUPPORTS_BROKEN = ("supports() returned", "supports()/variants()/get_variant() failed", "supports() gave an empty reason")


def _supports_case(x: Context) -> None:
    """device="auto" weighs a backend through its supports(), which an explicit device never asks: one that raises or
    answers other than None or a reason is never chosen, whatever its products are. A reason given is a skip saying
    it (auto passes the backend over for this product, as it may mean to)."""
    from ..problem import normalize
    from ..registry.dispatch import rule_out

    a, b = x.rand(64, 40), x.rand(40, 48)
    why = rule_out(x.backend, normalize(a, b), x.variant)
    if why is None:
        return
    if why.startswith(_SUPPORTS_BROKEN):
        raise AssertionError(f"device='auto' cannot weigh backend {x.backend.name!r}: {why} (seed {x.seed})")
    raise Skip(f"device='auto' passes backend {x.backend.name!r} over for a 64x48x40 {x.dtype.name} product: {why}")


def case_groups(quick: bool = False) -> dict[str, dict[str, Case]]:
    """The case grid: group name -> {case name -> case}."""
    shapes = QUICK_SHAPES if quick else SHAPES
    groups: dict[str, dict[str, Case]] = {
        "shapes": {f"{m}x{n}x{k}" + (" out=" if i % 2 else ""): _shape_case(m, n, k, bool(i % 2)) for i, (m, n, k) in enumerate(shapes)},
        "layouts": {},
        "scaling": _scaling_cases(),
        "empty": _empty_cases(),
        "nan_inf": _nan_cases(),
        "device": {"device_arrays": _device_case},
        "auto": {"supports": _supports_case},
        "errors": _error_cases(),
    }
    orders = ("C", "F") if quick else ("C", "F", "T")
    for oa in orders:
        for ob in orders:
            groups["layouts"][f"a={oa} b={ob}"] = _layout_case(oa, ob, "F" if (oa, ob) == ("F", "F") else "C")
    groups["layouts"]["strided_copy"] = _strided_case
    groups["layouts"]["padded_ld"] = _padded_case
    groups["scaling"]["threads"] = _threads_case
    groups["scaling"]["out_dtype"] = _out_dtype_case
    groups["shapes"]["batch"] = _batch_case
    return groups


