// v06_float4: over v05, global-memory traffic moves in float4 (128-bit) transactions:
// each thread reads its 4 consecutive A rows and 4 consecutive B k-values with one load
// each, writes the A chunk to shared memory with one 128-bit store, and reads/writes its
// 4 x 1 piece of C as one float4. Realizes seed 000/001 "Version 6".
// Geometry: threadblock tile 32 x 32 x 32, 256 threads, thread tile 4 x 1.
// Padded rung: M, N, K multiples of 32; pointers 16-byte aligned and leading dimensions
// multiples of 4 (align 4).
#include "common.cuh"

namespace cm_v06 {
constexpr int kBM = 32;   // threadblock tile M
constexpr int kBN = 32;   // threadblock tile N
constexpr int kBK = 32;   // threadblock tile K
constexpr int kThreadM = 4;   // thread tile M (thread tile N = 1)
constexpr int kThreads = kBM * kBN / kThreadM;
}

extern "C" __global__ void __launch_bounds__(cm_v06::kThreads)
sgemm_cm_v06_float4(int M, int N, int K, float alpha,
                    const float* __restrict__ A, int lda,
                    const float* __restrict__ B, int ldb,
                    float beta, float* __restrict__ C, int ldc) {
    using namespace cm_v06;
    __shared__ __align__(16) float sA[kBK][kBM];  // sA[k][i]
    __shared__ __align__(16) float sB[kBN][kBK];  // sB[j][k]
    const int row = (threadIdx.x % (kBM / kThreadM)) * kThreadM;
    const int col = threadIdx.x / (kBM / kThreadM);
    A += blockIdx.x * kBM;
    B += CM_IDX(0, blockIdx.y * kBN, ldb);
    C += CM_IDX(blockIdx.x * kBM, blockIdx.y * kBN, ldc);

    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int k0 = 0; k0 < K; k0 += kBK) {
        cm_st4(&sA[col][row], cm_ld4(&A[CM_IDX(row, col, lda)]));  // 4 rows i, k = col
        cm_st4(&sB[col][row], cm_ld4(&B[CM_IDX(row, col, ldb)]));  // 4 k, column j = col
        A += kBK * lda;
        B += kBK;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kBK; ++k) {
            const float b = sB[col][k];
            const float4 a = *reinterpret_cast<const float4*>(&sA[k][row]);
            acc.x += a.x * b; acc.y += a.y * b; acc.z += a.z * b; acc.w += a.w * b;
        }
        __syncthreads();
    }
    float* c = &C[CM_IDX(row, col, ldc)];
    float4 r = make_float4(alpha * acc.x, alpha * acc.y, alpha * acc.z, alpha * acc.w);
    if (beta != 0.f) {  // beta == 0: C not read
        const float4 old = cm_ld4_rw(c);
        r.x += beta * old.x; r.y += beta * old.y; r.z += beta * old.z; r.w += beta * old.w;
    }
    cm_st4(c, r);
}
