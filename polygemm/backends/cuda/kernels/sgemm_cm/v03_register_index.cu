// v03_register_index: over v02, the threadblock becomes one-dimensional (1024 threads)
// and each thread derives its (row, col) inside the tile once, into registers
// (row = tid % 32, col = tid / 32), instead of carrying two thread-index dimensions.
// The work and the shared-memory layout are unchanged (the A tile is still read with a
// 32-way bank conflict; v04 fixes that). Realizes seed 000/001 "Version 3".
// Padded rung: M, N, K multiples of 32, operands in the column-major layout.
#include "common.cuh"

namespace cm_v03 {
constexpr int kBM = 32;  // threadblock tile M
constexpr int kBN = 32;  // threadblock tile N
constexpr int kBK = 32;  // threadblock tile K
constexpr int kThreads = kBM * kBN;
}

extern "C" __global__ void __launch_bounds__(cm_v03::kThreads)
sgemm_cm_v03_register_index(int M, int N, int K, float alpha,
                            const float* __restrict__ A, int lda,
                            const float* __restrict__ B, int ldb,
                            float beta, float* __restrict__ C, int ldc) {
    using namespace cm_v03;
    __shared__ float sA[kBM][kBK];  // sA[i][k]
    __shared__ float sB[kBN][kBK];  // sB[j][k]
    const int row = threadIdx.x % kBM;  // i inside the tile (and k when loading B)
    const int col = threadIdx.x / kBM;  // j inside the tile (and k when loading A)
    A += blockIdx.x * kBM;
    B += CM_IDX(0, blockIdx.y * kBN, ldb);
    C += CM_IDX(blockIdx.x * kBM, blockIdx.y * kBN, ldc);

    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += kBK) {
        sA[row][col] = A[CM_IDX(row, col, lda)];
        sB[col][row] = B[CM_IDX(row, col, ldb)];
        A += kBK * lda;
        B += kBK;
        __syncthreads();
        for (int k = 0; k < kBK; ++k) acc += sA[row][k] * sB[col][k];
        __syncthreads();
    }
    float* c = &C[CM_IDX(row, col, ldc)];
    *c = (beta != 0.f) ? alpha * acc + beta * *c : alpha * acc;  // beta == 0: C not read
}
