// v03_register_index: over v02, the threadblock becomes one-dimensional (1024 threads)
// and each thread derives its (row, col) inside the tile once, into registers
// (row = tid % 32, col = tid / 32), instead of carrying two thread-index dimensions.
// The work and the shared-memory layout are unchanged (the A tile is still read with a
// 32-way bank conflict; v04 fixes that). Realizes seed 000/001 "Version 3".
// Padded rung: M, N, K multiples of 32, operands in the column-major layout.
#include "common.cuh"

namespace cm_v03 {
constexpr int kBlockM = 32;  // threadblock tile M
constexpr int kBlockN = 32;  // threadblock tile N
constexpr int kBlockK = 32;  // threadblock tile K
constexpr int kThreads = kBlockM * kBlockN;
}

extern "C" __global__ void __launch_bounds__(cm_v03::kThreads)
sgemm_cm_v03_register_index(int M, int N, int K, float alpha,
                            const float* __restrict__ A, int lda,
                            const float* __restrict__ B, int ldb,
                            float beta, float* __restrict__ C, int ldc) {
    using namespace cm_v03;
    __shared__ float sA[kBlockM][kBlockK];  // sA[i][k]
    __shared__ float sB[kBlockN][kBlockK];  // sB[j][k]
    const int row = threadIdx.x % kBlockM;  // i inside the tile (and k when loading B)
    const int col = threadIdx.x / kBlockM;  // j inside the tile (and k when loading A)
    A += blockIdx.x * kBlockM;
    B += CM_IDX(0, blockIdx.y * kBlockN, ldb);
    C += CM_IDX(blockIdx.x * kBlockM, blockIdx.y * kBlockN, ldc);

    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += kBlockK) {
        sA[row][col] = A[CM_IDX(row, col, lda)];
        sB[col][row] = B[CM_IDX(row, col, ldb)];
        A += kBlockK * lda;
        B += kBlockK;
        __syncthreads();
        for (int k = 0; k < kBlockK; ++k) acc += sA[row][k] * sB[col][k];
        __syncthreads();
    }
    float* c = &C[CM_IDX(row, col, ldc)];
    *c = (beta != 0.f) ? alpha * acc + beta * *c : alpha * acc;  // beta == 0: C not read
}
