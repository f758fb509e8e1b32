// v01_naive: the starting point. One thread per element of C: a 32 x 32 threadblock tile
// of 32 x 32 threads, each walking the whole K dimension straight from global memory
// (every operand value is re-read from L2/DRAM by every thread that needs it). Threads
// with consecutive threadIdx.x own consecutive rows of a column, so the A reads (and the
// C write) of a warp are coalesced; the B reads are broadcasts of one value per k.
// Realizes seed 000/001 "Version 1", predicated (guards cost nothing here): any
// M, N, K >= 1, PG_TRANS_A / PG_TRANS_B honoured, scalar accesses only.
#include "common.cuh"

namespace cm_v01 {
constexpr int kTile = 32;  // threadblock tile: kTile x kTile elements of C, one per thread
}

// Element (i, k) of op(A) and (k, j) of op(B) in the column-major ladder's layout.
#if PG_TRANS_A
#define CM01_A(i, k) A[CM_IDX(k, i, lda)]
#else
#define CM01_A(i, k) A[CM_IDX(i, k, lda)]
#endif
#if PG_TRANS_B
#define CM01_B(k, j) B[CM_IDX(j, k, ldb)]
#else
#define CM01_B(k, j) B[CM_IDX(k, j, ldb)]
#endif

extern "C" __global__ void __launch_bounds__(cm_v01::kTile * cm_v01::kTile)
sgemm_cm_v01_naive(int M, int N, int K, float alpha,
                   const float* __restrict__ A, int lda,
                   const float* __restrict__ B, int ldb,
                   float beta, float* __restrict__ C, int ldc) {
    using namespace cm_v01;
    const int i = blockIdx.x * kTile + threadIdx.x;  // row of C
    const int j = blockIdx.y * kTile + threadIdx.y;  // column of C
    if (i >= M || j >= N) return;

    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += CM01_A(i, k) * CM01_B(k, j);

    float* c = &C[CM_IDX(i, j, ldc)];
    *c = (beta != 0.f) ? alpha * acc + beta * *c : alpha * acc;  // beta == 0: C not read
}
