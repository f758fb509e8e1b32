"""Tensor maps (``CUtensorMap``) for the Hopper TMA kernels (``hgemm/v2_wgmma_tma.cu``).

A TMA kernel receives, per operand, a 128-byte opaque ``CUtensorMap`` by value (a
``__grid_constant__`` kernel parameter) describing the matrix as stored: base address,
extents, the byte stride of the outer dimension, the box (tile) one copy moves and the
shared-memory swizzle. This module encodes them with the driver's
``cuTensorMapEncodeTiled`` (``libcuda.so.1`` through ctypes; no context needed) and returns
``numpy.void`` scalars (dtype ``V128``), which PyCUDA packs into the argument buffer as raw
bytes. TMA rules the encoder enforces: the base address is 16-byte aligned, the leading
dimension (in bytes) is a multiple of 16, the box's inner extent times the element size is
at most the swizzle span (128 bytes for ``"128b"``) and every box extent is at most 256.

Launching through PyCUDA: PyCUDA packs the arguments into one buffer with natural C
alignment starting at offset 0 (``CU_LAUNCH_PARAM_BUFFER_POINTER``), but ptxas places a
``__grid_constant__ CUtensorMap`` parameter at a 128-byte aligned *constant-bank* address:
on sm_90 the parameters start at bank offset 0x210, so the first tensor map sits at
parameter offset 0x70 (112), not 0 (read back with :func:`first_param_offset`). Pass
:func:`param_padding` (a ``V112`` scalar) as the first PyCUDA argument; a launch through
``cuLaunchKernel``'s ``kernelParams`` array needs nothing (the driver places each argument).

:func:`hgemm_v2_layout` is the one place that says which boxes and how much dynamic shared
memory ``hgemm_v2_wgmma_tma`` needs for a given tile configuration; the kernel's defaults
(``PG_BN``, ``HG2_CONSUMERS``, ``PG_STAGES``, ``PG_CLUSTER_M``, ``PG_CLUSTER_N``; the tile
vocabulary of kernels/README.md) match
:data:`HGEMM_V2_DEFAULT`.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from typing import Literal, cast

import numpy as np

from polygemm.errors import DeviceError

__all__ = [
    "Layout",
    "Swizzle",
    "TENSOR_MAP_BYTES",
    "encode_tiled_2d",
    "HgemmV2Config",
    "HgemmV2Layout",
    "HGEMM_V2_DEFAULT",
    "hgemm_v2_layout",
    "hgemm_v2_c_map",
    "hgemm_v2_tensor_maps",
    "first_param_offset",
    "param_padding",
    "TENSOR_MAP_DTYPES",
]

Layout = Literal["row", "col"]
Swizzle = Literal["none", "32b", "64b", "128b"]

TENSOR_MAP_BYTES = 128

# cuda.h enumerators (CUDA 12.x / 13.x).
_DTYPE_CODES: dict[int, int] = {2: 6, 4: 7}  # element bytes -> FLOAT16, FLOAT32 (the default per size)
#: CUtensorMapDataType by dtype name. A tiled copy with zero out-of-bounds fill moves bits as
#: they are, so FLOAT16 would copy bfloat16 correctly too; the map says what it holds anyway.
TENSOR_MAP_DTYPES: dict[str, int] = {"float16": 6, "float32": 7, "bfloat16": 9}
_SWIZZLE_CODES: dict[str, int] = {"none": 0, "32b": 1, "64b": 2, "128b": 3}
_SWIZZLE_SPAN: dict[str, int] = {"none": 1 << 30, "32b": 32, "64b": 64, "128b": 128}
_INTERLEAVE_NONE = 0
_L2_PROMOTION_256B = 3
_OOB_FILL_ZERO = 0  # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: out-of-bounds elements read as 0


class _TensorMap(ctypes.Structure):
    _fields_ = [("opaque", ctypes.c_uint64 * 16)]


@functools.lru_cache(maxsize=1)
def _libcuda() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:  # pragma: no cover - depends on the machine
        raise DeviceError(f"cannot load libcuda.so.1 for cuTensorMapEncodeTiled: {exc}") from exc
    fn = lib.cuTensorMapEncodeTiled
    fn.restype = ctypes.c_int
    fn.argtypes = [
        ctypes.POINTER(_TensorMap),  # tensorMap
        ctypes.c_int,  # tensorDataType
        ctypes.c_uint32,  # tensorRank
        ctypes.c_void_p,  # globalAddress
        ctypes.POINTER(ctypes.c_uint64),  # globalDim
        ctypes.POINTER(ctypes.c_uint64),  # globalStrides (rank - 1, bytes)
        ctypes.POINTER(ctypes.c_uint32),  # boxDim
        ctypes.POINTER(ctypes.c_uint32),  # elementStrides
        ctypes.c_int,  # interleave
        ctypes.c_int,  # swizzle
        ctypes.c_int,  # l2Promotion
        ctypes.c_int,  # oobFill
    ]
    lib.cuGetErrorString.restype = ctypes.c_int
    lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    lib.cuGetErrorName.restype = ctypes.c_int
    lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    return lib


def _error_text(lib: ctypes.CDLL, code: int) -> str:
    name = ctypes.c_char_p()
    text = ctypes.c_char_p()
    lib.cuGetErrorName(code, ctypes.byref(name))
    lib.cuGetErrorString(code, ctypes.byref(text))
    n = name.value.decode() if name.value else f"CUresult {code}"
    t = text.value.decode() if text.value else "unknown error"
    return f"{n}: {t}"


def encode_tiled_2d(
    ptr: int,
    rows: int,
    cols: int,
    ld: int,
    layout: Layout,
    box_rows: int,
    box_cols: int,
    swizzle: Swizzle = "128b",
    itemsize: int = 2,
    batch: tuple[int, int] | None = None,
    dtype: str | None = None,
) -> np.void:
    """Encode a 2-D tiled tensor map for a ``rows x cols`` matrix at device address ``ptr``
    (3-D with ``batch`` = (matrices, byte stride from one to the next): the batch is the
    map's third dimension, box extent 1; a stride of 0 (one matrix shared) gives extent 1).

    ``layout="row"``: element (r, c) at ``ptr + (r*ld + c)*itemsize`` (cols contiguous);
    ``layout="col"``: element (r, c) at ``ptr + (r + c*ld)*itemsize`` (rows contiguous).
    ``box_rows x box_cols`` is the tile one copy moves, in the same logical terms; its
    contiguous extent lands in shared memory as rows of ``extent*itemsize`` bytes, swizzled
    with ``swizzle``. Elements outside the matrix are filled with zeros.

    ``dtype`` names the element type (float16, bfloat16, float32; default: float16 or float32
    by ``itemsize``). Returns the 128-byte map as a ``numpy.void`` scalar (pass it to a PyCUDA
    kernel by value).
    Raises :class:`~polygemm.errors.DeviceError` when the driver rejects the map (its error
    string included) or the arguments break a TMA rule checked here first.
    """
    if itemsize not in _DTYPE_CODES:
        raise DeviceError(f"tensor map: unsupported element size {itemsize}")
    code = _DTYPE_CODES[itemsize] if dtype is None else TENSOR_MAP_DTYPES.get(dtype, -1)
    if code < 0:
        raise DeviceError(f"tensor map: unsupported element type {dtype!r} (supported: {', '.join(TENSOR_MAP_DTYPES)})")
    if layout not in ("row", "col"):
        raise DeviceError(f"tensor map: layout must be 'row' or 'col', not {layout!r}")
    if swizzle not in _SWIZZLE_CODES:
        raise DeviceError(f"tensor map: unknown swizzle {swizzle!r}")
    # (inner, outer) = (contiguous, strided) dimension, TMA's dimension order.
    if layout == "row":
        dims, box = (cols, rows), (box_cols, box_rows)
    else:
        dims, box = (rows, cols), (box_rows, box_cols)
    if min(dims) < 1 or ld < dims[0]:
        raise DeviceError(f"tensor map: bad extents {rows}x{cols} with leading dimension {ld}")
    if ptr % 16 or (ld * itemsize) % 16:
        raise DeviceError(
            f"tensor map: TMA needs a 16-byte aligned base and a leading dimension that is a "
            f"multiple of 16 bytes (address {ptr:#x}, ld {ld} elements of {itemsize} bytes)"
        )
    if not all(1 <= b <= 256 for b in box) or (box[0] * itemsize) % 16:
        raise DeviceError(f"tensor map: bad box {box_rows}x{box_cols}")
    if box[0] * itemsize > _SWIZZLE_SPAN[swizzle]:
        raise DeviceError(f"tensor map: box inner extent {box[0] * itemsize} B exceeds the {swizzle} swizzle span")

    lib = _libcuda()
    tmap = _TensorMap()
    if batch is None:
        rank, gdims, gstrides, boxes = 2, [dims[0], dims[1]], [ld * itemsize], [box[0], box[1]]
    else:
        count, stride = batch
        if stride % 16:
            raise DeviceError(f"tensor map: the batch stride ({stride} bytes) must be a multiple of 16")
        span = -(-ld * itemsize * dims[1] // 16) * 16  # any valid stride: extent 1 never steps
        rank = 3
        gdims = [dims[0], dims[1], count if stride else 1]
        gstrides = [ld * itemsize, stride if stride else span]
        boxes = [box[0], box[1], 1]
    gdim = (ctypes.c_uint64 * rank)(*gdims)
    gstride = (ctypes.c_uint64 * (rank - 1))(*gstrides)
    bdim = (ctypes.c_uint32 * rank)(*boxes)
    estride = (ctypes.c_uint32 * rank)(*([1] * rank))
    rc = lib.cuTensorMapEncodeTiled(
        ctypes.byref(tmap),
        code,
        rank,
        ctypes.c_void_p(ptr),
        gdim,
        gstride,
        bdim,
        estride,
        _INTERLEAVE_NONE,
        _SWIZZLE_CODES[swizzle],
        _L2_PROMOTION_256B,
        _OOB_FILL_ZERO,
    )
    if rc != 0:
        raise DeviceError(f"cuTensorMapEncodeTiled failed: {_error_text(lib, rc)}")
    return np.frombuffer(bytes(tmap), dtype=np.dtype(f"V{TENSOR_MAP_BYTES}"))[0]


@dataclass(frozen=True)
class HgemmV2Config:
    """Tile configuration of ``hgemm_v2_wgmma_tma`` (the kernel's macros; tile sizes named as in
    kernels/README.md: BM x BN x BK threadblock tile, STAGES, CLUSTER_M x CLUSTER_N)."""

    bn: int = 256  # PG_BN: threadblock tile N (the wgmma n)
    consumers: int = 2  # HG2_CONSUMERS: consumer warpgroups; BM = 64 * consumers
    stages: int = 4  # PG_STAGES: shared-memory ring depth
    cluster_m: int = 1  # PG_CLUSTER_M: CTAs of a cluster along M, sharing (multicasting) one B tile
    cluster_n: int = 1  # PG_CLUSTER_N: CTAs of a cluster along N, sharing one A tile
    pingpong: bool = False  # HG2_PINGPONG: each consumer owns whole 128 x BN tiles (BN 128)
    staged_epilogue: bool = True  # HG2_EPILOGUE=1 (the default build): a 2 KB buffer per consumer warp
    tma_store: bool = False  # HG2_EPILOGUE=3: two buffers per consumer warp, stored by TMA (a C tensor map)
    bk: int = 64  # fixed: one 128-byte swizzle row of fp16

    @property
    def bm(self) -> int:
        return 128 if self.pingpong else 64 * self.consumers

    @property
    def threads(self) -> int:
        return 128 * (self.consumers + 1)

    def macros(self) -> dict[str, int]:
        return {
            "PG_BN": self.bn,
            "HG2_CONSUMERS": self.consumers,
            "PG_STAGES": self.stages,
            "PG_CLUSTER_M": self.cluster_m,
            "PG_CLUSTER_N": self.cluster_n,
            "HG2_PINGPONG": int(self.pingpong),
            "HG2_EPILOGUE": 3 if self.tma_store else 1 if self.staged_epilogue else 0,
        }


HGEMM_V2_DEFAULT = HgemmV2Config()


@dataclass(frozen=True)
class HgemmV2Layout:
    """Boxes (logical rows x cols of the operand) and dynamic shared memory of one build."""

    box_a: tuple[int, int]  # A is M x K
    box_b: tuple[int, int]  # B is K x N
    smem_bytes: int
    threads: int
    swizzle: Swizzle = "128b"


def hgemm_v2_layout(trans_a: bool, trans_b: bool, cfg: HgemmV2Config = HGEMM_V2_DEFAULT) -> HgemmV2Layout:
    """What ``hgemm_v2_wgmma_tma`` built with ``cfg`` and PG_TRANS_A/B expects.

    A row-major (``trans_a`` False): box BM/cluster_n x 64 (one copy per stage, or the share of
    one CTA of those sharing the tile); column-major: 64 x 64 (BM/64 copies). B row-major
    (``trans_b`` False): 64 x 64 (BN/64 copies); column-major: 64 x BN/cluster. The inner (contiguous) box extent is always 64 halves = 128 bytes, the
    128-byte swizzle span.
    """
    box_a = (64, cfg.bk) if trans_a else (cfg.bm // cfg.cluster_n, cfg.bk)
    box_b = (cfg.bk, cfg.bn // cfg.cluster_m) if trans_b else (cfg.bk, 64)
    stage = (cfg.bm + cfg.bn) * cfg.bk * 2
    # kEpiBytes: 16 rows x 128 B per consumer warp (two with a TMA store, after a 1024-byte barrier slot)
    buffers = 2 if cfg.tma_store else 1 if cfg.staged_epilogue else 0
    epilogue = buffers * 4 * cfg.consumers * 16 * 128
    barriers = 1024 if cfg.tma_store else 256 if 2 * cfg.stages * 8 + 16 <= 256 else 512  # kBarBytes
    smem = cfg.stages * stage + 1024 + barriers + epilogue  # ring + 1024-byte alignment slack + barriers + epilogue
    return HgemmV2Layout(box_a=box_a, box_b=box_b, smem_bytes=smem, threads=cfg.threads)


def hgemm_v2_tensor_maps(
    a_ptr: int,
    b_ptr: int,
    M: int,
    N: int,
    K: int,
    lda: int,
    ldb: int,
    trans_a: bool,
    trans_b: bool,
    cfg: HgemmV2Config = HGEMM_V2_DEFAULT,
    batch: tuple[int, int, int] | None = None,
    dtype: str = "float16",
) -> tuple[np.void, np.void]:
    """The two tensor maps of one ``hgemm_v2_wgmma_tma`` launch (``dtype`` A: M x K, B: K x N;
    float16 or bfloat16).

    ``trans_a``: A stored column-major (element (i, k) at ``a[i + k*lda]``), else row-major
    (``a[i*lda + k]``); likewise ``trans_b`` for B ((k, j) at ``b[k + j*ldb]`` or
    ``b[k*ldb + j]``).
    """
    lay = hgemm_v2_layout(trans_a, trans_b, cfg)
    ba = bb = None
    if batch is not None:  # (matrices, element strides of A and B): PG_BATCH's 3-D maps
        count, sa, sb = batch
        ba, bb = (count, 2 * sa), (count, 2 * sb)
    ta = encode_tiled_2d(a_ptr, M, K, lda, "col" if trans_a else "row", *lay.box_a, swizzle=lay.swizzle, batch=ba, dtype=dtype)
    tb = encode_tiled_2d(b_ptr, K, N, ldb, "col" if trans_b else "row", *lay.box_b, swizzle=lay.swizzle, batch=bb, dtype=dtype)
    return ta, tb


def hgemm_v2_c_map(c_ptr: int, M: int, N: int, ldc: int, dtype: str = "float16") -> np.void:
    """C's tensor map for a TMA-store build (``HG2_EPILOGUE=3``): the row-major M x N result
    (``c[i*ldc + j]``, 16-bit ``dtype``) in boxes of 16 rows x 64 columns, one consumer warp's
    rows of one 64-column chunk, 128-byte swizzled as the kernel stages them."""
    return encode_tiled_2d(c_ptr, M, N, ldc, "row", 16, 64, swizzle="128b", dtype=dtype)


def first_param_offset(cubin: bytes, entry: str) -> int:
    """Byte offset of parameter 0 of ``entry`` in the kernel's parameter buffer.

    Loads ``cubin`` into the *current* context (PyCUDA's, for instance) with the driver API,
    asks ``cuFuncGetParamInfo`` (CUDA 12.4+ drivers) and unloads it again.
    """
    lib = _libcuda()
    mod = ctypes.c_void_p()
    fn = ctypes.c_void_p()
    rc = lib.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(cubin))
    if rc != 0:
        raise DeviceError(f"cuModuleLoadData failed: {_error_text(lib, rc)}")
    try:
        rc = lib.cuModuleGetFunction(ctypes.byref(fn), mod, entry.encode())
        if rc != 0:
            raise DeviceError(f"cuModuleGetFunction({entry}) failed: {_error_text(lib, rc)}")
        off = ctypes.c_size_t()
        size = ctypes.c_size_t()
        rc = lib.cuFuncGetParamInfo(fn, ctypes.c_size_t(0), ctypes.byref(off), ctypes.byref(size))
        if rc != 0:
            raise DeviceError(f"cuFuncGetParamInfo failed: {_error_text(lib, rc)}")
        return int(off.value)
    finally:
        lib.cuModuleUnload(mod)


def param_padding(nbytes: int = 112) -> np.void:
    """Zero bytes to pass first to a PyCUDA launch so that the tensor maps land where ptxas
    put them (``nbytes`` = :func:`first_param_offset`; 112 for sm_90 cubins)."""
    raw = np.zeros((), dtype=np.dtype(f"V{nbytes}"))[()] if nbytes else np.zeros((), dtype="V0")[()]
    return cast(np.void, raw)  # a 0-d void array indexed with () is its np.void scalar
