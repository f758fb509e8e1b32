"""One CUDA device as the backend uses it: its primary context, its loaded kernels, the copy kernel.

PyCUDA retains the primary context (the one CuPy and PyTorch use too) and allocates memory;
kernels are built by :mod:`.compiler` and loaded and launched through :mod:`.driver`. Loaded
kernels are kept per (source, entry, macros) for the life of the process; different kernels load
concurrently, callers of the same one wait for it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ...errors import DeviceError
from .compiler import compile_cubin
from .driver import Driver, Kernel, driver
from .planning import Mat, strides
from .variants import KERNEL_DIR, kernel_specs

__all__ = ["CudaRuntime", "DeviceBuffer", "UTIL_SOURCE", "fork_hint", "runtime_for"]

UTIL_SOURCE = KERNEL_DIR / "util" / "copy_scale.cu"
REPITCH_SOURCE = KERNEL_DIR / "util" / "repitch.cu"
SPLIT_SOURCE = KERNEL_DIR / "util" / "split_bf16.cu"
TRANSPOSE_SOURCE = KERNEL_DIR / "util" / "transpose.cu"
#: the utility kernels' entry points (built by precompile beside the rungs)
UTILITY_ENTRIES = [(UTIL_SOURCE, f"pg_copy_scale_{t}") for t in ("f32", "f16", "bf16", "f64")] + \
    [(REPITCH_SOURCE, f"pg_repitch{n}_{t}") for n in ("", "2") for t in ("b16", "b32")] + [(SPLIT_SOURCE, "pg_split_bf16")] + \
    [(TRANSPOSE_SOURCE, "pg_transpose_b64")]
_COPY_BLOCK = 256
#: pg_repitch_b16/b32's parameters: (src, src_pitch, dst, dst_pitch, width, lines)
_REPITCH_PARAMS = ("Q", "q", "Q", "q", "q", "q")
#: pg_split_bf16's parameters: (lines, width, real_lines, real_width, src, src_pitch, dst, dst_pitch, seg, segments, codes)
_SPLIT_PARAMS = ("q", "q", "q", "q", "Q", "q", "Q", "q", "q", "i", "i")


def usable_sms(sms: int) -> int:
    """``sms`` scaled by ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` when a client of the CUDA MPS
    server is limited to a share of the device (unset or unreadable: all of them)."""
    raw = os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "").strip()
    try:
        pct = float(raw) if raw else 100.0
    except ValueError:
        return sms
    return max(1, min(sms, int(sms * pct / 100.0)))


class CudaRuntime:
    """The device's primary context, compiled kernels, and the copy/scale helper."""

    def __init__(self, ordinal: int = 0) -> None:
        import pycuda.driver as drv

        self.drv = drv
        drv.init()
        self.ordinal = ordinal
        self.device = drv.Device(ordinal)
        self.name = self.device.name()
        major, minor = self.device.compute_capability()
        self.cc = (major, minor)
        self.sm = major * 10 + minor
        self.arch = f"sm_{major}{minor}"
        self.ctx = self.device.retain_primary_context()
        self.ctx_handle = int(self.ctx.handle)
        # the most dynamic shared memory one block may opt in to
        self.max_smem_per_block = int(self.device.get_attribute(drv.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN))
        #: the SMs this process may use: the device's, or under MPS its active-thread share
        #: (persistent grids and split-K's resident grids are sized to it: a grid that assumed
        #: SMs it cannot have would wait on threadblocks that never start)
        self.sms = usable_sms(int(self.device.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)))
        #: more than one GPU visible: calls check that their operands are on this one
        self.several = drv.Device.count() > 1
        self.cu: Driver = driver()
        self._ctx_cdata = self.cu.ffi.cast("CUcontext", self.ctx_handle)  # compared with the current one per launch
        self._lock = threading.Lock()
        self._functions: dict[tuple, Kernel] = {}
        self._pair_launchers: dict[tuple, tuple[Any, Any]] = {}  # repitch_pair's, by geometry
        self._loading: dict[tuple, threading.Lock] = {}
        self._cublas: Any = None
        self._pool: Any = None
        self._scratch_pool: Any = None

    def allocate(self, nbytes: int) -> Any:
        """Device memory from this device's pool (freed back to it by ``.free()``), so the NumPy
        path does not pay ``cuMemAlloc`` per call; call inside :meth:`active`."""
        if self._pool is None:
            from pycuda.tools import DeviceMemoryPool

            with self._lock:
                if self._pool is None:
                    self._pool = DeviceMemoryPool()
        return self._pool.allocate(max(int(nbytes), 1))

    def scratch(self, nbytes: int, stream: int) -> int:
        """Stream-ordered device scratch (split-K partial sums): usable by work queued on
        ``stream`` from now on; give it back with :meth:`release` on the same stream."""
        if self._scratch_pool is None:
            with self._lock:
                if self._scratch_pool is None:
                    self._scratch_pool = self.cu.memory_pool(self.ordinal)
        return self.cu.alloc_async(self._scratch_pool, nbytes, stream)

    def release(self, ptr: int, stream: int) -> None:
        """Free :meth:`scratch` memory after the work queued on ``stream`` so far."""
        self.cu.free_async(ptr, stream)

    def _quietly(self, free: Any) -> None:
        """Run ``free()`` with the device's context current, raising nothing: a finalizer's
        work, in whatever thread drops the owner (the context pushed through the driver)."""
        try:
            pushed = self.enter()
        except Exception:
            return
        try:
            free()
        except Exception:
            pass
        finally:
            if pushed:
                self.leave()

    def give_back(self, ptrs: dict[int, int]) -> None:
        """Free ``{stream: ptr}`` :meth:`scratch` blocks from whatever thread drops their owner
        (a block of a stream destroyed since stays with the pool)."""
        def free() -> None:
            for stream, ptr in list(ptrs.items()):
                try:
                    self.release(ptr, stream)
                except Exception:
                    pass
            ptrs.clear()

        self._quietly(free)

    def mapped_zeros(self, shape: int | tuple[int, ...], dtype: Any) -> tuple[np.ndarray, int]:
        """A zeroed page-locked host array mapped into the device's address space, and the address kernels write it at
        (0 where this context cannot map host memory: the array is then page-locked only, and device copies into it
        need no staging); freed when it is dropped (never at exit, when the driver may be gone: the process's memory
        goes with it)."""
        dt = np.dtype(dtype)
        count = int(np.prod(shape))
        pushed = self.enter()
        try:
            try:
                ptr = self.cu.host_alloc(count * dt.itemsize, mapped=True)
                device = self.cu.host_device_pointer(ptr)
            except DeviceError:  # a device that maps no host memory: page-locked only
                ptr, device = self.cu.host_alloc(count * dt.itemsize), 0
        finally:
            if pushed:
                self.leave()
        base = np.frombuffer(self.cu.ffi.buffer(ptr, max(count * dt.itemsize, 1)), dtype=dt, count=count)
        base[...] = 0
        # freed with the device's context current, when the last view of it goes (NumPy bases every view on `base`)
        weakref.finalize(base, self._quietly, lambda: self.cu.host_free(ptr)).atexit = False
        return base.reshape(shape), device

    def buffer(self, nbytes: int) -> "DeviceBuffer":
        """``nbytes`` of device memory owned by the returned object (see :class:`DeviceBuffer`);
        call with this device's context current."""
        return DeviceBuffer(self, nbytes)

    def free_now(self, ptr: int) -> None:
        """Free :meth:`buffer` memory from whatever thread drops its owner."""
        self._quietly(lambda: self.cu.mem_free(ptr))

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """PyCUDA's context stack holds this device's context (for PyCUDA allocations and copies)."""
        self.ctx.push()
        try:
            yield
        finally:
            self.drv.Context.pop()

    def enter(self) -> bool:
        """Make this device's context current for a launch; True when it had to be pushed
        (the caller then calls :meth:`leave`). Threads of CuPy or torch already hold it."""
        if self.cu.is_current(self._ctx_cdata):
            return False
        self.cu.push(self.ctx_handle)
        return True

    def leave(self) -> None:
        self.cu.pop()

    def function(self, source: Path, entry: str, macros: dict[str, int] | None = None) -> Kernel:
        """Build (once, through the verified disk cache), load and return one kernel entry point."""
        key = (str(source), entry, tuple(sorted((macros or {}).items())))
        fn = self._functions.get(key)
        if fn is not None:
            return fn
        with self._lock:
            key_lock = self._loading.setdefault(key, threading.Lock())
        with key_lock:
            fn = self._functions.get(key)
            if fn is None:
                given = macros or {}  # the rung whose constant macros this build carries (rows may share an entry)
                rows = [sp for sp in kernel_specs().values() if sp.entry == entry and all(given.get(k) == v for k, v in sp.defines)]
                spec = max(rows, key=lambda sp: len(sp.defines)) if rows else None
                target = spec.arch if spec is not None and spec.arch else self.arch
                cubin = compile_cubin(source, target, macros)
                smem = spec.smem_for(bool((macros or {}).get("PG_VEC", 1))) if spec is not None else 0
                if smem > self.max_smem_per_block:
                    smem = 0  # never launched: plans refuse it (check_smem)
                pushed = self.enter()
                try:
                    fn = self.cu.load(cubin, entry, smem)
                finally:
                    if pushed:
                        self.leave()
                with self._lock:
                    self._functions[key] = fn
            return fn

    def precompile(self, threads: int = 8) -> int:
        """Build and load every rung in every macro combination it can be launched with, in parallel."""
        from concurrent.futures import ThreadPoolExecutor

        todo: list[tuple[Path, str, dict[str, int] | None]] = [(src, entry, None) for src, entry in UTILITY_ENTRIES]
        for spec in kernel_specs().values():
            if not spec.runs_on(self.sm):
                continue
            for macros in spec.builds():
                todo.append((spec.source, spec.entry, macros or None))

        def one(job: tuple[Path, str, dict[str, int] | None]) -> None:
            self.function(*job)

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, todo))
        return len(todo)

    def cublas(self) -> Any:
        with self._lock:
            if self._cublas is None:
                from .cublas import CuBlas

                self._cublas = CuBlas()
            return self._cublas

    def repitch(self, dst: int, dst_pitch: int, src: int, src_pitch: int, width: int, lines: int, itemsize: int, stream: int = 0) -> None:
        """Queue ``lines`` lines of ``width`` elements (2 or 4 bytes each) from ``src`` to ``dst``,
        pitches in elements: the copies into and out of aligned scratch for a TMA rung."""
        if width <= 0 or lines <= 0:
            return
        fn = self.function(REPITCH_SOURCE, "pg_repitch_b16" if itemsize == 2 else "pg_repitch_b32")
        chunks = -(-width * itemsize // 16) * lines  # a thread moves 16-byte chunks, walked flat over the lines
        blocks = max(1, min(-(-chunks // _COPY_BLOCK), self.sms * 16))
        # packed by the layout the compiler reported (each size checked), launched by the kernel's launcher
        # of this geometry: a padded plan makes its copies on every call
        buf = fn.struct_for(_REPITCH_PARAMS).pack(src, src_pitch, dst, dst_pitch, width, lines)
        fn.launch(buf, (blocks, 1, 1), (_COPY_BLOCK, 1, 1), 0, stream)

    def transpose(self, dst: int, dst_pitch: int, src: int, src_pitch: int, width: int, lines: int, itemsize: int,
                  stream: int = 0) -> None:
        """Queue the copy of ``lines`` lines of ``width`` elements (8 bytes each) at ``src`` into ``width`` lines of
        ``lines`` elements at ``dst`` (kernels/util/transpose.cu), pitches in elements: an operand moved into the
        layout a rung reads at full speed."""
        if width <= 0 or lines <= 0:
            return
        if itemsize != 8:
            raise ValueError(f"transpose copies 8-byte elements, not {itemsize}-byte ones")
        fn = self.function(TRANSPOSE_SOURCE, "pg_transpose_b64")
        tiles_x, tiles_y = -(-width // 32), -(-lines // 32)
        grid_y = max(1, min(tiles_y, 65535, -(-self.sms * 16 // tiles_x)))  # the kernel walks the lines' tiles grid-stride
        buf = fn.struct_for(_REPITCH_PARAMS).pack(src, src_pitch, dst, dst_pitch, width, lines)
        fn.launch(buf, (tiles_x, grid_y, 1), (32, 8, 1), 0, stream)

    def repitch_pair(self, first: tuple[int, int, int, int, int, int], second: tuple[int, int, int, int, int, int],
                     itemsize: int, stream: int = 0) -> None:
        """Queue two :meth:`repitch` copies, each ``(dst, dst_pitch, src, src_pitch, width, lines)``, in one launch
        (A and B into aligned scratch: a launch is what a small product's call pays for on the host). Its launcher
        and packer are kept per geometry: a padded plan makes the same copies every call."""
        if min(first[4:]) <= 0 or min(second[4:]) <= 0:
            for dst, dst_pitch, src, src_pitch, width, lines in (first, second):
                self.repitch(dst, dst_pitch, src, src_pitch, width, lines, itemsize, stream)
            return
        go, pack = self.pair_launcher(first[4], first[5], second[4], second[5], itemsize)
        (d0, dp0, s0, sp0, w0, l0), (d1, dp1, s1, sp1, w1, l1) = first, second
        go(pack(s0, sp0, d0, dp0, w0, l0, s1, sp1, d1, dp1, w1, l1), stream)

    def pair_launcher(self, w0: int, l0: int, w1: int, l1: int, itemsize: int) -> tuple[Any, Any]:
        """``(go, pack)`` of :meth:`repitch_pair`'s launch for copies of these widths and lines (positive), kept per
        geometry: ``go(pack(src0, src_pitch0, dst0, dst_pitch0, w0, l0, src1, ..., l1), stream)`` queues it."""
        key = (w0, l0, w1, l1, itemsize)
        kept = self._pair_launchers.get(key)
        if kept is None:
            fn = self.function(REPITCH_SOURCE, "pg_repitch2_b16" if itemsize == 2 else "pg_repitch2_b32")
            chunks = max(-(-width * itemsize // 16) * lines for width, lines in ((w0, l0), (w1, l1)))
            blocks = max(1, min(-(-chunks // _COPY_BLOCK), self.sms * 8))
            if len(self._pair_launchers) >= 64:  # a caller of ever new geometries: start over
                self._pair_launchers.clear()
            kept = self._pair_launchers[key] = (fn.launcher((blocks, 2, 1), (_COPY_BLOCK, 1, 1), 0),
                                                fn.struct_for(_REPITCH_PARAMS * 2).pack)
        return kept

    def split_bf16(self, geometry: tuple[int, int, int, int, int, int, int], src: int, dst: int, segments: int, codes: int,
                   stream: int = 0) -> None:
        """Queue the split of a float32 operand at ``src`` into the bfloat16 segments at ``dst`` (kernels/util/split_bf16.cu):
        ``geometry`` is (lines, width, real_lines, real_width, src_pitch, dst_pitch, seg) in elements, ``codes`` the part of
        each of the ``segments`` (2 bits each)."""
        lines, width, real_lines, real_width, src_pitch, dst_pitch, seg = geometry
        fn = self.function(SPLIT_SOURCE, "pg_split_bf16")
        chunks = lines * (width // 8)  # a thread splits 8 elements into every segment
        blocks = max(1, min(-(-chunks // _COPY_BLOCK), self.sms * 16))
        buf = fn.struct_for(_SPLIT_PARAMS).pack(lines, width, real_lines, real_width, src, src_pitch, dst, dst_pitch, seg,
                                                segments, codes)
        fn.launch(buf, (blocks, 1, 1), (_COPY_BLOCK, 1, 1), 0, stream)

    def copy_scale(self, rows: int, cols: int, scale: float, src: Mat | None, dst: Mat, stream: int = 0, dtype: str = "") -> None:
        """dst = scale * src (src None or scale 0: zeros, src not read) over rows x cols, in
        dst's element type (float32, float16 or float64 by its size, bfloat16 when ``dtype`` says so;
        src has the same), queued on ``stream``."""
        if rows == 0 or cols == 0:
            return
        kind = "bf16" if dtype == "bfloat16" else {2: "f16", 8: "f64"}.get(dst.itemsize, "f32")
        fn = self.function(UTIL_SOURCE, f"pg_copy_scale_{kind}")
        srs, scs = strides(src) if src is not None else (0, 0)
        drs, dcs = strides(dst)
        blocks = max(1, min(-(-rows * cols // _COPY_BLOCK), 65535))
        fn(np.int64(rows), np.int64(cols), np.float64(scale) if kind == "f64" else np.float32(scale), np.uintp(src.ptr if src is not None else 0),
           np.int64(srs), np.int64(scs), np.uintp(dst.ptr), np.int64(drs), np.int64(dcs),
           block=(_COPY_BLOCK, 1, 1), grid=(blocks, 1), stream=stream)


class DeviceBuffer:
    """Device memory of a result the backend hands out (a pycuda ``GPUArray``'s ``base``), freed
    when this object is dropped, in whichever thread drops it. PyCUDA frees its own allocations
    only in the thread that made their context, which for polygemm is the registry's probe
    thread: anywhere else they were leaked (and PyCUDA's memory pool aborted the process).
    Plain ``cuMemAlloc`` / ``cuMemFree``, as PyCUDA's own arrays: not ordered on any stream, so
    a result is safe on whichever stream its user reads it, and its memory goes back at once."""

    __slots__ = ("ptr", "nbytes", "_free", "__weakref__")

    def __init__(self, rt: CudaRuntime, nbytes: int) -> None:
        self.nbytes = max(int(nbytes), 1)
        self.ptr = rt.cu.mem_alloc(self.nbytes)
        self._free = weakref.finalize(self, rt.free_now, self.ptr)
        self._free.atexit = False  # at exit the process gives it all back

    def __int__(self) -> int:
        return self.ptr

    def free(self) -> None:
        """Give the memory back now."""
        self._free()


_runtimes: dict[int, CudaRuntime] = {}
_runtimes_lock = threading.Lock()

#: True in a child forked after this process opened a CUDA device. CUDA does not survive a fork: every driver call in
#: the child fails with a bare "initialization error", so errors there add FORK_HINT, what to do instead (as torch says).
forked_after_cuda = False
FORK_HINT = ("; this process was forked after its parent used CUDA, and CUDA does not survive a fork: start the worker "
             "processes with multiprocessing.get_context('spawn') (or 'forkserver'), or use CUDA in the parent only "
             "after forking them")


def fork_hint() -> str:
    """:data:`FORK_HINT` in a child forked after CUDA was used, else "" (appended to CUDA errors)."""
    return FORK_HINT if forked_after_cuda else ""


def _after_fork_in_child() -> None:
    global forked_after_cuda, _runtimes_lock
    if _runtimes:
        forked_after_cuda = True
    _runtimes_lock = threading.Lock()  # another thread may have held it at the fork


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


def runtime_for(ordinal: int) -> CudaRuntime:
    """The one runtime of device ``ordinal`` in this process (its primary context, loaded
    kernels and memory pool), made on first use; ``cuda`` and ``cuda:N`` share it."""
    rt = _runtimes.get(ordinal)
    if rt is None:
        with _runtimes_lock:
            rt = _runtimes.get(ordinal)
            if rt is None:
                rt = _runtimes[ordinal] = CudaRuntime(ordinal)
    return rt
