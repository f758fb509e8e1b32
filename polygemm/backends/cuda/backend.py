"""The ``cuda`` backend: hand-written SGEMM ladders on NVIDIA GPUs through PyCUDA.

Kernels compile lazily, once per (rung, macros, architecture), with PyCUDA's
``SourceModule`` and its on-disk cache, for the device's own ``sm_XX``. All work runs in
the device's primary context (as ``pycuda.autoprimaryctx`` does), pushed around every
call so that any Python thread may call. NumPy operands are copied in and the result
copied out; ``__cuda_array_interface__`` operands stay on the device and the result is a
pycuda ``GPUArray`` (or ``out``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ...backend import Availability, Backend, Plan, Variant, host_layouts
from ...errors import BackendUnavailableError, DeviceError, UnsupportedProblemError
from ...problem import GemmProblem, Operand
from .planning import LaunchPlan, Mat, TmaUnsuitable, plan_launch, strides
from .variants import KERNEL_DIR, VENDOR_VARIANT, kernel_specs, variant_table

__all__ = ["CudaBackend", "choose_auto_variant", "TUNING_FILE"]

TUNING_DIR = Path(__file__).with_name("tuning")
TUNING_FILE = TUNING_DIR / "auto_fp32.json"  # float32; float16 in auto_fp16.json
_UTIL_SOURCE = KERNEL_DIR / "util" / "copy_scale.cu"
_COPY_BLOCK = 256


def _find_nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for root in filter(None, (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda")):
        cand = os.path.join(root, "bin", "nvcc")
        if os.path.exists(cand):
            return cand
    return None


def tuning_file(dtype: str) -> Path:
    return TUNING_DIR / f"auto_fp{np.dtype(dtype).itemsize * 8}.json"


def _load_tuning(dtype: str) -> list[dict]:
    try:
        return list(json.loads(tuning_file(dtype).read_text())["records"])
    except FileNotFoundError:
        return []


def check_smem(lp: LaunchPlan, limit: int) -> None:
    """Raise UnsupportedProblemError when ``lp``'s build needs more dynamic shared memory per
    block than ``limit`` (the device's opt-in maximum), naming both and the way out."""
    if lp.smem_bytes > limit:
        raise UnsupportedProblemError(
            f"{lp.variant} needs {lp.smem_bytes} bytes of shared memory per block for this problem "
            f"({'aligned' if lp.vec else 'unaligned'} operands); this device allows {limit}: "
            f"use variant='{VENDOR_VARIANT}'" + ("" if lp.vec else " or 16-byte aligned operands")
        )


def choose_auto_variant(m: int, n: int, k: int, dtype: str = "float32", records: list[dict] | None = None, sm: int = 0) -> tuple[str, str]:
    """The auto-selectable rung that measured fastest at the shape nearest (m, n, k).

    Returns (variant, reason). Only predicated rungs are eligible (no padding copies).
    The measurements live in ``tuning/auto_fp32.json``, written from ``polygemm bench``.
    """
    specs = kernel_specs()
    eligible = [s.name for s in specs.values() if s.predicated and s.dtype == dtype and (not sm or s.runs_on(sm))]
    if not eligible:
        raise UnsupportedProblemError(f"no auto-selectable cuda kernel for {dtype}" + (f" on sm_{sm}" if sm else ""))
    name = tuning_file(dtype).name
    rows = [r for r in (records if records is not None else _load_tuning(dtype)) if r["variant"] in eligible and r.get("dtype", "float32") == dtype]
    if not rows:
        default = eligible[-1]
        return default, f"no measured table ({name}) for {dtype}: the last predicated rung, {default}"

    def dist(r: dict) -> float:
        return sum(abs(math.log(max(x, 1)) - math.log(max(int(r[key]), 1))) for x, key in ((m, "m"), (n, "n"), (k, "k")))

    nearest = min(dist(r) for r in rows)
    at = [r for r in rows if dist(r) == nearest]
    best = max(at, key=lambda r: float(r["tflops"]))
    shape = f"{best['m']}x{best['n']}x{best['k']}"
    return best["variant"], f"fastest measured at the nearest benchmarked shape {shape} ({float(best['tflops']):.1f} TFLOP/s, {name})"


def _cache_dir() -> Path:
    base = os.environ.get("POLYGEMM_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "polygemm")
    path = Path(base) / "cubin"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _compile_cubin(source: Path, arch: str, options: list[str]) -> bytes:
    """nvcc ``source`` to a cubin for exactly ``arch`` (e.g. sm_90a), cached on disk by the
    hash of the source, the headers it can include, the options and nvcc's version."""
    import hashlib
    import subprocess
    import tempfile

    nvcc = _find_nvcc() or "nvcc"
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    h = hashlib.sha256()
    for part in [source.read_text(), (KERNEL_DIR / "common.cuh").read_text(), arch, " ".join(options), version]:
        h.update(part.encode())
    cached = _cache_dir() / f"{source.stem}-{arch}-{h.hexdigest()[:24]}.cubin"
    if cached.exists():
        return cached.read_bytes()
    num = arch[3:]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "k.cubin"
        cmd = [nvcc, "-cubin", f"-gencode=arch=compute_{num},code={arch}", *options, f"-I{KERNEL_DIR}", str(source), "-o", str(out)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise DeviceError(f"compiling {source.name} for {arch} failed: {r.stderr.strip()[-2000:]}")
        data = out.read_bytes()
    tmp_path = cached.with_suffix(f".{os.getpid()}.tmp")
    tmp_path.write_bytes(data)
    os.replace(tmp_path, cached)  # atomic: concurrent processes never read half a file
    return data


def tma_fallback() -> str:
    """The rung that serves problems a TMA rung cannot describe: the fp16 mma.sync rung."""
    return next(s.name for s in kernel_specs().values() if s.dtype == "float16" and s.predicated and s.abi == "standard")


class _Runtime:
    """The device's primary context, compiled kernels, and launch helpers."""

    def __init__(self, ordinal: int = 0) -> None:
        import pycuda.driver as drv

        self.drv = drv
        drv.init()
        self.device = drv.Device(ordinal)
        self.name = self.device.name()
        major, minor = self.device.compute_capability()
        self.cc = (major, minor)
        self.arch = f"sm_{major}{minor}"
        self.ctx = self.device.retain_primary_context()
        # the most dynamic shared memory one block may opt in to
        self.max_smem_per_block = int(self.device.get_attribute(drv.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN))
        self._lock = threading.Lock()
        self._functions: dict[tuple, Any] = {}
        self._compiling: dict[tuple, threading.Lock] = {}
        self._param_offset: dict[str, int] = {}  # tma kernels: byte offset of parameter 0
        self._cublas: Any = None

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        self.ctx.push()
        try:
            yield
        finally:
            self.drv.Context.pop()

    def function(self, source: Path, entry: str, macros: dict[str, int] | None = None) -> Any:
        """Compile (once, cached on disk by PyCUDA) and return one kernel entry point.

        Different kernels compile concurrently; callers of the same one wait for it.
        """
        key = (str(source), entry, self.arch, tuple(sorted((macros or {}).items())))
        with self._lock:
            fn = self._functions.get(key)
            if fn is not None:
                return fn
            key_lock = self._compiling.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                fn = self._functions.get(key)
            if fn is None:
                spec = next((sp for sp in kernel_specs().values() if sp.entry == entry), None)
                options = ["-O3", "-std=c++17"] + [f"-D{k}={v}" for k, v in sorted((macros or {}).items())]
                if spec is not None and spec.arch:
                    # sm_90a and friends: nvcc straight to a cubin for exactly that target
                    # (SourceModule's -arch shorthand adds a plain sm_90 pass that rejects wgmma).
                    cubin = _compile_cubin(source, spec.arch, options)
                    mod = self.drv.module_from_buffer(cubin)
                    if spec.abi == "tma":
                        from .tma import first_param_offset

                        self._param_offset[entry] = first_param_offset(cubin, entry)
                else:
                    from pycuda.compiler import SourceModule

                    try:
                        mod = SourceModule(source.read_text(), options=options, arch=self.arch, no_extern_c=True, include_dirs=[str(KERNEL_DIR)])
                    except Exception as exc:
                        raise DeviceError(f"compiling {source.name} ({entry}) for {self.arch} failed: {exc}") from exc
                fn = mod.get_function(entry)
                smem = spec.smem_for(bool((macros or {}).get("PG_VEC", 1))) if spec is not None else 0
                if 48 * 1024 < smem <= self.max_smem_per_block:
                    # opt in to large dynamic shared memory, once per function; a build beyond
                    # the device's limit never launches (plan() and _Launch call check_smem)
                    fn.set_attribute(self.drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)
                with self._lock:
                    self._functions[key] = fn
            return fn

    def param_offset(self, entry: str) -> int:
        return self._param_offset.get(entry, 0)

    def precompile(self, threads: int = 8) -> int:
        """Compile every rung in every macro combination it can be launched with, in parallel."""
        from concurrent.futures import ThreadPoolExecutor

        todo: list[tuple[Path, str, dict[str, int] | None]] = [(_UTIL_SOURCE, "pg_copy_scale_f32", None), (_UTIL_SOURCE, "pg_copy_scale_f16", None)]
        for spec in kernel_specs().values():
            if not spec.runs_on(self.cc[0] * 10 + self.cc[1]):
                continue
            for macros in spec.builds():
                todo.append((spec.source, spec.entry, macros or None))

        def one(job: tuple[Path, str, dict[str, int] | None]) -> None:
            with self.active():
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

    def copy_scale(self, rows: int, cols: int, scale: float, src: Mat | None, dst: Mat) -> None:
        """dst = scale * src (src None or scale 0: zeros, src not read) over rows x cols,
        in dst's element type (float32 or float16; src has the same)."""
        if rows == 0 or cols == 0:
            return
        fn = self.function(_UTIL_SOURCE, "pg_copy_scale_f16" if dst.itemsize == 2 else "pg_copy_scale_f32")
        srs, scs = strides(src) if src is not None else (0, 0)
        drs, dcs = strides(dst)
        blocks = max(1, min(-(-rows * cols // _COPY_BLOCK), 65535))
        fn(np.int64(rows), np.int64(cols), np.float32(scale), np.uintp(src.ptr if src is not None else 0),
           np.int64(srs), np.int64(scs), np.uintp(dst.ptr), np.int64(drs), np.int64(dcs),
           block=(_COPY_BLOCK, 1, 1), grid=(blocks, 1))


class _Launch:
    """One planned product on device matrices, with its scratch buffers held until close().

    Calling it runs packs, the kernel (or cuBLAS) and the unpack, without synchronizing;
    ``polygemm bench`` times calls of it between device events.
    """

    def __init__(self, rt: _Runtime, variant: str, a: Mat, b: Mat, c: Mat, alpha: float, beta: float) -> None:
        self.rt = rt
        self.alpha, self.beta = float(alpha), float(beta)
        spec = None if variant == VENDOR_VARIANT else kernel_specs()[variant]
        try:
            self.lp: LaunchPlan = plan_launch(spec, a, b, c)
        except TmaUnsuitable:
            spec = kernel_specs()[tma_fallback()]
            self.lp = plan_launch(spec, a, b, c)
        check_smem(self.lp, rt.max_smem_per_block)
        self.spec = spec
        self.variant = spec.name if spec is not None else VENDOR_VARIANT  # the one that runs
        self._scratch: list[Any] = []
        self._ptr: dict[int, int] = {}
        try:
            for pack in self.lp.packs:
                buf = rt.drv.mem_alloc(max(pack.scratch_elems, 1) * 4)
                self._scratch.append(buf)
                self._ptr[id(pack.dst)] = int(buf)
            self.fn = rt.function(spec.source, spec.entry, self.lp.macros() if spec.predicated else None) if spec else None
            if self.lp.tma:  # tensor maps: the operands' pointers are fixed for this launch
                from .tma import hgemm_v2_tensor_maps, param_padding

                lp = self.lp
                self._tma_args = (param_padding(rt.param_offset(spec.entry)),
                                  *hgemm_v2_tensor_maps(lp.a.ptr, lp.b.ptr, lp.m, lp.n, lp.k, lp.a.ld, lp.b.ld, lp.trans_a, lp.trans_b))
        except BaseException:
            self.close()
            raise

    def _p(self, mat: Mat) -> Mat:
        ptr = self._ptr.get(id(mat))
        return mat if ptr is None else Mat(mat.name, mat.rows, mat.cols, mat.layout, mat.ld, ptr, mat.itemsize)

    def __call__(self) -> None:
        lp, rt = self.lp, self.rt
        if self.spec is None:
            if lp.a.itemsize == 2:
                rt.cublas().hgemm(lp.trans_a, lp.trans_b, lp.m, lp.n, lp.k, self.alpha, lp.a.ptr, lp.a.ld,
                                  lp.b.ptr, lp.b.ld, self.beta, lp.c.ptr, lp.c.ld, c_f32=lp.c.itemsize == 4)
            else:
                rt.cublas().sgemm(lp.trans_a, lp.trans_b, lp.m, lp.n, lp.k, self.alpha, lp.a.ptr, lp.a.ld,
                                  lp.b.ptr, lp.b.ld, self.beta, lp.c.ptr, lp.c.ld)
            return
        for pack in lp.packs:  # teaching rungs are float32: one 32-bit word per element
            dst = self._p(pack.dst)
            rt.drv.memset_d32(dst.ptr, 0, pack.scratch_elems)
            is_c = pack.dst is lp.c
            if not is_c or self.beta != 0.0:
                rt.copy_scale(pack.src.rows, pack.src.cols, 1.0, pack.src, dst)
        a, b, c = self._p(lp.a), self._p(lp.b), self._p(lp.c)
        if lp.tma:
            self.fn(*self._tma_args, np.int32(lp.m), np.int32(lp.n), np.int32(lp.k), np.float32(self.alpha),
                    np.float32(self.beta), np.uintp(c.ptr), np.int32(c.ld),
                    block=lp.block, grid=lp.grid[:2], shared=lp.smem_bytes)
            return
        self.fn(np.int32(lp.m), np.int32(lp.n), np.int32(lp.k), np.float32(self.alpha),
                np.uintp(a.ptr), np.int32(a.ld), np.uintp(b.ptr), np.int32(b.ld),
                np.float32(self.beta), np.uintp(c.ptr), np.int32(c.ld),
                block=lp.block, grid=lp.grid, shared=lp.smem_bytes)
        if lp.unpack is not None:
            rt.copy_scale(lp.unpack.dst.rows, lp.unpack.dst.cols, 1.0, self._p(lp.unpack.src), lp.unpack.dst)

    def close(self) -> None:
        for buf in self._scratch:
            buf.free()
        self._scratch.clear()

    def __enter__(self) -> "_Launch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _mat(op: Operand, ptr: int | None = None, ld: int | None = None) -> Mat:
    return Mat(op.name, op.rows, op.cols, op.layout, op.ld if ld is None else ld, op.ptr if ptr is None else ptr, op.itemsize)


def _compact_ld(layout: str, rows: int, cols: int) -> int:
    return max(cols if layout == "row" else rows, 1)


class CudaBackend(Backend):
    """NVIDIA GPUs through PyCUDA: two SGEMM ladders, the FP16 tensor-core kernel, cuBLAS."""

    name = "cuda"
    priority = 500
    residencies = ("host", "cuda")

    def __init__(self) -> None:
        self._rt: _Runtime | None = None
        self._rt_error: str | None = None
        self._lock = threading.Lock()

    # -- discovery -------------------------------------------------------------------
    def _runtime(self) -> _Runtime:
        with self._lock:
            if self._rt is None and self._rt_error is None:
                self._rt_error = self._start()
            if self._rt is None:
                raise BackendUnavailableError(f"cuda backend unavailable: {self._rt_error}")
            return self._rt

    def _start(self) -> str | None:
        try:
            import pycuda.driver as drv  # noqa: F401
        except Exception as exc:
            return f"pycuda is not importable ({type(exc).__name__}: {exc}); install it with pip install 'polygemm[cuda]'"
        try:
            drv.init()
        except Exception as exc:
            return f"CUDA driver initialization failed: {exc}"
        try:
            count = drv.Device.count()
        except Exception as exc:
            return f"could not count CUDA devices: {exc}"
        if count < 1:
            return "no CUDA device found"
        try:
            rt = _Runtime(int(os.environ.get("POLYGEMM_CUDA_DEVICE", "0")))
        except Exception as exc:
            return f"could not open CUDA device: {exc}"
        if rt.cc < (6, 0):
            return f"{rt.name} has compute capability {rt.cc[0]}.{rt.cc[1]}; polygemm's kernels need 6.0 or newer"
        if _find_nvcc() is None:
            return "nvcc not found on PATH or in $CUDA_HOME/bin: the kernels compile at run time (install the CUDA toolkit)"
        self._rt = rt
        return None

    def probe(self) -> Availability:
        try:
            self._runtime()
        except BackendUnavailableError:
            return Availability(False, self._rt_error or "unknown")
        return Availability(True)

    def variants(self) -> Sequence[Variant]:
        return variant_table()

    def device_name(self) -> str:
        rt = self._rt
        return f"{rt.name} ({rt.arch})" if rt is not None else ""

    # -- planning --------------------------------------------------------------------
    def _result_layout(self, p: GemmProblem) -> str:
        if p.out is not None:
            return p.out.layout
        if p.c is not None:
            return p.c.layout
        return "row"

    def _plan_mats(self, p: GemmProblem) -> tuple[Mat, Mat, Mat]:
        """The operands as the device will hold them (host ones as fresh compact buffers)."""
        layout = self._result_layout(p)
        osize = p.out_dtype.itemsize
        if p.residency == "host":
            a = _mat(p.a, 0, _compact_ld(p.a.layout, p.a.rows, p.a.cols))
            b = _mat(p.b, 0, _compact_ld(p.b.layout, p.b.rows, p.b.cols))
            c = Mat("c", p.m, p.n, layout, _compact_ld(layout, p.m, p.n), 0, osize)
        else:
            a, b = _mat(p.a), _mat(p.b)
            c = _mat(p.out) if p.out is not None else Mat("c", p.m, p.n, layout, _compact_ld(layout, p.m, p.n), 0, osize)
        return a, b, c

    def plan(self, problem: GemmProblem, variant: str = "auto") -> Plan:
        p = problem
        sm = self._rt.cc[0] * 10 + self._rt.cc[1] if self._rt is not None else 0
        if variant == "auto":
            self.check_problem(p)
            chosen, reason = choose_auto_variant(p.m, p.n, p.k, p.dtype.name, sm=sm)
        else:
            chosen, reason = self.get_variant(variant).name, f"variant={variant!r} requested"
        v = self.get_variant(chosen)
        self.check_problem(p, v)
        spec = kernel_specs().get(chosen)
        if spec is not None and sm and not spec.runs_on(sm):
            need = spec.arch or f"sm_{spec.min_sm} or newer"
            raise UnsupportedProblemError(f"variant {chosen!r} needs {need}; this device is sm_{sm}")
        plan = Plan(self.name, chosen, reason, p, device=self.device_name(), layouts=host_layouts(p))
        if p.residency == "host":
            plan.copies.append("host -> device: a, b" + (", c" if p.c is not None and p.beta != 0 else "") + "; device -> host: result")
        if p.empty:
            plan.reason += "; empty product (M, N or K is 0): no GEMM kernel launched"
            return plan
        a, b, c = self._plan_mats(p)
        try:
            lp = plan_launch(None if chosen == VENDOR_VARIANT else kernel_specs()[chosen], a, b, c)
        except TmaUnsuitable as exc:
            fallback = tma_fallback()
            plan.notes.append(f"{chosen} cannot take this problem ({exc}); {fallback} runs instead")
            plan.variant = fallback
            lp = plan_launch(kernel_specs()[fallback], a, b, c)
        if self._rt is not None:
            check_smem(lp, self._rt.max_smem_per_block)
        plan.launch = lp.describe()
        if lp.packs:
            plan.padding = "; ".join(f"{pk.src.name} -> {pk.dst.rows}x{pk.dst.cols} scratch" for pk in lp.packs)
        plan.notes.extend(lp.notes)
        return plan

    # -- running ---------------------------------------------------------------------
    def run(self, plan: Plan) -> Any:
        rt = self._runtime()
        p = plan.problem
        try:
            with rt.active():
                if p.residency == "host":
                    return self._run_host(rt, plan)
                return self._run_device(rt, plan)
        except (DeviceError, UnsupportedProblemError):
            raise
        except MemoryError as exc:
            raise DeviceError(f"CUDA out of memory for {p.shape_str()}: {exc}") from exc
        except Exception as exc:
            if type(exc).__module__.startswith("pycuda"):
                raise DeviceError(f"CUDA error running {plan.variant} on {p.shape_str()}: {exc}") from exc
            raise

    def _run_host(self, rt: _Runtime, plan: Plan) -> Any:
        p = plan.problem
        layout = self._result_layout(p)
        order = "C" if layout == "row" else "F"
        if p.empty:
            if p.k == 0 and p.c is not None and p.beta != 0.0:
                res = (np.float32(p.beta) * p.c.array.astype(np.float32)).astype(p.out_dtype)  # beta*c, rounded once
            else:
                res = np.zeros((p.m, p.n), p.out_dtype)
            if p.out is not None:
                np.copyto(p.out.array, res)
                return p.out.array
            return res
        drv = rt.drv
        allocs: list[Any] = []
        try:
            def upload(host: np.ndarray, layout_: str) -> Mat:
                arr = np.ascontiguousarray(host) if layout_ == "row" else np.asfortranarray(host)
                buf = drv.mem_alloc(max(arr.nbytes, 1))
                allocs.append(buf)
                drv.memcpy_htod(buf, arr)
                return Mat("", arr.shape[0], arr.shape[1], layout_, _compact_ld(layout_, *arr.shape), int(buf), arr.itemsize)

            a = upload(p.a.array, p.a.layout)
            b = upload(p.b.array, p.b.layout)
            if p.c is not None and p.beta != 0.0:
                c = upload(p.c.array, layout)
            else:
                buf = drv.mem_alloc(max(p.m * p.n * p.out_dtype.itemsize, 1))
                allocs.append(buf)
                c = Mat("c", p.m, p.n, layout, _compact_ld(layout, p.m, p.n), int(buf), p.out_dtype.itemsize)
            with _Launch(rt, plan.variant, a, b, c, p.alpha, p.beta) as launch:
                launch()
                rt.ctx.synchronize()
            res = np.empty((p.m, p.n), p.out_dtype, order=order)
            drv.memcpy_dtoh(res, c.ptr)
        finally:
            for buf in allocs:
                buf.free()
        if p.out is not None:
            np.copyto(p.out.array, res)
            return p.out.array
        return res

    def _run_device(self, rt: _Runtime, plan: Plan) -> Any:
        import pycuda.gpuarray as gpuarray

        p = plan.problem
        # __cuda_array_interface__ v3: a producer stream means pending work; wait for it.
        if any(op.interface is not None and op.interface.get("stream") is not None for op in p.operands()):
            rt.ctx.synchronize()
        layout = self._result_layout(p)
        if p.out is not None:
            result: Any = p.out.array
            dest = _mat(p.out)
        else:
            result = gpuarray.empty((p.m, p.n), p.out_dtype, order="C" if layout == "row" else "F")
            dest = Mat("c", p.m, p.n, layout, _compact_ld(layout, p.m, p.n), int(result.gpudata) if p.m * p.n else 0, p.out_dtype.itemsize)
        if p.m == 0 or p.n == 0:
            return result
        c_src = _mat(p.c) if p.c is not None and p.beta != 0.0 else None
        if p.k == 0:
            rt.copy_scale(p.m, p.n, p.beta, c_src, dest)
        else:
            if c_src is not None and not p.in_place:
                rt.copy_scale(p.m, p.n, 1.0, c_src, dest)
            with _Launch(rt, plan.variant, _mat(p.a), _mat(p.b), dest, p.alpha, p.beta) as launch:
                launch()
                rt.ctx.synchronize()
        rt.ctx.synchronize()
        return result

    # -- device helpers ----------------------------------------------------------------
    def to_device(self, array: np.ndarray) -> Any:
        import pycuda.gpuarray as gpuarray

        rt = self._runtime()
        with rt.active():
            return gpuarray.to_gpu(np.asarray(array))

    def to_host(self, array: Any) -> np.ndarray:
        rt = self._runtime()
        with rt.active():
            if hasattr(array, "get"):
                return array.get()
            raise TypeError(f"cannot copy a {type(array).__name__} to the host; expected a pycuda GPUArray")

    def synchronize(self) -> None:
        rt = self._runtime()
        with rt.active():
            rt.ctx.synchronize()

    def timer(self) -> Callable[[Callable[[], Any]], float]:
        rt = self._runtime()

        def _time(fn: Callable[[], Any]) -> float:
            with rt.active():
                start, end = rt.drv.Event(), rt.drv.Event()
                start.record()
                fn()
                end.record()
                end.synchronize()
                return start.time_till(end) / 1e3

        return _time

    def launcher(self, variant: str, a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0) -> _Launch:
        """A reusable launch of ``variant`` on device arrays (for benchmarks): call it to
        queue one product without synchronizing; ``close()`` frees its scratch."""
        from ...problem import normalize

        p = normalize(a, b, c, alpha=alpha, beta=beta, out=c)
        if p.residency != "cuda":
            raise UnsupportedProblemError("launcher() takes CUDA device arrays")
        rt = self._runtime()
        with rt.active():
            return _Launch(rt, variant, _mat(p.a), _mat(p.b), _mat(p.out), alpha, beta)  # type: ignore[arg-type]

    @property
    def runtime(self) -> _Runtime:
        return self._runtime()
