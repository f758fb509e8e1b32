"""``polygemm.gemm`` on Dask arrays: one polygemm call chain per output block, on the worker.

``polygemm.dask.gemm(A, B, c, alpha=..., beta=...)`` takes 2-D dask arrays (NumPy or CuPy
chunks) and returns a lazy dask array of ``alpha * A @ B + beta * c``. Every output block is
one task that runs :func:`polygemm.gemm` where the task runs (a ``distributed`` worker, one
per GPU under ``dask_cuda.LocalCUDACluster``, or a thread of the local scheduler), so the
reduction over K never leaves the task: there are no partial-product blocks and no sum tasks.

Dask is an optional dependency: ``pip install 'polygemm[dask]'`` (``dask[array]`` and
``distributed``); GPU clusters also want ``pip install 'polygemm[dask-cuda]'``. Importing this
module imports no dask; calling :func:`gemm` does.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, NoReturn

import numpy as np

from .errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from .core.arguments import misused_arguments
from .core.dtypes import (HALF_DTYPES, INTEGER_DTYPES, KNOWN_DTYPES, as_dtype, check_result_dtype,
                          integer_scalars_refusal, native_dtype, parse_dtype)
from .core.hints import cast_hint, promotion_hint
from .core.scalars import fits_float32, parse_scalar
from .core.inputs import ScalarInput
from .core.text import short_repr
from .interop.kinds import kind_of
from .core.precision import parse_precision
from .verification.modes import VerifyMode, parse_verify

__all__ = ["gemm", "DaskRechunkWarning"]

_EXTRA_HINT = "polygemm.dask needs dask: pip install 'polygemm[dask]' (dask[array] and distributed; 'polygemm[dask-cuda]' for GPU clusters)"


class DaskRechunkWarning(UserWarning):
    """polygemm.dask.gemm rechunked an operand (chunks over K, or c's chunks, did not line up)."""


def _dask_array() -> Any:
    try:
        import dask.array as da
    except ImportError as exc:  # dask missing, or dask without its array extra (numpy/toolz)
        raise ImportError(f"{_EXTRA_HINT}; import failed: {exc}") from exc
    return da


def _dtype_of(name: str, dtype: Any) -> np.dtype[Any]:
    return parse_dtype(name, dtype)


def _short(chunks: tuple[int, ...], limit: int = 6) -> str:
    if len(chunks) <= limit:
        return str(tuple(chunks))
    return f"({', '.join(map(str, chunks[:limit]))}, ... {len(chunks)} chunks)"


def _dim(size: Any) -> Any:
    """A dimension as an int, or NaN where dask does not know it yet."""
    return size if isinstance(size, float) and math.isnan(size) else int(size)


def _as_dask(name: str, x: Any, da: Any) -> Any:
    if not isinstance(x, da.Array):  # an argument of the wrong kind: a TypeError too, as polygemm.gemm's a=None is
        raise ArgumentTypeError(
            f"{name} must be a dask array; got {type(x).__module__}.{type(x).__name__}. Wrap it, e.g. "
            f"dask.array.from_array({name}, chunks=...) (or call polygemm.gemm for in-memory arrays)"
        )
    if x.ndim != 2:
        batch = (f" For a batch, multiply it matrix by matrix, e.g. dask.array.stack([polygemm.dask.gemm(A[i], B[i]) for i "
                 f"in range({x.shape[0]})]), or compute() both and call polygemm.gemm, which takes batches" if x.ndim > 2 else "")
        raise ShapeError(f"{name} must be a 2-D dask array (a matrix); got {x.ndim}-D shape {x.shape}: polygemm.dask.gemm "
                         f"multiplies matrices.{batch}")
    inner = 1 if name == "A" else 0  # K: A's columns, B's rows, which the blocks are matched over
    if math.isnan(x.shape[inner]):
        raise ShapeError(f"{name} has unknown chunk sizes along K (shape {x.shape}); call {name}.compute_chunk_sizes() "
                         f"first (unknown {'rows of A' if name == 'A' else 'columns of B'}, as boolean indexing leaves them, "
                         f"are taken as they are)")
    _refuse_masked(name, x)
    if not isinstance(x.dtype, np.dtype):  # chunks of another library (torch's tensors): dtype is its own, not NumPy's
        raise ArgumentTypeError(f"{name} is a dask array of {type(getattr(x, '_meta', x)).__name__} chunks (dtype {x.dtype}); "
                                f"polygemm.dask.gemm takes chunks of NumPy or CuPy arrays: convert them, e.g. "
                                f"{name}.map_blocks(lambda t: t.numpy()) for CPU torch tensors")
    meta = getattr(x, "_meta", None)
    if meta is not None and not isinstance(meta, np.ndarray) and kind_of(meta) != "cupy":
        # chunks of a kind polygemm.gemm refuses (a SciPy sparse matrix): said now, by the name given, not at compute()
        dense = f"{name}.map_blocks(lambda m: m.toarray())" if hasattr(meta, "toarray") else f"{name}.map_blocks(numpy.asarray)"
        raise ArgumentTypeError(f"{name} is a dask array of {type(meta).__module__.partition('.')[0]}.{type(meta).__name__} "
                                f"chunks; polygemm.dask.gemm takes chunks of NumPy or CuPy arrays: convert them, e.g. {dense}")
    if x.dtype.name not in KNOWN_DTYPES:
        raise DTypeError(f"{name} has dtype {x.dtype.name}; polygemm.dask.gemm computes {', '.join(KNOWN_DTYPES)}, as "
                         f"polygemm.gemm does: cast {name} to one of them ({name}.astype(...))")
    return x


def _refuse_masked(name: str, x: Any) -> None:
    """A masked operand (NumPy's, or a dask array of masked chunks) is refused when the graph is
    built, by the name the user gave it (``A``/``B``), not in compute() under polygemm.gemm's
    lower-case ``a``/``b`` (the tasks' names)."""
    meta = getattr(x, "_meta", x)
    if isinstance(meta, np.ma.MaskedArray):
        lazy = meta is not x
        fill = f"dask.array.ma.filled({name}, 0)" if lazy else f"{name}.filled(0)"
        data = f"dask.array.ma.getdata({name})" if lazy else f"{name}.data"
        raise ArgumentError(f"{name} is a masked array; polygemm ignores no mask. Fill it first, e.g. {fill}, or pass {data}")


def _check_variant(variant: str, device: str | None, dtype: np.dtype[Any]) -> None:
    """Refuse, when the graph is built, a variant no task could run: one the named backend's
    static table lacks (or that does not compute ``dtype``), or, for ``device=None`` or
    ``"auto"`` (each worker's choice), one no discovered backend has. Whether it can run on a
    worker's device stays the workers' to say."""
    from . import registry
    from .errors import BackendUnavailableError, PolygemmError, UnsupportedProblemError

    name = None if device is None else registry.resolve_device(device)
    if variant == "auto" and name in (None, "auto"):  # each worker's choice among its backends
        return
    if name is not None and name != "auto":
        found, _ = registry.lookup(name)  # the backend itself, not its device N: that is the workers'
        if found is None:  # refused already by registry.check_known
            return
        try:
            be = registry.get_backend(found)  # imported, not probed
        except BackendUnavailableError:  # a plugin that failed to import: its tasks say so
            return
        if variant == "auto":  # whichever variant auto picks computes one of the backend's dtypes
            kinds = tuple(be.dtypes())
            if dtype.name not in kinds:
                raise DTypeError(f"backend {be.name!r} computes {', '.join(kinds)}, not {dtype.name}; pass device=None for "
                                 f"each worker's choice, or a backend that computes {dtype.name} (polygemm variants lists what each computes)")
            return
        try:
            chosen = be.get_variant(variant)  # raises UnsupportedProblemError naming the known variants
        except PolygemmError:
            raise
        except Exception:  # a plugin's own failure: the tasks report it
            return
        if dtype.name not in chosen.dtypes:
            raise DTypeError(f"variant {short_repr(variant)} of backend {be.name!r} computes {', '.join(chosen.dtypes)}, not {dtype.name}")
        return
    having: list[str] = []  # "backend: dtypes" of each backend with the variant, none of which computes dtype
    for known in registry.known_names():
        try:
            be = registry.get_backend(known)
        except BackendUnavailableError:
            continue
        try:
            chosen = be.get_variant(variant)
        except Exception:
            continue
        kinds = tuple(getattr(chosen, "dtypes", ()) or ())
        if not kinds or dtype.name in kinds:  # (a plugin's variant that declares no dtypes: the tasks say)
            return
        having.append(f"{be.name!r} computes {', '.join(kinds)}")
    if having:  # every worker would refuse it, whichever backend it has: said now, as for a named device
        raise DTypeError(f"variant {short_repr(variant)} computes no {dtype.name} (backend {'; backend '.join(having)}); "
                         f"pass variant='auto', or a variant that computes {dtype.name} (polygemm variants lists what each computes)")
    raise UnsupportedProblemError(f"no backend has variant {short_repr(variant)} (device={short_repr(device)} leaves the choice to each worker); "
                                  "polygemm variants lists every backend's variants")


def _astype(x: Any, dtype: np.dtype[Any]) -> Any:
    if hasattr(x, "astype"):
        return x.astype(dtype)
    import torch  # a torch chunk: the only array kind here without .astype

    return x.to(getattr(torch, dtype.name))


def _located_block_gemm(*blocks: Any, **kw: Any) -> Any:
    """:func:`_block_gemm` of a task whose last two arguments are its block's row and column indices in the result (the
    blocks of ``arange`` over M and N): a failed check is said of the whole result's rows and columns, not the block's."""
    import polygemm

    *operands, rows, cols = blocks
    try:
        return _block_gemm(*operands, **kw)
    except polygemm.VerificationError as exc:
        r0, c0 = int(rows[0]) if len(rows) else 0, int(cols[0]) if len(cols) else 0
        raise polygemm.VerificationError(
            f"{exc} (this block holds the result's rows {r0} to {r0 + len(rows) - 1} and columns {c0} to {c0 + len(cols) - 1}: "
            f"the rows and columns named are the block's, from {r0} and {c0})", report=exc.report) from exc


def _block_gemm(a_blocks: Any, b_blocks: Any, c_block: Any = None, *, alpha: float, beta: float, device: str | None,
                variant: str, result_dtype: str, verify: str | None = None, precision: str | None = None) -> Any:
    """One output block: ``alpha * sum_k a_k @ b_k + beta * c`` by polygemm.gemm on this worker.

    ``a_blocks`` are the blocks (i, 0..nk-1) of A, ``b_blocks`` the blocks (0..nk-1, j) of B.
    The first product writes the block (with ``beta * c``, or beta = 0); each further K block
    accumulates into it in place with beta = 1. A float16 or bfloat16 result over several K
    blocks accumulates in float32 and is rounded once at the end. A floating result over several
    K blocks with alpha other than 0 and 1 sums the blocks' products unscaled, then scales the sum
    and adds ``beta * c``: alpha applied to each block's product could overflow where their sum
    does not (3e38 - 3e38 in float32 with alpha = 2).
    """
    import polygemm

    if not isinstance(a_blocks, (list, tuple)):
        a_blocks = [a_blocks]
    if not isinstance(b_blocks, (list, tuple)):
        b_blocks = [b_blocks]
    result = as_dtype(result_dtype)
    widen = result.name in HALF_DTYPES and len(a_blocks) > 1  # float16 and bfloat16
    acc_dtype = np.dtype(np.float32) if widen else result
    kw: dict[str, Any] = {"device": device, "variant": variant, "verify": verify, "precision": precision}
    a0, b0 = a_blocks[0], b_blocks[0]
    if len(a_blocks) > 1 and alpha not in (0.0, 1.0) and (result.kind in "fc" or result.name in HALF_DTYPES):
        return _scaled_once(a_blocks, b_blocks, c_block, alpha, beta, kw, acc_dtype, result)
    if c_block is not None and beta != 0.0:
        if widen:
            acc = _astype(c_block, acc_dtype)  # a fresh copy: updated in place
            acc = polygemm.gemm(a0, b0, acc, alpha=alpha, beta=beta, out=acc, **kw)
        else:  # the input block is never written: a new result
            acc = polygemm.gemm(a0, b0, c_block, alpha=alpha, beta=beta, out_dtype=acc_dtype, **kw)
    else:
        acc = polygemm.gemm(a0, b0, alpha=alpha, out_dtype=acc_dtype, **kw)
    for ak, bk in zip(a_blocks[1:], b_blocks[1:]):
        if result.name == "bool":  # a logical product: the K blocks' products or-ed (no beta adds them)
            acc = acc | polygemm.gemm(ak, bk, **kw)
        else:
            acc = polygemm.gemm(ak, bk, acc, alpha=alpha, beta=1.0, out=acc, **kw)
    return _astype(acc, result) if widen else acc


#: the sum's dtype that a float32-class accumulator scales in where alpha or beta does not survive as float32
_WIDER = {"float32": "float64", "complex64": "complex128"}


def _scaled_once(a_blocks: Any, b_blocks: Any, c_block: Any, alpha: float, beta: float, kw: dict[str, Any],
                 acc_dtype: np.dtype[Any], result: np.dtype[Any]) -> Any:
    """``alpha * sum_k a_k @ b_k + beta * c`` over several K blocks, alpha applied once to the sum."""
    import polygemm

    acc = polygemm.gemm(a_blocks[0], b_blocks[0], out_dtype=acc_dtype, **kw)
    for ak, bk in zip(a_blocks[1:], b_blocks[1:]):
        acc = polygemm.gemm(ak, bk, acc, beta=1.0, out=acc, **kw)
    wider = _WIDER.get(acc_dtype.name)
    if wider is not None and not (fits_float32(alpha) and fits_float32(beta)):
        # alpha=1e39 is inf in float32 and 1e-46 is 0 there, where the scaled result is finite and nonzero (as
        # polygemm.gemm gives it, and one K block would): such scalars scale the sum in float64
        acc = _astype(acc, np.dtype(wider))
    acc *= acc.dtype.type(alpha)
    if c_block is not None and beta != 0.0:
        acc += _astype(c_block, acc.dtype) * acc.dtype.type(beta)
    if acc.dtype == result:
        return acc
    with np.errstate(over="ignore"):  # a sum past the result's range is inf there, as polygemm.gemm writes it
        return _astype(acc, result)


#: A or B not given by position (gemm(a=..., b=...), polygemm.gemm's keywords): taken from the keywords, or refused
_NOT_GIVEN: Any = object()


def gemm(
    A: Any = _NOT_GIVEN,
    B: Any = _NOT_GIVEN,
    c: Any = None,
    *extra: NoReturn,
    alpha: ScalarInput = 1.0,
    beta: ScalarInput | None = None,
    device: str | None = None,
    variant: str = "auto",
    out_dtype: Any = None,
    precision: str | None = None,
    verify: VerifyMode = None,
    **unexpected: NoReturn,
) -> Any:
    """Return the lazy dask array ``alpha * (A @ B) + beta * c``, each block by polygemm.gemm.

    ``A`` (M×K) and ``B`` (K×N) are 2-D dask arrays of one dtype (any polygemm.gemm computes: float16, bfloat16, float32, float64,
    complex64, complex128, the integers and bool, each as polygemm.gemm computes it)
    with NumPy or CuPy chunks; the result has A's row chunks and B's column chunks, blocks of
    the chunks' kind (CuPy chunks give CuPy blocks). ``c`` (optional, the result's shape and
    dtype; a dask array, or an array that is chunked like the result) is read only when
    ``beta != 0``; ``beta`` defaults to 1.0 when ``c`` is given (``A @ B + c``, as polygemm.gemm) and
    to 0.0 otherwise. ``out_dtype`` asks for a float32 result from float16 inputs. ``device`` and
    ``variant`` are passed to :func:`polygemm.gemm` in every task (``device`` may be the operands'
    device object, ``torch.device`` or ``cupy.cuda.Device``, passed by its name): ``device=None`` is each
    worker's default (``$POLYGEMM_DEVICE`` or auto, i.e. the GPU a ``LocalCUDACluster`` worker
    sees), ``"cpu"`` the float64-accumulating NumPy backend, ``"cuda"`` the CUDA kernels.

    **How the work is cut.** Output block (i, j) is ONE task. It receives the row panel of A
    (blocks (i, 0), ..., (i, nk-1)) and the column panel of B (blocks (0, j), ..., (nk-1, j))
    and runs one polygemm.gemm per K block, the first writing the block (with ``beta * c``),
    the others accumulating into it in place with ``beta = 1``. So the graph has one task per
    output block and no partial-product blocks or sum tasks (``dask.array.matmul`` makes
    mb·nb·kb partial products and then sums them over K in further tasks, moving every partial
    C block). A float16 result with several K blocks accumulates in a float32 block and is
    rounded once (the accuracy of one call; 2 extra bytes per element of that block). float32 and
    complex64 results add each K block's product into the block in their own dtype: each addition
    rounds once, so the error bound grows with the number of K blocks; measured errors stay near one
    call's, as blocked sums do (random data, K = 200,000 in 200 K chunks on the cpu: 1.7e-7 mean relative
    error against one call's 2.6e-7).

    **Choosing chunks.**

    - Memory per task = A's row panel (chunk_m × K) + B's column panel (K × chunk_n) + one C
      block (chunk_m × chunk_n), all on that worker at once (the panels arrive from wherever
      their blocks live). With a tall K, K is what grows: use fewer, larger output blocks only
      if the panels fit; the K chunking itself does not change the memory of a task.
    - The number of K chunks is the number of polygemm calls per task: fewer, larger K chunks
      mean fewer, larger GEMMs (better kernel efficiency, fewer launches). One K chunk is best
      when A's and B's blocks are made for this product.
    - The number of output blocks (M/chunk_m × N/chunk_n) is the parallelism: give each
      worker (GPU) several blocks, e.g. 8 blocks of 8192×8192 for a 32768² result on 2 GPUs;
      much smaller blocks make small GEMMs and more scheduler work.
    - Traffic: each A block is read by every task of its block row (N/chunk_n tasks) and each
      B block by every task of its block column; a worker pulls the blocks it lacks once and
      keeps them while it computes. Larger output blocks mean fewer copies of the panels.
    - A's column chunks and B's row chunks must agree over K. When they do not, the operand
      with more K chunks is rechunked to the other's chunks, with a :class:`DaskRechunkWarning`
      (a rechunk moves data: chunk A and B alike over K to avoid it). A ``c`` chunked unlike
      the result is rechunked to the result's chunks, with the same warning.

    Shapes and dtypes are checked when the graph is built: ShapeError, DTypeError or
    ArgumentError (naming the argument), and an unknown ``device`` name. Errors of the block
    computations (device failures, a backend that cannot run on a worker) surface from
    ``compute()``, as polygemm.gemm raises them.
    ``precision`` ("highest", "high", "medium") is passed to every polygemm.gemm of a task (None: each
    worker's default, ``polygemm.set_float32_matmul_precision``'s or ``$POLYGEMM_PRECISION``).
    ``verify`` is passed to every polygemm.gemm of a task, so each product of each block is checked
    (None: each worker's default, ``polygemm.set_verify``'s or ``$POLYGEMM_VERIFY``); a failed check
    surfaces from ``compute()`` as the VerificationError of that block.
    Raises ImportError naming ``pip install 'polygemm[dask]'`` when dask is not installed.
    """
    for key, given in (("a", A), ("b", B)):  # by position and by keyword: Python's word for it, as polygemm.gemm's
        if key in unexpected and given is not _NOT_GIVEN:
            raise ArgumentTypeError(f"polygemm.dask.gemm() got multiple values for argument {key!r}: pass it by position "
                                    f"or as {key}=, not both")
    if A is _NOT_GIVEN and "a" in unexpected:  # polygemm.gemm's names for them
        A = unexpected.pop("a")
    if B is _NOT_GIVEN and "b" in unexpected:
        B = unexpected.pop("b")
    if extra or unexpected:  # another library's spelling (out=, dtype=, trans_a=): say polygemm's, as gemm does
        raise misused_arguments("polygemm.dask.gemm", extra, unexpected)
    if A is _NOT_GIVEN or B is _NOT_GIVEN:
        missing = " and ".join(name for name, x in (("A", A), ("B", B)) if x is _NOT_GIVEN)
        raise ArgumentTypeError(f"polygemm.dask.gemm needs {missing}: pass the two dask arrays first, "
                                f"polygemm.dask.gemm(A, B, c, alpha=..., beta=...)")
    da = _dask_array()
    A = _as_dask("A", A, da)
    B = _as_dask("B", B, da)
    if beta is None:
        beta = 0.0 if c is None else 1.0
    alpha_f = parse_scalar("alpha", alpha)
    beta_f = parse_scalar("beta", beta)
    checked = verify is not None and parse_verify(verify) is not None  # (a bad value fails now, not at compute())
    if precision is not None:
        precision = parse_precision(precision)
    if not isinstance(variant, str):
        raise ArgumentTypeError(f"variant must be a string (a variant name or 'auto'); got {short_repr(variant)}")
    if device is not None:  # a misspelt name fails now, not at compute() (whether it runs is the workers' to say)
        from . import registry

        # device=tensor.device or cupy.cuda.Device(1) as polygemm.gemm takes them, passed
        # to the tasks by name; anything else is the ArgumentTypeError saying what is accepted
        device = registry.device_arg_name(device)
        registry.check_known(device)
    if variant != "auto" or device is not None:  # a variant or device named: what it computes, checked now
        _check_variant(variant, device, A.dtype)
    # M and N may be unknown (A's rows, B's columns picked by a boolean index): each block's is known when it runs
    m, k = _dim(A.shape[0]), int(A.shape[1])
    kb, n = int(B.shape[0]), _dim(B.shape[1])
    if k != kb:
        raise ShapeError(f"inner dimensions differ: A is {A.shape} and B is {B.shape}; A.shape[1] (K={k}) must equal B.shape[0] ({kb})")
    # a non-native byte order ('>f8') is the same dtype to polygemm.gemm, which copies such an operand once and writes
    # its results in this machine's order: compared in native order here (not "float64 and float64 differ"), and the
    # graph's dtype is that of its blocks
    if native_dtype(A.dtype) != native_dtype(B.dtype):
        how = promotion_hint(("A", A, native_dtype(A.dtype)), ("B", B, native_dtype(B.dtype)))  # the narrower up, as numpy.matmul computes
        raise DTypeError(f"A and B must share one dtype; got A {A.dtype.name} and B {B.dtype.name}. Cast to one dtype, e.g. {how}")
    result = native_dtype(A.dtype) if out_dtype is None else _dtype_of("out_dtype", out_dtype)
    check_result_dtype(native_dtype(A.dtype), result, "out_dtype")
    if result.name in INTEGER_DTYPES:  # whole factors in the dtype's range, none for bool: refused now, not at compute()
        why = integer_scalars_refusal(result.name, alpha_f, beta_f if c is not None else 0.0)
        if why is not None:
            raise ArgumentError(why)

    use_c = False
    given_c = c  # what the user passed: a list is told a cast a list has
    # a string (NumPy's 0-D array of text) or an object NumPy reads as an object array: no matrix
    no_matrix = f"c must be a matrix (a dask, NumPy or CuPy array of the result's shape {(m, n)}); got {type(c).__name__}"
    if isinstance(c, (str, bytes, bytearray)):
        raise ArgumentTypeError(f"{no_matrix} {c!r:.40}")
    if c is not None and not hasattr(c, "shape"):  # a list, a number, any other object: read as polygemm.gemm reads it
        c = np.asarray(c)
        if c.dtype == object:
            raise ArgumentTypeError(f"{no_matrix}, which NumPy reads as an object array")
    if c is not None and not isinstance(c, da.Array) and hasattr(c, "dtype") and not isinstance(c.dtype, np.dtype):
        # an in-memory c of another library (a torch tensor): dask chunks NumPy and CuPy arrays only
        raise ArgumentTypeError(f"c is a {type(c).__module__}.{type(c).__name__}; polygemm.dask.gemm takes c as a dask array or "
                                f"a NumPy or CuPy array chunked like the result: pass c.numpy() for a CPU torch tensor, or "
                                f"dask.array.from_array(...) of NumPy data")
    if c is not None:
        shape = tuple(int(x) if not isinstance(x, float) else x for x in getattr(c, "shape", ()))
        if any(isinstance(x, float) and math.isnan(x) for x in shape):
            raise ShapeError(f"c has unknown chunk sizes (shape {shape}); call c.compute_chunk_sizes() first")
        if isinstance(m, float) or isinstance(n, float):  # no c can be matched to blocks of sizes not yet known
            raise ShapeError(f"c needs the result's shape, which is unknown until A and B are computed ({(m, n)}: A is "
                             f"{A.shape} and B is {B.shape}); call compute_chunk_sizes() on A and B first, or add c to the "
                             f"result")
        if shape != (m, n):
            try:  # one that broadcasts to it (a bias row, a scalar), as A @ B + c would take it: said how to pass it
                fits = tuple(np.broadcast_shapes(tuple(int(x) for x in shape), (m, n))) == (m, n)
            except ValueError:
                fits = False
            how = ("dask.array.broadcast_to(c, ...)" if isinstance(c, da.Array) else "np.broadcast_to(c, ...)").replace(
                "...", f"{(m, n)}")
            hint = f". It broadcasts to that shape: pass it broadcast, e.g. {how}" if fits else ""
            raise ShapeError(f"c must have the result's shape {(m, n)} for A {A.shape} and B {B.shape}; got {shape}{hint}")
        c_dtype = getattr(c, "dtype", None)
        if isinstance(c_dtype, np.dtype):  # its byte order aside, as polygemm.gemm takes a '>f8' c
            c_dtype = native_dtype(c_dtype)
        if c_dtype is None or _dtype_of("c's dtype", c_dtype) != result:
            # with the cast to make, as polygemm.gemm says it
            widen = (" (or out_dtype=numpy.float32 for a float32 result)" if out_dtype is None and result.name in HALF_DTYPES
                     and getattr(c, "dtype", None) == np.float32 else "")
            raise DTypeError(f"c must have the dtype of the result ({result.name}); got {getattr(c, 'dtype', type(c).__name__)}. "
                             f"Cast it, e.g. {cast_hint('c', given_c, result).replace('np.', 'numpy.')}{widen}")
        _refuse_masked("c", c)  # whatever beta, as polygemm.gemm refuses it
        use_c = beta_f != 0.0
    elif beta_f != 0.0:
        raise ArgumentError(f"beta={beta!r} needs c: pass c (shape {(m, n)}) or set beta=0")

    if A.chunks[1] != B.chunks[0]:
        a_k, b_k = A.chunks[1], B.chunks[0]
        if len(b_k) < len(a_k):  # the operand with more K chunks follows the other's
            A, moved, target = A.rechunk({1: b_k}), "A's columns", "B's row chunks"
        else:
            B, moved, target = B.rechunk({0: a_k}), "B's rows", "A's column chunks"
        warnings.warn(
            f"polygemm.dask.gemm: chunks over K differ (A's column chunks {_short(a_k)}, B's row chunks {_short(b_k)}); "
            f"rechunking {moved} to {target}. Chunk A's columns and B's rows alike to avoid this rechunk",
            DaskRechunkWarning,
            stacklevel=2,
        )

    out_chunks = (A.chunks[0], B.chunks[1])
    if use_c:
        if not isinstance(c, da.Array):  # an in-memory c: chunked like the result
            c = da.from_array(c, chunks=out_chunks, asarray=False)
        if c.chunks != out_chunks:
            warnings.warn(
                f"polygemm.dask.gemm: c's chunks ({_short(c.chunks[0])}, {_short(c.chunks[1])}) differ from the result's "
                f"({_short(out_chunks[0])}, {_short(out_chunks[1])}: A's rows, B's columns); rechunking c",
                DaskRechunkWarning,
                stacklevel=2,
            )
            c = c.rechunk(out_chunks)

    from dask.array.utils import meta_from_array
    from dask.base import tokenize

    meta = meta_from_array(A, ndim=2, dtype=result)  # type: ignore[no-untyped-call]
    args: list[Any] = [A, "ik", B, "kj"]
    if use_c:
        args += [c, "ij"]
    if checked and not any(math.isnan(x) for x in out_chunks[0] + out_chunks[1]):
        # each task told where its block lies (its rows and columns of the result), for a failed check to say so
        args += [da.arange(A.shape[0], chunks=(out_chunks[0],)), "i", da.arange(B.shape[1], chunks=(out_chunks[1],)), "j"]
    token = tokenize(A, B, c if use_c else None, alpha_f, beta_f if use_c else 0.0, device, variant, result.name, verify, precision)
    return da.blockwise(
        _located_block_gemm if len(args) > (6 if use_c else 4) else _block_gemm, "ij", *args,
        name=f"polygemm-gemm-{token}",
        dtype=result,
        meta=meta,
        concatenate=False,  # the task gets the lists of K blocks: K is folded inside it
        align_arrays=False,  # chunks were aligned above (with a warning where they were not)
        alpha=alpha_f, beta=beta_f if use_c else 0.0, device=device, variant=variant, result_dtype=result.name, verify=verify,
        precision=precision,
    )
