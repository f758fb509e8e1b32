// skinny v3 (fp32): v2_pipelined_f32.cu with B in a shared-memory ring instead of registers.
// What it adds to v2:
//   1. each warp streams its K steps of B and A through a ring of shared-memory stages filled by
//      cp.async: 3 steps in flight while it computes a fourth (2 while it computes a third for
//      17 .. 32 rows), where v2's second register set allowed one. No register holds B in
//      flight, so
//   2. the thread tile reaches 32 rows: a kernel M of 17 .. 32 runs all 8 warps on all its rows
//      (v2 split the warps into two row halves over the same B), with thread tiles of
//      1/2/4/8/16/24/32 rows by 4 columns.
// The rest is v2's (v1's lane maps, warp-order sums: deterministic, no workspace, no atomics).
// Shared memory: 8 warps x (4 stages of B 4 KB + A 16 rows, or 3 stages of B + A 32 rows),
// 204 KB dynamic, so sm_90 (227 KB a block) and up.
//   B N-contiguous: a stage is [32 k][32 columns]; lane (jl, kt) = (lane % 8, lane / 8) reads
//     the float4 of columns 4jl .. 4jl+3 in rows 8kt .. 8kt+7 (each quarter-warp one 128-byte
//     row: no bank conflicts).
//   B K-contiguous: a stage is [32 columns][32 k] with the 16-byte chunks of odd columns
//     swapped by halves (chunk q at q ^ 4), so the two columns a quarter-warp reads (lane
//     (kq, jl) = (lane % 4, lane / 4): columns jl + 8r, K slices 16h + 4kq) fall in other banks.
//   A: [row][k], 36 floats a row (v1's staging, now one buffer per stage).
// Copies into a stage are 16-byte cp.async where the operand is 16-byte aligned (zero-filled past
// N, M and K through the copies' source size), 4-byte ones otherwise.
//
// Layouts, PG_TRANS_A/B, PG_VEC, PG_COL_MAJOR: as v1.
// PG_BATCH=1: blockIdx.z is a matrix of a strided batch (common.cuh). PG_SPLIT=1 (with
// PG_BATCH): blockIdx.z is a K-slice (split_k.cuh's pg_split_slice_k: the launch passes the
// whole K, slices of whole 32-deep steps), the tile stored in the slice's workspace and added
// up by the last slice to arrive: a long K over a small output (512 x 16 x 500000) would
// otherwise stream its operand through 16 of the GPU's SMs.
// Launch: blockDim (256, 1, 1), gridDim (ceil(N/32), ceil(M/32), matrices or slices)
// (grid ["n", "m"]), 208896 bytes
// of dynamic shared memory.

#include <stdint.h>
#include "common.cuh"  // PG_TRANS_A / PG_TRANS_B / PG_VEC defaults, PG_BATCH, PG_SPLIT

#ifndef PG_COL_MAJOR
#define PG_COL_MAJOR 0
#endif

