// dgemm/dmma_ptx.cuh: the PTX of the FP64 tensor-core rungs: 16-byte shared loads of
// two doubles (and 8-byte loads of one), and the f64 mma.sync shapes (m8n8k4 on sm_80+, m16n8k8 and
// m16n8k16 on sm_90+).
#pragma once
#include "dgemm/dmma_config.cuh"

namespace dgemm {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// cp.async and its groups: common.cuh's pg_cp_async (16 bytes .cg, 8 bytes .ca, the rest of a copy zero-filled).

__device__ __forceinline__ void lds_f64x2(double& x, double& y, uint32_t addr) {
    asm volatile("ld.shared.v2.f64 {%0, %1}, [%2];\n" : "=d"(x), "=d"(y) : "r"(addr));
}

__device__ __forceinline__ void lds_f64(double& x, uint32_t addr) {
    asm volatile("ld.shared.f64 %0, [%1];\n" : "=d"(x) : "r"(addr));
}

// d += a * b, one m8n8k4 tile: a lane holds A (g, t), B (t, g) and C (g, 2t), (g, 2t + 1).
__device__ __forceinline__ void mma_884(double& d0, double& d1, double a, double b) {
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
                 : "+d"(d0), "+d"(d1)
                 : "d"(a), "d"(b));
}
// m16n8k8: A (g + 8 (i & 1), t + 4 (i >> 1)) for i < 4, B (t + 4 i, g) for i < 2, C rows g and
// g + 8 at columns 2t, 2t + 1 (d0, d1 and d2, d3).
__device__ __forceinline__ void mma_1688(double (&d)[4], const double (&a)[4], const double (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
}
// m16n8k16: A (g + 8 (i & 1), t + 4 (i >> 1)) for i < 8, B (t + 4 i, g) for i < 4, C as m16n8k8.
__device__ __forceinline__ void mma_16816(double (&d)[4], const double (&a)[8], const double (&b)[4]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3};\n"
                 : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
                   "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
}
}  // namespace dgemm
