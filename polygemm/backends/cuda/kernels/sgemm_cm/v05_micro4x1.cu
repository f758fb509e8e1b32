// v05_micro4x1: over v04, each thread computes a 4 x 1 thread tile (4 consecutive rows of
// one column of C) instead of one element, so a threadblock needs 256 threads instead of
// 1024 and every B value read from shared memory feeds 4 FMAs from a register.
// Realizes seed 000/001 "Version 5" (4x1 micro-kernel).
// Geometry: threadblock tile 32 x 32 x 32, 256 threads, thread tile 4 x 1.
// Padded rung: M, N, K multiples of 32, operands in the column-major layout.
#include "common.cuh"

namespace cm_v05 {
constexpr int kBM = 32;   // threadblock tile M
constexpr int kBN = 32;   // threadblock tile N
constexpr int kBK = 32;   // threadblock tile K
constexpr int kThreadM = 4;   // thread tile M (thread tile N = 1)
constexpr int kThreads = kBM * kBN / kThreadM;
}

extern "C" __global__ void __launch_bounds__(cm_v05::kThreads)
sgemm_cm_v05_micro4x1(int M, int N, int K, float alpha,
                      const float* __restrict__ A, int lda,
                      const float* __restrict__ B, int ldb,
                      float beta, float* __restrict__ C, int ldc) {
    using namespace cm_v05;
    __shared__ float sA[kBK][kBM];  // sA[k][i]
    __shared__ float sB[kBN][kBK];  // sB[j][k]
    const int row = (threadIdx.x % (kBM / kThreadM)) * kThreadM;  // first of 4 rows
    const int col = threadIdx.x / (kBM / kThreadM);
    A += blockIdx.x * kBM;
    B += CM_IDX(0, blockIdx.y * kBN, ldb);
    C += CM_IDX(blockIdx.x * kBM, blockIdx.y * kBN, ldc);

    float acc[kThreadM] = {0.f, 0.f, 0.f, 0.f};
    for (int k0 = 0; k0 < K; k0 += kBK) {
#pragma unroll
        for (int r = 0; r < kThreadM; ++r) {
            sA[col][row + r] = A[CM_IDX(row + r, col, lda)];  // (i, k = col)
            sB[col][row + r] = B[CM_IDX(row + r, col, ldb)];  // (k, j = col)
        }
        A += kBK * lda;
        B += kBK;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kBK; ++k) {
            const float b = sB[col][k];
#pragma unroll
            for (int r = 0; r < kThreadM; ++r) acc[r] += sA[k][row + r] * b;
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < kThreadM; ++r) {
        float* c = &C[CM_IDX(row + r, col, ldc)];
        *c = (beta != 0.f) ? alpha * acc[r] + beta * *c : alpha * acc[r];
    }
}