namespace sk3_f32 {

constexpr int kWarps = 8;  // warps splitting K
constexpr int kThreads = 32 * kWarps;
constexpr int kBM = 32;    // threadblock tile: rows of C
constexpr int kBN = 32;    // ... columns of C
constexpr int kStepK = 32;  // K depth of one warp step
constexpr int kBWords = kStepK * kBN;     // one step of B
constexpr int kAStride = kStepK + 4;       // floats per staged A row
constexpr int kRedStride = kBN + 1;       // floats per row of a warp's partial tile
// A warp's ring: kStages stages of [B step][A step of kARows rows]; the configuration is the
// thread tile's (R <= 16: four stages of 16 A rows; R > 16: three stages of 32 A rows).
template <int R> struct Ring {
    static constexpr int kARows = R <= 16 ? 16 : 32;
    static constexpr int kStages = R <= 16 ? 4 : 3;
    static constexpr int kStageWords = kBWords + kARows * kAStride;
    static constexpr int kWords = kStages * kStageWords;
};
constexpr int kWarpWords = Ring<32>::kWords > Ring<16>::kWords ? Ring<32>::kWords : Ring<16>::kWords;
constexpr int kSmemBytes = kWarps * kWarpWords * 4;
static_assert(kSmemBytes == 208896, "variants.json states this rung's dynamic shared memory");
static_assert(kBM * kRedStride <= Ring<1>::kWords, "a warp's partial tile fits in its ring");
static_assert((kBM * kBN) % kThreads == 0, "the final sum gives each thread whole elements of the tile");

constexpr bool kAKContig = PG_COL_MAJOR == PG_TRANS_A;  // A[i*lda + k]
constexpr bool kBNContig = PG_COL_MAJOR == PG_TRANS_B;  // B[k*ldb + j]


// Float index of element k of column j in a K-contiguous B stage (16-byte chunks of odd
// columns swapped by halves).
__device__ __forceinline__ int kcol_at(int j, int k) { return j * kStepK + ((((k >> 2) ^ ((j & 1) << 2)) << 2) | (k & 3)); }

// Start copying K step [k0, k0 + 32) of B's 32-column strip n0 into stage sb.
__device__ __forceinline__ void stage_b(float* sb, const float* __restrict__ B, int ldb, int N, int K, int n0, int k0,
                                        int lane, bool b_vec) {
    if (b_vec) {
#pragma unroll
        for (int q = 0; q < kBWords / 4 / 32; ++q) {  // 8 chunks of 16 bytes a lane
            const int c = lane + 32 * q;
            if constexpr (kBNContig) {  // chunk c: row c / 8, columns 4 (c % 8) .. +3
                const int row = c >> 3, col = (c & 7) * 4;
                const int n = k0 + row < K ? min(max(N - (n0 + col), 0), 4) : 0;
                pg_cp_async<16>(sb + row * kBN + col, n > 0 ? B + (k0 + row) * ldb + n0 + col : B, 4 * n);
            } else {  // chunk c: column c / 8, K slice 4 (c % 8) .. +3
                const int col = c >> 3, kc = (c & 7) * 4;
                const int n = n0 + col < N ? min(max(K - (k0 + kc), 0), 4) : 0;
                pg_cp_async<16>(sb + kcol_at(col, kc), n > 0 ? B + (n0 + col) * ldb + k0 + kc : B, 4 * n);
            }
        }
    } else {
#pragma unroll 4
        for (int q = 0; q < kBWords / 32; ++q) {  // one element a lane, along B's contiguous dimension
            const int e = lane + 32 * q;
            if constexpr (kBNContig) {
                const int row = e >> 5, col = e & 31;
                const bool in = k0 + row < K && n0 + col < N;
                pg_cp_async<4>(sb + row * kBN + col, in ? B + (k0 + row) * ldb + n0 + col : B, in ? 4 : 0);
            } else {
                const int col = e >> 5, k = e & 31;
                const bool in = n0 + col < N && k0 + k < K;
                pg_cp_async<4>(sb + kcol_at(col, k), in ? B + (n0 + col) * ldb + k0 + k : B, in ? 4 : 0);
            }
        }
    }
}

// Start copying rows 0 .. R-1 (rows >= `rows` zero) and K step [k0, k0 + 32) of A (K past its
// end zero) into sa[row][k] (v2's staging).
template <int R>
__device__ __forceinline__ void stage_a(float* sa, const float* __restrict__ A, int lda, int rows, int k0, int K,
                                        int lane, bool a_vec) {
    if constexpr (kAKContig) {
        if (a_vec) {  // 8 chunks of 16 bytes per row
            constexpr int kChunks = R * 8;
#pragma unroll
            for (int c0 = 0; c0 < kChunks; c0 += 32) {
                const int c = c0 + lane;
                if (kChunks % 32 == 0 || c < kChunks) {
                    const int row = c >> 3, kc = (c & 7) * 4;
                    const int n = row < rows ? min(max(K - (k0 + kc), 0), 4) : 0;
                    pg_cp_async<16>(sa + row * kAStride + kc, n > 0 ? A + row * lda + k0 + kc : A, 4 * n);
                }
            }
            return;
        }
#pragma unroll 4
        for (int e0 = 0; e0 < R * kStepK; e0 += 32) {  // one element a lane, along K
            const int row = e0 / kStepK, kk = lane;
            const bool in = row < rows && k0 + kk < K;
            pg_cp_async<4>(sa + row * kAStride + kk, in ? A + row * lda + k0 + kk : A, in ? 4 : 0);
        }
    } else {
#pragma unroll 4
        for (int e0 = 0; e0 < R * kStepK; e0 += 32) {  // one element a lane, along M (coalesced)
            const int e = e0 + lane, row = e % R, kk = e / R;
            const bool in = row < rows && k0 + kk < K;
            pg_cp_async<4>(sa + row * kAStride + kk, in ? A + row + (k0 + kk) * lda : A, in ? 4 : 0);
        }
    }
}

// acc += A step (sa) x B step (sb), thread tile R x 4 (v1's lane maps, B read from the stage).
template <int R>
__device__ __forceinline__ void ffma_step(float (&acc)[R][4], const float* sb, const float* sa, int lane) {
    if constexpr (kBNContig) {
        const int jl = lane & 7, kt = lane >> 3;
        float4 b[8];
#pragma unroll
        for (int r = 0; r < 8; ++r) b[r] = *reinterpret_cast<const float4*>(sb + (8 * kt + r) * kBN + 4 * jl);
#pragma unroll
        for (int i = 0; i < R; ++i) {
            const float4 a0 = *reinterpret_cast<const float4*>(sa + i * kAStride + 8 * kt);
            const float4 a1 = *reinterpret_cast<const float4*>(sa + i * kAStride + 8 * kt + 4);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
#pragma unroll
            for (int r = 0; r < 8; ++r) {
                acc[i][0] = fmaf(a[r], b[r].x, acc[i][0]);
                acc[i][1] = fmaf(a[r], b[r].y, acc[i][1]);
                acc[i][2] = fmaf(a[r], b[r].z, acc[i][2]);
                acc[i][3] = fmaf(a[r], b[r].w, acc[i][3]);
            }
        }
    } else {
        const int kq = lane & 3, jl = lane >> 2;
        float4 b[8];
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int r = 0; r < 4; ++r)
                b[4 * h + r] = *reinterpret_cast<const float4*>(sb + kcol_at(jl + 8 * r, 16 * h + 4 * kq));
#pragma unroll
        for (int i = 0; i < R; ++i) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const float4 a = *reinterpret_cast<const float4*>(sa + i * kAStride + 16 * h + 4 * kq);
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    const float4 v = b[4 * h + r];
                    float d = acc[i][r];
                    d = fmaf(a.x, v.x, d);
                    d = fmaf(a.y, v.y, d);
                    d = fmaf(a.z, v.z, d);
                    d = fmaf(a.w, v.w, d);
                    acc[i][r] = d;
                }
            }
        }
    }
}

