// The wgmma rung's direct epilogue (HG2_EPILOGUE=0, and HG2_COL_C's column-major C): each
// thread stores its accumulator fragment's pairs straight to C. Also the output type OutT the
// other epilogues share.
#pragma once
#include "hgemm/wgmma_config.cuh"

namespace hgemm_v2 {

#if PG_OUT_F32
using OutT = float;
#else
using OutT = pg_half;
#endif

// One output (row, col) of a column-major C (HG2_COL_C): alpha * v + beta * C.
__device__ __forceinline__ void store_one(OutT* p, float v, float beta) {
#if PG_OUT_F32
    *p = beta != 0.f ? fmaf(beta, *p, v) : v;
#else
    *p = pg_float2half_rn(beta != 0.f ? fmaf(beta, pg_half2float(*p), v) : v);
#endif
}

// Two adjacent outputs (row, col), (row, col + 1); col is even. Stores are predicated on N;
// with an even ldc and a 4 (8) byte aligned C the pair is 4 (8) byte aligned and stored at once. HG2_COL_C: the two
// lie ldc apart (a column-major C), each stored alone.
__device__ __forceinline__ void store_pair(OutT* __restrict__ C, int ldc, int row, int col, int N,
                                           float v0, float v1, float alpha, float beta) {
#if HG2_COL_C
    OutT* q = C + static_cast<size_t>(col) * ldc + row;
    if (col < N) store_one(q, alpha * v0, beta);
    if (col + 1 < N) store_one(q + ldc, alpha * v1, beta);
    return;
#endif
    OutT* p = C + static_cast<size_t>(row) * ldc + col;
    v0 *= alpha;
    v1 *= alpha;
    // paired where the pair is aligned (an odd ldc or C pointer: each element alone, below)
    if (col + 1 < N && (reinterpret_cast<uintptr_t>(p) & (2 * sizeof(OutT) - 1)) == 0) {
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
    } else {
        if (col < N) store_one(p, v0, beta);
        if (col + 1 < N) store_one(p + 1, v1, beta);
    }
}

}  // namespace hgemm_v2
