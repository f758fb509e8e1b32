// Rung v0 (row-major ladder): the baseline. One thread computes one element of C,
// reading its row of A and column of B straight from global memory (no reuse at all).
// Realizes 002 sgemm_v0_global_mem. Predicated: any M, N, K >= 1; honours PG_TRANS_A and
// PG_TRANS_B (PG_VEC is irrelevant: this rung makes scalar accesses only).
//
// Launch: blockDim (kThreadblockN, kThreadblockM) = (32, 8); gridDim.x tiles N, gridDim.y
// tiles M. threadIdx.x runs along a row of C so a warp's B and C accesses are coalesced.

#ifndef PG_TRANS_A
#define PG_TRANS_A 0
#endif
#ifndef PG_TRANS_B
#define PG_TRANS_B 0
#endif

namespace {

constexpr int kThreadblockM = 8;   // threadblock tile rows (blockDim.y)
constexpr int kThreadblockN = 32;  // threadblock tile columns (blockDim.x), one warp wide
constexpr int kThreads = kThreadblockM * kThreadblockN;

// Element (i, k) of op(A) and (k, j) of op(B) in the row-major ladder layout.
__device__ __forceinline__ float load_a(const float* __restrict__ A, int lda, int i, int k) {
#if PG_TRANS_A
    return A[k * lda + i];
#else
    return A[i * lda + k];
#endif
}

__device__ __forceinline__ float load_b(const float* __restrict__ B, int ldb, int k, int j) {
#if PG_TRANS_B
    return B[j * ldb + k];
#else
    return B[k * ldb + j];
#endif
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
sgemm_rm_v0_global_mem(int M, int N, int K, float alpha,
                       const float* __restrict__ A, int lda,
                       const float* __restrict__ B, int ldb,
                       float beta, float* __restrict__ C, int ldc)
{
    const int i = blockIdx.y * kThreadblockM + threadIdx.y;  // row of C
    const int j = blockIdx.x * kThreadblockN + threadIdx.x;  // column of C
    if (i >= M || j >= N) return;  // edge guard: partial threadblock tiles

    float acc = 0.f;
    for (int k = 0; k < K; ++k)
        acc = fmaf(load_a(A, lda, i, k), load_b(B, ldb, k, j), acc);

    // Epilogue: C = alpha * acc + beta * C; beta == 0 never reads C.
    float* c = C + i * ldc + j;
    *c = (beta == 0.f) ? alpha * acc : fmaf(beta, *c, alpha * acc);
}