// One warp's share of the threadblock tile with thread tiles of R rows (rows <= R), then its
// partial tile into shared memory red[i * kRedStride + j] (aliasing its ring).
template <int R>
__device__ __forceinline__ void warp_tiles(const float* __restrict__ A, int lda, const float* __restrict__ B, int ldb,
                                           int N, int K, int rows, int n0, float* smem, int warp, int lane, bool a_vec,
                                           bool b_vec) {
    using Cfg = Ring<R>;
    float* ring = smem + warp * kWarpWords;
    float acc[R][4];
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][e] = 0.f;

    // Step t of this warp is K step warp + t * kWarps, in stage t % kStages. The copies of the
    // first kStages - 1 steps start before any FFMA; each round starts the step kStages - 1
    // ahead (into the stage the last round finished with), waits for its own and computes it.
    const int steps = (K + kStepK - 1) / kStepK;
    const int mine = steps > warp ? (steps - warp + kWarps - 1) / kWarps : 0;
    auto issue = [&](int t) {
        if (t < mine) {
            float* st = ring + (t % Cfg::kStages) * Cfg::kStageWords;
            const int k0 = (warp + t * kWarps) * kStepK;
            stage_b(st, B, ldb, N, K, n0, k0, lane, b_vec);
            stage_a<R>(st + kBWords, A, lda, rows, k0, K, lane, a_vec);
        }
        pg_cp_async_commit();  // an empty group past the end keeps the count the wait below relies on
    };
#pragma unroll
    for (int t = 0; t < Cfg::kStages - 1; ++t) issue(t);
    for (int t = 0; t < mine; ++t) {
        issue(t + Cfg::kStages - 1);
        pg_cp_async_wait<Cfg::kStages - 1>();  // step t's group has landed
        __syncwarp();
        const float* st = ring + (t % Cfg::kStages) * Cfg::kStageWords;
        ffma_step<R>(acc, st, st + kBWords, lane);
        __syncwarp();  // every lane is done reading stage t % kStages before it is refilled
    }
    pg_cp_async_wait<0>();

    // Sum the lanes that hold other K slices of the same elements (fixed butterfly order).
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            float v = acc[i][e];
            if (kBNContig) {
                v += __shfl_xor_sync(0xffffffffu, v, 8);
                v += __shfl_xor_sync(0xffffffffu, v, 16);
            } else {
                v += __shfl_xor_sync(0xffffffffu, v, 1);
                v += __shfl_xor_sync(0xffffffffu, v, 2);
            }
            acc[i][e] = v;
        }

    __syncwarp();  // the ring is the warp's own: its lanes are done with it
    float* red = ring;
    const int jl = kBNContig ? lane & 7 : lane >> 2;
    const int part = kBNContig ? lane >> 3 : lane & 3;  // the lanes of one element split its R rows
