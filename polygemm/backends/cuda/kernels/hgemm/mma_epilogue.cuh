// The mma.sync rung's epilogue: the output type and the stores of one accumulator fragment's
// pairs (alpha * acc + beta * C).
#pragma once
#include "hgemm/mma_config.cuh"

namespace hgemm_v1 {

#if PG_OUT_F32
typedef float OutT;
#else
typedef pg_half OutT;
#endif

__device__ __forceinline__ float load_out(const OutT* p) {
#if PG_OUT_F32
    return *p;
#else
    return pg_half2float(*p);
#endif
}
__device__ __forceinline__ void store_out(OutT* p, float v) {
#if PG_OUT_F32
    *p = v;
#else
    *p = pg_float2half_rn(v);
#endif
}

// Two horizontally adjacent results (row, col), (row, col+1) of one accumulator fragment.
// Columns below n_lo are left alone (PG_ROW_SPLIT's moved edge tiles).
__device__ __forceinline__ void store_pair(OutT* __restrict__ C, int ldc, int row, int col, int N,
                                           float v0, float v1, float alpha, float beta,
                                           int n_lo = 0) {
    OutT* p = C + row * ldc + col;
    v0 *= alpha;
    v1 *= alpha;
#if PG_VEC
    if (col + 1 < N) {  // col even, ldc % 8 == 0, C 16-byte aligned: the pair is aligned
#if PG_OUT_F32
        float2* q = reinterpret_cast<float2*>(p);
        if (beta != 0.f) {
            const float2 old = *q;
            v0 = fmaf(beta, old.x, v0);
            v1 = fmaf(beta, old.y, v1);
        }
        *q = make_float2(v0, v1);
#else
        pg_half2* q = reinterpret_cast<pg_half2*>(p);
        if (beta != 0.f) {
            const float2 old = pg_half22float2(*q);
            v0 = fmaf(beta, old.x, v0);
            v1 = fmaf(beta, old.y, v1);
        }
        *q = pg_floats2half2_rn(v0, v1);
#endif
        return;
    }
#endif
#if PG_ROW_SPLIT
    if (col < N && col >= n_lo) store_out(p, beta != 0.f ? fmaf(beta, load_out(p), v0) : v0);
    if (col + 1 < N && col + 1 >= n_lo) store_out(p + 1, beta != 0.f ? fmaf(beta, load_out(p + 1), v1) : v1);
#else
    if (col < N) store_out(p, beta != 0.f ? fmaf(beta, load_out(p), v0) : v0);
    if (col + 1 < N) store_out(p + 1, beta != 0.f ? fmaf(beta, load_out(p + 1), v1) : v1);
#endif
}

}  // namespace hgemm_v1
