// v02_smem_tiling: adds shared-memory tiling over v01. The 32 x 32 threads of a
// threadblock first copy a 32 x 32 tile of A and of B into shared memory (one element
// each, coalesced), synchronize, and then run the inner product over the tile from shared
// memory, so each global value is read once per threadblock instead of once per thread.
// Realizes seed 000/001 "Version 2". Like the seed it stores the A tile row-major
// (sA[i][k]): in the inner loop the 32 lanes of a warp read sA[lane][k], 32 floats one
// row (32 words) apart, which all fall into the same bank: a 32-way bank conflict that
// v04 removes. The B tile is stored transposed, sB[j][k], and read as a broadcast.
// Padded rung: M, N, K multiples of 32, operands in the column-major layout.
#include "common.cuh"

namespace cm_v02 {
constexpr int kBM = 32;  // threadblock tile M
constexpr int kBN = 32;  // threadblock tile N
constexpr int kBK = 32;  // threadblock tile K
}

extern "C" __global__ void __launch_bounds__(cm_v02::kBM * cm_v02::kBN)
sgemm_cm_v02_smem_tiling(int M, int N, int K, float alpha,
                         const float* __restrict__ A, int lda,
                         const float* __restrict__ B, int ldb,
                         float beta, float* __restrict__ C, int ldc) {
    using namespace cm_v02;
    __shared__ float sA[kBM][kBK];  // sA[i][k]: row-major, bank-conflicted reads
    __shared__ float sB[kBN][kBK];  // sB[j][k]
    const int tx = threadIdx.x, ty = threadIdx.y;
    A += blockIdx.x * kBM;                 // row block of A
    B += CM_IDX(0, blockIdx.y * kBN, ldb); // column block of B
    C += CM_IDX(blockIdx.x * kBM, blockIdx.y * kBN, ldc);

    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += kBK) {
        sA[tx][ty] = A[CM_IDX(tx, ty, lda)];  // (i = tx, k = ty)
        sB[ty][tx] = B[CM_IDX(tx, ty, ldb)];  // (k = tx, j = ty)
        A += kBK * lda;
        B += kBK;
        __syncthreads();
        for (int k = 0; k < kBK; ++k) acc += sA[tx][k] * sB[ty][k];
        __syncthreads();
    }
    float* c = &C[CM_IDX(tx, ty, ldc)];
    *c = (beta != 0.f) ? alpha * acc + beta * *c : alpha * acc;  // beta == 0: C not read
}
