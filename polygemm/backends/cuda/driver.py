"""The few CUDA driver calls the launch path needs, bound with cffi (ABI mode, ``libcuda.so.1``).

PyCUDA owns the context and memory; this module owns modules, functions and launches, so that
a launch can go to any stream handle (CuPy's, torch's, the ``__cuda_array_interface__``
``stream``), which PyCUDA cannot wrap, and costs one packed parameter buffer and one C call.
Parameter offsets come from ``cuFuncGetParamInfo``, so a ``__grid_constant__`` tensor map
lands where ptxas put it without padding tricks.
"""

from __future__ import annotations

import functools
import struct
import threading
from typing import Any, Callable, Sequence

import numpy as np

from ...errors import DeviceError

__all__ = ["Driver", "driver", "Kernel", "LEGACY_STREAM", "PER_THREAD_STREAM", "natural_params"]

_CDEF = """
typedef int CUresult;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
CUresult cuInit(unsigned int flags);
CUresult cuGetErrorName(CUresult error, const char **pStr);
CUresult cuGetErrorString(CUresult error, const char **pStr);
CUresult cuCtxGetCurrent(CUcontext *pctx);
CUresult cuCtxPushCurrent_v2(CUcontext ctx);
CUresult cuCtxPopCurrent_v2(CUcontext *pctx);
CUresult cuCtxSynchronize(void);
CUresult cuModuleLoadData(CUmodule *module, const void *image);
CUresult cuModuleUnload(CUmodule hmod);
CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name);
CUresult cuModuleGetGlobal_v2(unsigned long long *dptr, size_t *bytes, CUmodule hmod, const char *name);
CUresult cuFuncSetAttribute(CUfunction hfunc, int attrib, int value);
CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize);
CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                        unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra);
CUresult cuStreamSynchronize(CUstream hStream);
CUresult cuStreamIsCapturing(CUstream hStream, int *captureStatus);
CUresult cuDeviceGetCount(int *count);
CUresult cuPointerGetAttribute(void *data, int attribute, unsigned long long ptr);
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct { int type; int id; } CUmemLocation;
typedef struct {
    int allocType;
    int handleTypes;
    CUmemLocation location;
    void *win32SecurityAttributes;
    unsigned char reserved[64];
} CUmemPoolProps;
CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps);
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void *value);
CUresult cuMemAllocFromPoolAsync(unsigned long long *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);
CUresult cuMemFreeAsync(unsigned long long dptr, CUstream hStream);
CUresult cuMemAlloc_v2(unsigned long long *dptr, size_t bytesize);
CUresult cuMemFree_v2(unsigned long long dptr);
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize);
typedef struct {
    unsigned int gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    CUstream hStream;
    void *attrs;
    unsigned int numAttrs;
} CUlaunchConfig;
CUresult cuOccupancyMaxActiveClusters(int *numClusters, CUfunction func, const CUlaunchConfig *config);
typedef struct {
    int id;
    char pad[4];
    union { char raw[64]; int cooperative; unsigned long long align; } value;
} CUlaunchAttribute;
CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra);
CUresult cuMemsetD32Async(unsigned long long dstDevice, unsigned int ui, size_t N, CUstream hStream);
CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags);
CUresult cuMemHostGetDevicePointer_v2(unsigned long long *pdptr, void *p, unsigned int Flags);
CUresult cuMemFreeHost(void *p);
CUresult cuMemcpyDtoHAsync_v2(void *dstHost, unsigned long long srcDevice, size_t ByteCount, CUstream hStream);
CUresult cuMemcpyDtoDAsync_v2(unsigned long long dstDevice, unsigned long long srcDevice, size_t ByteCount, CUstream hStream);
"""

CUDA_ERROR_INVALID_VALUE = 1
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
CU_MEM_ALLOCATION_TYPE_PINNED = 1
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4
CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2
#: the stream handles of the CUDA array interface (v3): 1 the legacy default stream, 2 per-thread
LEGACY_STREAM = 1
PER_THREAD_STREAM = 2