#pragma unroll
    for (int i = 0; i < R; ++i) {
        if (i % 4 != part) continue;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int j = kBNContig ? 4 * jl + e : jl + 8 * e;
            red[i * kRedStride + j] = acc[i][e];
        }
    }
}

}  // namespace sk3_f32

extern "C" __global__ void __launch_bounds__(sk3_f32::kThreads, 1)
skinny_v3_f32(int M, int N, int K, float alpha, const float* __restrict__ A, int lda, const float* __restrict__ B,
              int ldb, float beta, float* __restrict__ C, int ldc PG_BATCH_PARAMS PG_SPLIT_PARAMS)
{
    using namespace sk3_f32;
    extern __shared__ __align__(16) float smem[];
    PG_BATCH_SEEK(A, B, C);  // blockIdx.z: a matrix of the batch, or (PG_SPLIT) a K-slice
#if PG_SPLIT
    static_assert(PG_BATCH, "PG_SPLIT: the K-slices are a batch");
    K = pg_split_slice_k(K, kStepK);
#endif
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int n0 = blockIdx.x * kBN, m0 = blockIdx.y * kBM;
    const int rows = min(kBM, M - m0);
    const float* a = A + (kAKContig ? (long long)m0 * lda : m0);
    // PG_VEC=0 (some operand unaligned): each of A and B still takes 16-byte copies when it is
    // aligned itself (e.g. the matrix of a GEMV whose vector has an odd length).
    const bool a_vec = PG_VEC || ((reinterpret_cast<uintptr_t>(a) & 15) == 0 && lda % 4 == 0);
    const bool b_vec = PG_VEC || ((reinterpret_cast<uintptr_t>(B) & 15) == 0 && ldb % 4 == 0);
    if (rows > 24)
        warp_tiles<32>(a, lda, B, ldb, N, K, rows, n0, smem, warp, lane, a_vec, b_vec);
    else if (rows > 16)
        warp_tiles<24>(a, lda, B, ldb, N, K, rows, n0, smem, warp, lane, a_vec, b_vec);
    else if (rows > 8)
        warp_tiles<16>(a, lda, B, ldb, N, K, rows, n0, smem, warp, lane, a_vec, b_vec);
    else if (rows > 4)
        warp_tiles<8>(a, lda, B, ldb, N, K, rows, n0, smem, warp, lane, a_vec, b_vec);
    else if (rows > 2)
        warp_tiles<4>(a, lda, B, ldb, N, K, rows, n0, smem, warp, lane, a_vec, b_vec);
    else if (rows > 1)
        warp_tiles<2>(a, lda, B, ldb, N, K, rows, n0, smem, warp, lane, a_vec, b_vec);
    else
        warp_tiles<1>(a, lda, B, ldb, N, K, rows, n0, smem, warp, lane, a_vec, b_vec);
    __syncthreads();

    // Sum the partial tiles in warp order (the same bits every run) and store: consecutive
    // threads along C's contiguous dimension.
#pragma unroll
    for (int e = threadIdx.x; e < kBM * kBN; e += kThreads) {
        const int i = PG_COL_MAJOR ? e % kBM : e / kBN;
        const int j = PG_COL_MAJOR ? e / kBM : e % kBN;
        if (i >= rows || n0 + j >= N) continue;
        float sum = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) sum += smem[w * kWarpWords + i * kRedStride + j];
        float* p = PG_COL_MAJOR ? C + (m0 + i) + (n0 + j) * ldc : C + (m0 + i) * ldc + (n0 + j);
        float v = alpha * sum;
        if (beta != 0.f) v = fmaf(beta, *p, v);
        *p = v;
    }
#if PG_SPLIT
    // this slice's tile is in the workspace: the last slice to arrive adds them all into D
    pg_split_fixup(0, kThreads, threadIdx.x, pg_split_count + blockIdx.y * gridDim.x + blockIdx.x, gridDim.z,
                   C - blockIdx.z * pg_batch_c, PG_COL_MAJOR ? 1 : ldc, PG_COL_MAJOR ? ldc : 1, pg_batch_c, m0, n0,
                   rows, min(kBN, N - n0), pg_split_d, pg_split_d_rs, pg_split_d_cs, pg_split_alpha, pg_split_beta,
                   pg_split_d_half);
#endif
}
