// v10_register_prefetch: adds global -> register prefetching over v09. The loads of
// k-tile kt+1 are issued before the math of k-tile kt and only written to shared memory
// after it, so their global-memory latency hides behind 8 x 64 FMAs per thread instead of
// stalling the threadblock. Realizes seed 000/001 "Version 10" (pref_Av/pref_Bv). The
// seed also ping-pongs the per-k fragments (Av1[2]...); here the fully unrolled k loop
// lets the compiler hoist those shared-memory reads itself, which keeps the thread at
// <= 128 registers (2 threadblocks per SM) without spills.
//
// Geometry as v09: threadblock tile 128 x 128 x 8, 256 threads = 8 warps as 2 (M) x 4 (N),
// warp tile 64 x 32, lanes 8 (M) x 4 (N), thread tile 8 x 8; one shared-memory stage.
// Predicated (any M, N, K >= 1); honours PG_TRANS_A, PG_TRANS_B and PG_VEC.
#include "common.cuh"

namespace cm_v10 {

// ---- tile configuration ------------------------------------------------------------
constexpr int kBM = 128;     // threadblock tile M
constexpr int kBN = 128;     // threadblock tile N
constexpr int kBK = 8;       // threadblock tile K (one k-tile)
constexpr int kWM = 64;       // warp tile M
constexpr int kWN = 32;       // warp tile N
constexpr int kThreadM = 8;      // thread tile M
constexpr int kThreadN = 8;      // thread tile N
constexpr int kMinBlocksPerSM = 2;

// ---- derived -------------------------------------------------------------------------
constexpr int kWarpsM = kBM / kWM;
constexpr int kWarpsN = kBN / kWN;
constexpr int kThreads = 32 * kWarpsM * kWarpsN;
constexpr int kLanesM = kWM / kThreadM;  // lanes along M inside a warp tile
constexpr int kLanesN = kWN / kThreadN;
constexpr int kVecM = kThreadM / 4;         // float4 pieces of a thread tile along M
constexpr int kVecN = kThreadN / 4;
static_assert(kLanesM * kLanesN == 32, "a warp tile must hold exactly 32 thread tiles");
static_assert(kThreadM % 4 == 0 && kThreadN % 4 == 0, "thread tile is made of 4x4 blocks");

using LoaderA = CmTileLoader<kBM, kBK, kThreads, PG_TRANS_A != 0, PG_VEC != 0>;
using LoaderB = CmTileLoader<kBN, kBK, kThreads, PG_TRANS_B == 0, PG_VEC != 0>;

// Fragments of one k: kThreadM values of A and kThreadN of B, as float4 pieces.
__device__ __forceinline__ void load_fragments(const float* sA, const float* sB, int k,
                                               int aOff, int bOff, float4 (&a)[kVecM],
                                               float4 (&b)[kVecN]) {
#pragma unroll
    for (int v = 0; v < kVecM; ++v)
        a[v] = *reinterpret_cast<const float4*>(sA + k * LoaderA::kSmemStride + aOff + v * kLanesM * 4);
#pragma unroll
    for (int v = 0; v < kVecN; ++v)
        b[v] = *reinterpret_cast<const float4*>(sB + k * LoaderB::kSmemStride + bOff + v * kLanesN * 4);
}

__device__ __forceinline__ void fma_thread_tile(float (&acc)[kThreadM][kThreadN],
                                                const float4 (&a)[kVecM],
                                                const float4 (&b)[kVecN]) {
    const float* av = reinterpret_cast<const float*>(a);
    const float* bv = reinterpret_cast<const float*>(b);
#pragma unroll
    for (int j = 0; j < kThreadN; ++j)
#pragma unroll
        for (int i = 0; i < kThreadM; ++i) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
}

}  // namespace cm_v10

extern "C" __global__ void __launch_bounds__(cm_v10::kThreads, cm_v10::kMinBlocksPerSM)
sgemm_cm_v10_register_prefetch(int M, int N, int K, float alpha,
                                const float* __restrict__ A, int lda,
                                const float* __restrict__ B, int ldb,
                                float beta, float* __restrict__ C, int ldc) {
    using namespace cm_v10;
    __shared__ __align__(16) float smem[LoaderA::kSmemFloats + LoaderB::kSmemFloats];
    float* sA = smem;
    float* sB = smem + LoaderA::kSmemFloats;

    const int tid = threadIdx.x;
    const int m0 = blockIdx.x * kBM;  // threadblock tile origin in C
    const int n0 = blockIdx.y * kBN;

    // Warp tile and thread tile coordinates inside the threadblock tile.
    const int warp = tid / 32, lane = tid % 32;
    const int warpM = warp % kWarpsM, warpN = warp / kWarpsM;
    const int laneM = lane % kLanesM, laneN = lane / kLanesM;
    const int aOff = warpM * kWM + laneM * 4;  // first M of this thread's fragment
    const int bOff = warpN * kWN + laneN * 4;  // first N of this thread's fragment

    LoaderA loadA(A, lda, m0, M, tid);
    LoaderB loadB(B, ldb, n0, N, tid);

    float acc[kThreadM][kThreadN];
#pragma unroll
    for (int i = 0; i < kThreadM; ++i)
#pragma unroll
        for (int j = 0; j < kThreadN; ++j) acc[i][j] = 0.f;

    const int kTiles = CEIL_DIV(K, kBK);

    // Prologue: k-tile 0 into shared memory.
    loadA.load(K);
    loadB.load(K);
    loadA.store(sA);
    loadB.store(sB);
    __syncthreads();

    float4 fragA[kVecM], fragB[kVecN];  // fragments of one k
    for (int kt = 0; kt < kTiles; ++kt) {
        const bool hasNext = kt + 1 < kTiles;
        if (hasNext) {  // global -> register prefetch of k-tile kt+1, in flight during the math
            loadA.advance();
            loadB.advance();
            const int kLeft = K - (kt + 1) * kBK;
            loadA.load(kLeft);
            loadB.load(kLeft);
        }
#pragma unroll
        for (int k = 0; k < kBK; ++k) {
            load_fragments(sA, sB, k, aOff, bOff, fragA, fragB);
            fma_thread_tile(acc, fragA, fragB);
        }
        if (hasNext) {  // one stage only: wait for every warp before overwriting it
            __syncthreads();
            loadA.store(sA);
            loadB.store(sB);
            __syncthreads();
        }
    }

    // Epilogue: C = alpha*acc + beta*C, guarded; beta == 0 never reads C.
#pragma unroll
    for (int vn = 0; vn < kVecN; ++vn)
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
            const int j = vn * 4 + jj;
            const int n = n0 + bOff + vn * kLanesN * 4 + jj;
            if (n >= N) continue;
#pragma unroll
            for (int vm = 0; vm < kVecM; ++vm) {
                const int m = m0 + aOff + vm * kLanesM * 4;
                const int left = M - m;
                if (left <= 0) continue;
                float* p = C + CM_IDX(m, n, ldc);
                float r[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) r[e] = alpha * acc[vm * 4 + e][j];
                if (PG_VEC && left >= 4) {
                    if (beta != 0.f) {
                        const float4 c = cm_ld4_rw(p);
                        r[0] += beta * c.x; r[1] += beta * c.y;
                        r[2] += beta * c.z; r[3] += beta * c.w;
                    }
                    cm_st4(p, make_float4(r[0], r[1], r[2], r[3]));
                } else {
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        if (e < left) p[e] = (beta != 0.f) ? r[e] + beta * p[e] : r[e];
                }
            }
        }
}
