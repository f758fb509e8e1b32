"""Stand-ins for the cuda backend's launch path on the CPU: kernels, a runtime, a driver whose launches are recorded,
tensor maps that name their pointers, and the plain and other launch plans of the rungs."""

from __future__ import annotations

import struct
import threading
import types

import numpy as np
import pytest


class FakeKernel:
    def struct_for(self, codes):
        return struct.Struct("<" + "".join(codes))

    def launcher(self, grid, block, smem, cooperative=False):
        def go(buf, stream):
            pass
        go.cooperative = cooperative
        return go

    def kept_launcher(self, layout, grid, block, smem, cooperative=False):
        def go(key, stream, args_of):
            layout.pack(*args_of(key))
        go.cooperative = cooperative
        return go

    def resident_blocks(self, threads, smem):
        return 64

    def resident_clusters(self, size, threads, smem):
        return 16


class FakeRuntime:
    sms = 132

    def __init__(self):
        self.built = 0
        self.scratches = 0
        self.cu = types.SimpleNamespace(memset_d32_async=lambda *args: None)

    def function(self, source, entry, macros):
        self.built += 1
        return FakeKernel()

    def enter(self):
        return False

    def leave(self):
        pass

    def scratch(self, nbytes, stream):
        self.scratches += 1
        return 0x500000 + 0x1000 * self.scratches

    def release(self, ptr, stream):
        pass

    def give_back(self, workspaces):
        pass


def mat(name, rows, cols, itemsize):
    from polygemm.backends.cuda.planning import Mat

    return Mat(name, rows, cols, "row", cols, ptr=0, itemsize=itemsize)


def launches():
    from polygemm.backends.cuda.planning import plan_launch
    from polygemm.backends.cuda.variants import kernel_specs

    specs = kernel_specs()

    def plan(name, m, n, k, **kw):
        it = 2 if name and name.startswith("hgemm") else 4
        return specs[name] if name else None, plan_launch(specs[name] if name else None, mat("a", m, k, it), mat("b", k, n, it),
                                                          mat("c", m, n, it), **kw)

    plain = {"swapped": plan("cm_v12_cp_async", 128, 128, 128), "row-major": plan("rm_v3_float4", 128, 128, 128),
             "batched": plan("cm_v12_cp_async", 128, 128, 128, batch=(3, 128 * 128, 128 * 128, 128 * 128)),
             "tma": plan("hgemm_v2_wgmma_tma", 128, 128, 128),
             "tma batched": plan("hgemm_v2_wgmma_tma", 128, 128, 128, batch=(3, 128 * 128, 128 * 128, 128 * 128)),
             "tma store": plan("hgemm_v3_wgmma_pingpong_persistent_tma_store", 128, 128, 128)}
    other = {"split-K": plan("cm_v12_cp_async", 128, 128, 1024, splits=2), "tma split-K": plan("hgemm_v2_wgmma_tma", 128, 128, 1024, splits=2),
             "stream-K": plan("hgemm_v2_wgmma_tma_streamk", 128, 128, 128), "packed": plan("rm_v3_float4", 100, 70, 36),
             "cuBLAS": plan(None, 128, 128, 128)}
    return plain, other


@pytest.fixture
def fake_maps(monkeypatch):
    from polygemm.backends.cuda import tma

    def ab(a, b, *args, **kw):
        return (np.frombuffer(struct.pack("<QQ", a, b) * 8, "V128")[0], np.frombuffer(struct.pack("<QQ", b, a) * 8, "V128")[0])

    def c_map(c, *args, **kw):
        return np.frombuffer(struct.pack("<QQ", c, c) * 8, "V128")[0]

    monkeypatch.setattr(tma, "hgemm_v2_tensor_maps", ab)
    monkeypatch.setattr(tma, "hgemm_v2_c_map", c_map)


def fake_driver():
    import cffi

    from polygemm.backends.cuda import driver as drv_mod

    drv = drv_mod.Driver.__new__(drv_mod.Driver)
    drv.ffi = cffi.FFI()
    drv.ffi.cdef(drv_mod._CDEF)
    drv._local = threading.local()
    drv._streams = {}
    launched: list[tuple] = []
    rc = {"next": 0}

    def cu_launch_ex(cfg, fn, params, extra):
        ffi = drv.ffi
        assert params == ffi.NULL and int(ffi.cast("uintptr_t", extra[0])) == 1 and int(ffi.cast("uintptr_t", extra[2])) == 2
        n = ffi.cast("size_t *", extra[3])[0]
        geo = (cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ, cfg.sharedMemBytes)
        attr = ffi.cast("CUlaunchAttribute *", cfg.attrs)
        coop = cfg.numAttrs == 1 and attr.id == drv_mod.CU_LAUNCH_ATTRIBUTE_COOPERATIVE and attr.value.cooperative == 1
        assert cfg.numAttrs == 0 or coop
        launched.append((threading.get_ident(), ffi.buffer(ffi.cast("char *", extra[1]), n)[:], int(ffi.cast("uintptr_t", cfg.hStream)),
                         geo, int(ffi.cast("uintptr_t", extra[1])), coop))
        return rc["next"]

    drv.lib = types.SimpleNamespace(cuLaunchKernelEx=cu_launch_ex)
    drv.error_text = lambda code: f"CUresult {code}"
    return drv, launched, rc
