// v08_micro8x8: over v07, an 8 x 8 thread tile inside a 128 x 128 threadblock tile
// (k-tile 8). Per k a thread reads 2 float4 of A and 2 of B from shared memory and
// performs 64 FMAs, so shared-memory traffic per FMA halves again. Threads tile the
// threadblock tile plainly (16 x 16 threads, each owning 8 contiguous rows and columns);
// v09 reorganizes that by warps. Realizes seed 000/001 "Version 8".
// Geometry: threadblock tile 128 x 128 x 8, 256 threads, thread tile 8 x 8.
// Padded rung: M, N multiples of 128, K of 8; 16-byte aligned pointers, leading
// dimensions multiples of 4 (align 4).
#include "common.cuh"

namespace cm_v08 {
constexpr int kBM = 128;  // threadblock tile M
constexpr int kBN = 128;  // threadblock tile N
constexpr int kBK = 8;    // threadblock tile K
constexpr int kThreadM = 8;   // thread tile M
constexpr int kThreadN = 8;   // thread tile N
constexpr int kThreads = (kBM / kThreadM) * (kBN / kThreadN);
static_assert(kBM * kBK == 4 * kThreads && kBN * kBK == 4 * kThreads,
              "one float4 of A and one of B per thread and k-tile");
}

extern "C" __global__ void __launch_bounds__(cm_v08::kThreads)
sgemm_cm_v08_micro8x8(int M, int N, int K, float alpha,
                      const float* __restrict__ A, int lda,
                      const float* __restrict__ B, int ldb,
                      float beta, float* __restrict__ C, int ldc) {
    using namespace cm_v08;
    __shared__ __align__(16) float sA[kBK][kBM];  // sA[k][i]
    __shared__ __align__(16) float sB[kBK][kBN];  // sB[k][j]
    const int tid = threadIdx.x;
    const int aRow = (tid % (kBM / 4)) * 4, aK = tid / (kBM / 4);
    const int bK = (tid % (kBK / 4)) * 4, bCol = tid / (kBK / 4);
    const int cRow = (tid % (kBM / kThreadM)) * kThreadM;
    const int cCol = (tid / (kBM / kThreadM)) * kThreadN;
    A += blockIdx.x * kBM;
    B += CM_IDX(0, blockIdx.y * kBN, ldb);
    C += CM_IDX(blockIdx.x * kBM, blockIdx.y * kBN, ldc);

    float acc[kThreadN][kThreadM] = {};  // acc[j][i]
    for (int k0 = 0; k0 < K; k0 += kBK) {
        cm_st4(&sA[aK][aRow], cm_ld4(&A[CM_IDX(aRow, aK, lda)]));
        const float4 b = cm_ld4(&B[CM_IDX(bK, bCol, ldb)]);
        sB[bK + 0][bCol] = b.x;
        sB[bK + 1][bCol] = b.y;
        sB[bK + 2][bCol] = b.z;
        sB[bK + 3][bCol] = b.w;
        A += kBK * lda;
        B += kBK;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kBK; ++k) {
            float a[kThreadM], bv[kThreadN];
#pragma unroll
            for (int v = 0; v < kThreadM; v += 4)
                *reinterpret_cast<float4*>(&a[v]) = *reinterpret_cast<const float4*>(&sA[k][cRow + v]);
#pragma unroll
            for (int v = 0; v < kThreadN; v += 4)
                *reinterpret_cast<float4*>(&bv[v]) = *reinterpret_cast<const float4*>(&sB[k][cCol + v]);
#pragma unroll
            for (int j = 0; j < kThreadN; ++j)
#pragma unroll
                for (int i = 0; i < kThreadM; ++i) acc[j][i] += a[i] * bv[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int j = 0; j < kThreadN; ++j)
#pragma unroll
        for (int v = 0; v < kThreadM; v += 4) {
            float* c = &C[CM_IDX(cRow + v, cCol + j, ldc)];
            float4 r = make_float4(alpha * acc[j][v], alpha * acc[j][v + 1],
                                   alpha * acc[j][v + 2], alpha * acc[j][v + 3]);
            if (beta != 0.f) {  // beta == 0: C not read
                const float4 old = cm_ld4_rw(c);
                r.x += beta * old.x; r.y += beta * old.y;
                r.z += beta * old.z; r.w += beta * old.w;
            }
            cm_st4(c, r);
        }
}
