// v07_micro4x4: over v06, a 4 x 4 thread tile and a larger threadblock tile (64 x 64,
// k-tile 16). Per k a thread reads one float4 of A and one float4 of B from shared memory
// and performs 16 FMAs: 4x the register reuse of the 4 x 1 tile. The B tile is read from
// global memory as float4 along k (its contiguous dimension) and scattered into a
// K-major shared layout sB[k][j], so both fragments are contiguous float4 reads.
// Realizes seed 000/001 "Version 7".
// Geometry: threadblock tile 64 x 64 x 16, 256 threads (16 x 16), thread tile 4 x 4.
// Padded rung: M, N multiples of 64, K of 16; 16-byte aligned pointers, leading
// dimensions multiples of 4 (align 4).
#include "common.cuh"

namespace cm_v07 {
constexpr int kBM = 64;   // threadblock tile M
constexpr int kBN = 64;   // threadblock tile N
constexpr int kBK = 16;   // threadblock tile K
constexpr int kThreadM = 4;   // thread tile M
constexpr int kThreadN = 4;   // thread tile N
constexpr int kThreads = (kBM / kThreadM) * (kBN / kThreadN);
static_assert(kBM * kBK == 4 * kThreads && kBN * kBK == 4 * kThreads,
              "one float4 of A and one of B per thread and k-tile");
}

extern "C" __global__ void __launch_bounds__(cm_v07::kThreads)
sgemm_cm_v07_micro4x4(int M, int N, int K, float alpha,
                      const float* __restrict__ A, int lda,
                      const float* __restrict__ B, int ldb,
                      float beta, float* __restrict__ C, int ldc) {
    using namespace cm_v07;
    __shared__ __align__(16) float sA[kBK][kBM];  // sA[k][i]
    __shared__ __align__(16) float sB[kBK][kBN];  // sB[k][j]
    const int tid = threadIdx.x;
    // Global -> shared copy: A as float4 along i, B as float4 along k.
    const int aRow = (tid % (kBM / 4)) * 4, aK = tid / (kBM / 4);
    const int bK = (tid % (kBK / 4)) * 4, bCol = tid / (kBK / 4);
    // Thread tile origin inside the threadblock tile.
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
            const float4 a4 = *reinterpret_cast<const float4*>(&sA[k][cRow]);
            const float4 b4 = *reinterpret_cast<const float4*>(&sB[k][cCol]);
            const float a[4] = {a4.x, a4.y, a4.z, a4.w};
            const float bv[4] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
            for (int j = 0; j < kThreadN; ++j)
#pragma unroll
                for (int i = 0; i < kThreadM; ++i) acc[j][i] += a[i] * bv[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int j = 0; j < kThreadN; ++j) {
        float* c = &C[CM_IDX(cRow, cCol + j, ldc)];
        float4 r = make_float4(alpha * acc[j][0], alpha * acc[j][1], alpha * acc[j][2],
                               alpha * acc[j][3]);
        if (beta != 0.f) {  // beta == 0: C not read
            const float4 old = cm_ld4_rw(c);
            r.x += beta * old.x; r.y += beta * old.y; r.z += beta * old.z; r.w += beta * old.w;
        }
        cm_st4(c, r);
    }
}