class Driver:
    """``libcuda`` through cffi; every call is checked and raises DeviceError with the driver's words."""

    def __init__(self) -> None:
        import cffi

        self.ffi = cffi.FFI()
        self.ffi.cdef(_CDEF)
        try:
            self.lib = self.ffi.dlopen("libcuda.so.1")
        except OSError as exc:
            raise DeviceError(f"cannot load the CUDA driver library libcuda.so.1: {exc}") from exc
        self.check(self.lib.cuInit(0), "cuInit")
        self._local = threading.local()
        self._streams: dict[int, Any] = {}

    def launch_slot(self) -> "_LaunchSlot":
        """This thread's reusable launch buffers (no C allocation per launch)."""
        slot = getattr(self._local, "slot", None)
        if slot is None:
            slot = self._local.slot = _LaunchSlot(self.ffi)
        return slot

    def stream(self, handle: int) -> Any:
        """``handle`` as a CUstream (casts kept: a call's stream is usually one of a few)."""
        s = self._streams.get(handle)
        if s is None:
            s = self._streams[handle] = self.ffi.cast("CUstream", handle)
        return s

    def error_text(self, code: int) -> str:
        name, text = self.ffi.new("const char **"), self.ffi.new("const char **")
        self.lib.cuGetErrorName(code, name)
        self.lib.cuGetErrorString(code, text)
        n = self.ffi.string(name[0]).decode() if name[0] != self.ffi.NULL else f"CUresult {code}"
        t = self.ffi.string(text[0]).decode() if text[0] != self.ffi.NULL else "unknown error"
        return f"{n}: {t}"

    def capturing(self, stream: int) -> bool:
        """Whether ``stream`` is being captured into a CUDA graph (False where the driver cannot say)."""
        status = self.ffi.new("int *")
        try:
            return self.lib.cuStreamIsCapturing(self.stream(stream), status) == 0 and status[0] != 0
        except Exception:  # noqa: BLE001 - a question asked only to word an error
            return False

    def check(self, code: int, what: str) -> None:
        if code != 0:
            raise DeviceError(f"{what} failed: {self.error_text(code)}")

    # -- contexts --------------------------------------------------------------------
    def is_current(self, ctx: Any) -> bool:
        """Whether ``ctx`` (a ``CUcontext`` cdata) is this thread's current context."""
        slot = getattr(self._local, "slot", None)  # (launch_slot written out: every device call asks)
        out = (slot if slot is not None else self.launch_slot()).ctx
        rc = self.lib.cuCtxGetCurrent(out)
        if rc != 0:
            self.check(rc, "cuCtxGetCurrent")
        return bool(out[0] == ctx)

    def push(self, ctx: int) -> None:
        self.check(self.lib.cuCtxPushCurrent_v2(self.ffi.cast("CUcontext", ctx)), "cuCtxPushCurrent")

    def pop(self) -> None:
        self.check(self.lib.cuCtxPopCurrent_v2(self.ffi.new("CUcontext *")), "cuCtxPopCurrent")

    def device_count(self) -> int:
        n = self.ffi.new("int *")
        self.check(self.lib.cuDeviceGetCount(n), "cuDeviceGetCount")
        return int(n[0])

    def pointer_device(self, ptr: int) -> int | None:
        """The ordinal of the device whose memory ``ptr`` points into (None: not device memory
        the driver knows, e.g. host memory)."""
        out = self.ffi.new("int *")
        rc = self.lib.cuPointerGetAttribute(out, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr)
        return int(out[0]) if rc == 0 else None

    # -- stream-ordered scratch memory ------------------------------------------------------
    def memory_pool(self, ordinal: int) -> Any:
        """A memory pool of device ``ordinal`` for stream-ordered scratch (split-K partial sums):
        its own pool, not the device's default one other libraries may use, and it keeps what
        it reserved (release threshold: unlimited), so a steady stream of calls does not
        return memory to the OS and ask for it again."""
        props = self.ffi.new("CUmemPoolProps *")
        props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED
        props.location.type = CU_MEM_LOCATION_TYPE_DEVICE
        props.location.id = ordinal
        pool = self.ffi.new("CUmemoryPool *")
        self.check(self.lib.cuMemPoolCreate(pool, props), f"cuMemPoolCreate (device {ordinal})")
        keep = self.ffi.new("unsigned long long *", 2**64 - 1)
        self.check(self.lib.cuMemPoolSetAttribute(pool[0], CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, keep), "cuMemPoolSetAttribute")
        return pool[0]

    def alloc_async(self, pool: Any, nbytes: int, stream: int) -> int:
        """``nbytes`` from ``pool``, usable by work queued on ``stream`` after this call."""
        out = self.ffi.new("unsigned long long *")
        self.check(self.lib.cuMemAllocFromPoolAsync(out, max(int(nbytes), 1), pool, self.stream(stream)),
                   f"allocating {nbytes} bytes of device memory")
        return int(out[0])

    def mem_alloc(self, nbytes: int) -> int:
        """``nbytes`` of device memory in the current context (not stream-ordered)."""
        out = self.ffi.new("unsigned long long *")
        self.check(self.lib.cuMemAlloc_v2(out, max(int(nbytes), 1)), f"allocating {nbytes} bytes of device memory")
        return int(out[0])

    def mem_free(self, ptr: int) -> None:
        """Free :meth:`mem_alloc` memory (the driver waits for the work that may use it)."""
        self.check(self.lib.cuMemFree_v2(ptr), "cuMemFree")

    def free_async(self, ptr: int, stream: int) -> None:
        """Return ``ptr`` to its pool once the work queued on ``stream`` before it is done."""
        self.check(self.lib.cuMemFreeAsync(ptr, self.stream(stream)), "cuMemFreeAsync")

    def memset_d32_async(self, ptr: int, value: int, count: int, stream: int) -> None:
        """Set ``count`` 32-bit words at ``ptr`` to ``value``, queued on ``stream``."""
        self.check(self.lib.cuMemsetD32Async(ptr, value, count, self.stream(stream)), "cuMemsetD32Async")

    def host_alloc(self, nbytes: int, mapped: bool = False) -> Any:
        """``nbytes`` of page-locked host memory usable from every context (CU_MEMHOSTALLOC_PORTABLE), as a cffi
        pointer; free it with :meth:`host_free`. ``mapped``: also mapped into the devices' address space
        (CU_MEMHOSTALLOC_DEVICEMAP; :meth:`host_device_pointer` gives the address kernels write it at). Call with a
        context current."""
        out = self.ffi.new("void **")
        self.check(self.lib.cuMemHostAlloc(out, max(int(nbytes), 1), 3 if mapped else 1),
                   f"allocating {nbytes} bytes of page-locked memory")
        return out[0]

    def host_device_pointer(self, ptr: Any) -> int:
        """The device address of mapped page-locked memory at ``ptr`` (0 where the context cannot map it)."""
        out = self.ffi.new("unsigned long long *")
        if self.lib.cuMemHostGetDevicePointer_v2(out, ptr, 0) != 0:
            return 0
        return int(out[0])

    def host_free(self, ptr: Any) -> None:
        self.lib.cuMemFreeHost(ptr)  # (a finalizer's: its error, at exit or after a failed device, is not raised)

    def copy_to_host_async(self, host: Any, ptr: int, stream: int) -> None:
        """Queue a copy of ``host.nbytes`` bytes at device address ``ptr`` into ``host`` (a page-locked NumPy array)
        on ``stream``."""
        self.check(self.lib.cuMemcpyDtoHAsync_v2(self.ffi.cast("void *", host.ctypes.data), ptr, host.nbytes, self.stream(stream)),
                   "cuMemcpyDtoHAsync")

    def copy_device_async(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        """Queue a copy of ``nbytes`` bytes from device address ``src`` to ``dst`` on ``stream``."""
        self.check(self.lib.cuMemcpyDtoDAsync_v2(dst, src, nbytes, self.stream(stream)), "cuMemcpyDtoDAsync")

    def synchronize_stream(self, stream: int) -> None:
        self.check(self.lib.cuStreamSynchronize(self.ffi.cast("CUstream", stream)), "cuStreamSynchronize")

    # -- modules and functions ---------------------------------------------------------
    def load(self, image: bytes, entry: str, max_dynamic_smem: int = 0) -> "Kernel":
        """Load a cubin into the current context and return its ``entry`` kernel."""
        ffi, lib = self.ffi, self.lib
        mod = ffi.new("CUmodule *")
        self.check(lib.cuModuleLoadData(mod, ffi.from_buffer(image)), f"loading the module of {entry}")
        fn = ffi.new("CUfunction *")
        self.check(lib.cuModuleGetFunction(fn, mod[0], entry.encode()), f"cuModuleGetFunction({entry})")
        if max_dynamic_smem > 48 * 1024:
            self.check(lib.cuFuncSetAttribute(fn[0], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, max_dynamic_smem),
                       f"opting {entry} in to {max_dynamic_smem} bytes of shared memory")
        return Kernel(self, entry, mod[0], fn[0], self._param_layout(fn[0], entry))

    def _param_layout(self, fn: Any, entry: str) -> tuple[tuple[int, int], ...]:
        """(offset, size) of each kernel parameter, as the compiler placed them."""
        off, size = self.ffi.new("size_t *"), self.ffi.new("size_t *")
        out = []
        for i in range(256):
            rc = self.lib.cuFuncGetParamInfo(fn, i, off, size)
            if rc == CUDA_ERROR_INVALID_VALUE:
                break
            self.check(rc, f"cuFuncGetParamInfo({entry}, {i})")
            out.append((int(off[0]), int(size[0])))
        return tuple(out)


_PARAM_CAPACITY = 4096  # the driver's limit on a kernel's parameter bytes (sm_70+: 4 KB, 32 KB from CUDA 12.1 on Hopper)
_CONFIGS_KEPT = 64  # launch configs a launcher keeps, one per stream handle it launched on


class _LaunchSlot:
    """One thread's parameter buffer and ``extra`` array for cuLaunchKernelEx (reused per launch)."""

    def __init__(self, ffi: Any) -> None:
        self.params = ffi.new(f"char[{_PARAM_CAPACITY}]")
        self.size = ffi.new("size_t *")
        self.extra = ffi.new("void *[5]", [ffi.cast("void *", 1), self.params, ffi.cast("void *", 2), self.size, ffi.NULL])
        self.ctx = ffi.new("CUcontext *")


@functools.lru_cache(maxsize=1)
def driver() -> Driver:
    """The process's one driver binding (loaded on first use)."""
    return Driver()


def natural_params(codes: Sequence[str]) -> tuple[tuple[tuple[int, int], ...], int]:
    """(offset, size) of each parameter of these ``struct`` formats laid out at its natural alignment (a 128-byte
    tensor map at 64), and the bytes in all: the layout a compiler gives such a parameter list, for stand-ins of a
    loaded kernel (which reports its own, :class:`Kernel`)."""
    params, at = [], 0
    for code in codes:
        size = struct.calcsize("<" + code)
        align = 64 if size == 128 else size
        at = -(-at // align) * align
        params.append((at, size))
        at += size
    return tuple(params), at


class Kernel:
    """One loaded kernel: ``pack`` its arguments once per launch, ``launch`` on a stream.

    Calling it like a PyCUDA function (``k(*args, block=, grid=, shared=, stream=)``) packs
    NumPy scalars (``np.int32``, ``np.float32``, ``np.uintp``, tensor maps as ``np.void``) and
    device arrays (their pointer) by the parameter layout the compiler reported.
    """

    def __init__(self, drv: Driver, entry: str, module: Any, fn: Any, params: Sequence[tuple[int, int]]) -> None:
        self.drv = drv
        self.entry = entry
        self._module = module
        self.fn = fn
        self.params = tuple(params)
        self.param_bytes = max((o + s for o, s in self.params), default=0)
        #: :meth:`launch`'s launchers per geometry: making one (its launch configs and attribute) costs the
        #: host several µs, which the utility kernels' launches (copies, the verify= check) would pay each time
        self._launchers: dict[tuple[tuple[int, ...], tuple[int, ...], int], Callable[[bytes, int], None]] = {}
        self._structs: dict[tuple[str, ...], struct.Struct] = {}  # struct_for's

    def struct_for(self, codes: Sequence[str]) -> struct.Struct:
        """A ``struct.Struct`` packing one argument per parameter (``codes`` like ``"i"``,
        ``"f"``, ``"Q"``, ``"128s"``) at the offsets the compiler chose (kept per ``codes``)."""
        known = self._structs.get(tuple(codes))
        if known is not None:
            return known
        made = self._struct_for(codes)
        self._structs[tuple(codes)] = made
        return made

    def _struct_for(self, codes: Sequence[str]) -> struct.Struct:
        if len(codes) != len(self.params):
            raise DeviceError(f"{self.entry} takes {len(self.params)} parameters; {len(codes)} formats given")
        fmt, at = "<", 0
        for code, (off, size) in zip(codes, self.params):
            if struct.calcsize("<" + code) != size:
                raise DeviceError(f"{self.entry}: parameter at offset {off} is {size} bytes, format {code!r} is not")
            fmt += "x" * (off - at) + code
            at = off + size
        return struct.Struct(fmt)

    def global_address(self, name: str) -> tuple[int, int]:
        """The device address and size in bytes of the module-scope ``__device__`` variable
        ``name`` (measurement builds leave records there, e.g. HG2_TRACE's ``hg2_trace``)."""
        ptr, size = self.drv.ffi.new("unsigned long long *"), self.drv.ffi.new("size_t *")
        self.drv.check(self.drv.lib.cuModuleGetGlobal_v2(ptr, size, self._module, name.encode()), f"cuModuleGetGlobal({name})")
        return int(ptr[0]), int(size[0])

    def launch(self, buf: bytes, grid: Sequence[int], block: Sequence[int], shared: int = 0, stream: int = 0) -> None:
        """Queue one launch with the packed parameter buffer ``buf`` on ``stream`` (a CUstream handle)."""
        key = (tuple(grid), tuple(block), shared)
        go = self._launchers.get(key)
        if go is None:
            go = self.launcher(grid, block, shared)
            if len(self._launchers) >= 64:  # a caller of ever new geometries: start over
                self._launchers.clear()
            self._launchers[key] = go  # (a launcher serves every thread and stream: see launcher)
        go(buf, stream)

    def launcher(self, grid: Sequence[int], block: Sequence[int], shared: int = 0,
                 cooperative: bool = False) -> Callable[[bytes, int], None]:
        """``go(buf, stream)``: :meth:`launch` with this geometry fixed, for a plan's launch made
        call after call (everything but the parameters and the stream looked up once).

        ``cooperative``: launch so that every threadblock is resident at once, or not at all
        (``cuLaunchKernelEx`` with the cooperative attribute). A kernel whose threadblocks wait
        on one another (the in-launch split reduction, stream-K) needs this: launched plainly
        beside other work (another stream's kernels, an MPS share of the SMs) some of its
        blocks could wait for blocks that never get an SM, and the launch would never end;
        launched cooperatively it waits for room, or fails with the driver's
        ``CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE``."""
        drv = self.drv
        ffi = drv.ffi
        gx, gy, gz = (tuple(grid) + (1, 1))[:3]
        bx, by, bz = (tuple(block) + (1, 1))[:3]
        fn, entry, null = self.fn, self.entry, ffi.NULL
        cu_launch_ex, memmove, slot_of, stream_of = drv.lib.cuLaunchKernelEx, ffi.memmove, drv.launch_slot, drv.stream
        where = f"{'cooperatively ' if cooperative else ''}(grid {gx}x{gy}x{gz}, block {bx}x{by}x{bz}, {shared} B shared)"
        attr = ffi.new("CUlaunchAttribute *")
        attr.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE
        attr.value.cooperative = 1
        # One launch config per stream handle, each written once and then only read (by the
        # driver): threads launching on one stream share its config without a lock. A launch
        # through cuLaunchKernelEx and a prepared config passes 4 arguments where cuLaunchKernel
        # takes 11 (0.6-0.7 us less a launch through cffi on the H100's host).
        configs: dict[int, Any] = {}

        def config(stream: int) -> Any:
            cfg = ffi.new("CUlaunchConfig *")
            cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = gx, gy, gz
            cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = bx, by, bz
            cfg.sharedMemBytes = shared
            cfg.hStream = stream_of(stream)
            if cooperative:
                cfg.attrs = attr
                cfg.numAttrs = 1
            if len(configs) >= _CONFIGS_KEPT:  # a caller cycling through many streams: start over
                configs.clear()
            configs[stream] = cfg
            return cfg

        def fail(rc: int, stream: int = 0) -> None:
            hint = ""
            if cooperative and (900 <= rc <= 908 or drv.capturing(stream)):  # CUDA_ERROR_STREAM_CAPTURE_*, or
                # CUDA_ERROR_INVALID_VALUE, which a cooperative launch into a capturing stream gets (H100, driver 13)
                hint = ("; this kernel's threadblocks wait on one another (a split-K or stream-K launch, made "
                        "cooperative), and the driver refuses such a launch while the stream is captured into a "
                        "CUDA graph: capture a call of another variant (one without split_k or streamk), or make "
                        "this call outside the capture")
            raise DeviceError(f"launching {entry} {where} failed: {drv.error_text(rc)}{hint}")

        def packed(buf: bytes) -> _LaunchSlot:  # this thread's slot, holding the parameters
            n = len(buf)
            if n > _PARAM_CAPACITY:
                raise DeviceError(f"{entry}: {n} bytes of parameters exceed {_PARAM_CAPACITY}")
            slot = slot_of()
            memmove(slot.params, buf, n)
            slot.size[0] = n
            return slot

        local = drv._local

        def go(buf: bytes, stream: int) -> None:
            # packed() and the slot lookup written out: this is every call's launch
            n = len(buf)
            slot = getattr(local, "slot", None)
            if slot is None or n > _PARAM_CAPACITY:
                slot = packed(buf)
            else:
                memmove(slot.params, buf, n)
                slot.size[0] = n
            cfg = configs.get(stream)
            rc = cu_launch_ex(cfg if cfg is not None else config(stream), fn, null, slot.extra)
            if rc != 0:
                fail(rc, stream)

        go.keep = attr  # type: ignore[attr-defined]  # cffi memory the configs point to lives with the launcher
        go.cooperative = cooperative  # type: ignore[attr-defined]
        go.parts = (configs, config, fail)  # type: ignore[attr-defined]  # what kept_launcher launches with
        return go

    def kept_launcher(self, layout: struct.Struct, grid: Sequence[int], block: Sequence[int], shared: int = 0,
                      cooperative: bool = False) -> Callable[[tuple[Any, ...], int, Callable[[tuple[Any, ...]], tuple[Any, ...]]], None]:
        """``go(key, stream, args_of)``: :meth:`launcher`'s launch of the parameters ``layout.pack(*args_of(key))``,
        packed into a buffer of this thread's own for this launcher and kept there with ``key``. A launch whose key
        equals the last one of its thread (a loop over the same arrays) reads the packed buffer as it is: nothing is
        worked out, packed or copied. ``key`` must fix the parameters: equal keys, equal bytes (so no signed zero in
        it: -0.0 == 0.0 packs other bits). A launch whose ``args_of`` or packing raises leaves no key kept."""
        go = self.launcher(grid, block, shared, cooperative)
        configs, config, fail = go.parts  # type: ignore[attr-defined]
        ffi, null, fn = self.drv.ffi, self.drv.ffi.NULL, self.fn
        cu_launch_ex, pack_into, nbytes = self.drv.lib.cuLaunchKernelEx, layout.pack_into, layout.size
        if nbytes > _PARAM_CAPACITY:
            raise DeviceError(f"{self.entry}: {nbytes} bytes of parameters exceed {_PARAM_CAPACITY}")
        local = threading.local()  # .key: the last key packed; .extra: the extra array over this thread's buffer

        def repack(key: tuple[Any, ...], args_of: Callable[[tuple[Any, ...]], tuple[Any, ...]]) -> Any:
            held = getattr(local, "held", None)
            if held is None:  # this thread's first launch: its buffer, kept with the launcher
                params = ffi.new(f"char[{max(nbytes, 1)}]")
                size = ffi.new("size_t *", nbytes)
                extra = ffi.new("void *[5]", [ffi.cast("void *", 1), params, ffi.cast("void *", 2), size, null])
                held = local.held = (extra, ffi.buffer(params), params, size)
            local.key = None  # (a failure below leaves the buffer half written: no key names it)
            pack_into(held[1], 0, *args_of(key))
            local.key = key
            return held[0]

        def go_kept(key: tuple[Any, ...], stream: int, args_of: Callable[[tuple[Any, ...]], tuple[Any, ...]]) -> None:
            extra = repack(key, args_of) if getattr(local, "key", None) != key else local.held[0]
            cfg = configs.get(stream)
            rc = cu_launch_ex(cfg if cfg is not None else config(stream), fn, null, extra)
            if rc != 0:
                fail(rc, stream)

        go_kept.keep = go  # type: ignore[attr-defined]  # the configs' attribute lives with the launcher
        go_kept.cooperative = cooperative  # type: ignore[attr-defined]
        return go_kept

    def resident_blocks(self, threads: int, shared: int) -> int:
        """How many of this kernel's threadblocks (``threads`` each, ``shared`` bytes of
        dynamic shared memory) one SM holds at once."""
        out = self.drv.ffi.new("int *")
        self.drv.check(self.drv.lib.cuOccupancyMaxActiveBlocksPerMultiprocessor(out, self.fn, threads, shared),
                       f"cuOccupancyMaxActiveBlocksPerMultiprocessor({self.entry})")
        return int(out[0])

    def resident_clusters(self, cluster: int, threads: int, shared: int) -> int:
        """How many of this kernel's thread-block clusters (``cluster`` CTAs each, its compiled-in
        cluster dimensions; ``threads`` and ``shared`` bytes per CTA) the device holds at once: a
        cluster's CTAs share one GPC, so this can be fewer than the SMs divided by ``cluster``."""
        cfg = self.drv.ffi.new("CUlaunchConfig *")
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = cluster, 1, 1
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = threads, 1, 1
        cfg.sharedMemBytes = shared
        out = self.drv.ffi.new("int *")
        self.drv.check(self.drv.lib.cuOccupancyMaxActiveClusters(out, self.fn, cfg),
                       f"cuOccupancyMaxActiveClusters({self.entry})")
        return int(out[0])

    def __call__(self, *args: Any, block: Sequence[int], grid: Sequence[int], shared: int = 0, stream: int = 0) -> None:
        if len(args) != len(self.params):
            raise DeviceError(f"{self.entry} takes {len(self.params)} arguments; got {len(args)}")
        buf = bytearray(self.param_bytes)
        for arg, (off, size) in zip(args, self.params):
            raw = _arg_bytes(arg)
            if len(raw) != size:
                raise DeviceError(f"{self.entry}: argument of {len(raw)} bytes for a {size}-byte parameter at offset {off}")
            buf[off:off + size] = raw
        self.launch(bytes(buf), grid, block, shared, stream)


def _arg_bytes(arg: Any) -> bytes:
    gpudata = getattr(arg, "gpudata", None)  # a pycuda GPUArray
    if gpudata is not None:
        return struct.pack("<Q", int(gpudata))
    if isinstance(arg, np.generic):
        return arg.tobytes()
    raise DeviceError(f"kernel argument of type {type(arg).__name__}: pass NumPy scalars (np.int32, np.float32, np.uintp, ...) or device arrays")
