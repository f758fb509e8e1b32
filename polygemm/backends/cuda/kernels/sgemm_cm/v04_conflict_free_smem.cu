// v04_conflict_free_smem: over v03, the A tile is stored K-major in shared memory
// (sA[k][i], i.e. column-major like A itself), so in the inner loop the 32 lanes of a warp
// read 32 consecutive words sA[k][row]: one bank each, no conflict. The B tile keeps the
// (j, k) order in which it arrives (sB[j][k] written with consecutive k per lane: also
// conflict-free) and is read as a broadcast (all lanes of a warp share col). Realizes seed
// 000/001 "Version 4" (whose B store is transposed and 32-way conflicted; the intent,
// conflict-free shared memory, is realized here for both tiles).
// Padded rung: M, N, K multiples of 32, operands in the column-major layout.
#include "common.cuh"

namespace cm_v04 {
constexpr int kBM = 32;  // threadblock tile M
constexpr int kBN = 32;  // threadblock tile N
constexpr int kBK = 32;  // threadblock tile K
constexpr int kThreads = kBM * kBN;
}

extern "C" __global__ void __launch_bounds__(cm_v04::kThreads)
sgemm_cm_v04_conflict_free_smem(int M, int N, int K, float alpha,
                                const float* __restrict__ A, int lda,
                                const float* __restrict__ B, int ldb,
                                float beta, float* __restrict__ C, int ldc) {
    using namespace cm_v04;
    __shared__ float sA[kBK][kBM];  // sA[k][i]
    __shared__ float sB[kBN][kBK];  // sB[j][k]
    const int row = threadIdx.x % kBM;
    const int col = threadIdx.x / kBM;
    A += blockIdx.x * kBM;
    B += CM_IDX(0, blockIdx.y * kBN, ldb);
    C += CM_IDX(blockIdx.x * kBM, blockIdx.y * kBN, ldc);

    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += kBK) {
        sA[col][row] = A[CM_IDX(row, col, lda)];  // (i = row, k = col)
        sB[col][row] = B[CM_IDX(row, col, ldb)];  // (k = row, j = col)
        A += kBK * lda;
        B += kBK;
        __syncthreads();
        for (int k = 0; k < kBK; ++k) acc += sA[k][row] * sB[col][k];
        __syncthreads();
    }
    float* c = &C[CM_IDX(row, col, ldc)];
    *c = (beta != 0.f) ? alpha * acc + beta * *c : alpha * acc;  // beta == 0: C not read
}
