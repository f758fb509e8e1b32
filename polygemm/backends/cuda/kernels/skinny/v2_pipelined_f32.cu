// skinny v2 (fp32): v1_split_k_warps_f32.cu with its loads kept in flight under the FFMAs.
// What it adds to v1:
//   1. a software pipeline per warp: the next step's B goes into a second register set, and
//      its A into a second shared-memory buffer by cp.async, before this step's FFMAs, so each
//      warp has two steps of B (8 KB) in flight while it computes (v1 loaded, waited, computed);
//   2. a 32-row threadblock tile: a kernel M of 17 .. 32 reads B from HBM once (v1's 16-row
//      tile ran a second threadblock row over all of B). Up to 16 rows, all 8 warps split K;
//      past 16, warps 0-3 take rows 0-15 and warps 4-7 the rest, each half splitting K four
//      ways over the same B (its second read hits L1/L2: the halves walk K together);
//   3. 8 warps (256 threads), so both B register sets beside a 16-row thread tile's 64
//      accumulators fit the register file.
// Everything else is v1's: a threadblock owns a 32-column strip of C and the whole K range, its
// warps split K into 32-deep steps, each lane owns the same B elements as in v1 (see v1 for the
// two lane maps: B N-contiguous and B K-contiguous), FFMA thread tiles of 1/2/4/8/16 rows by 4
// columns, and the warps' partial tiles are summed in shared memory in warp order
// (deterministic, no workspace, no atomics).
//
// Layouts, PG_TRANS_A/B, PG_VEC, PG_COL_MAJOR: as v1. A is staged into [row][k] whatever its
// layout: 16-byte cp.async of K-contiguous rows when aligned, 4-byte cp.async of single
// elements otherwise (zero-filled past M and K through the copies' source size).
// Launch: blockDim (256, 1, 1), gridDim (ceil(N/32), ceil(M/32)) (grid ["n", "m"]), static
// shared memory only.

#include <stdint.h>
#include "common.cuh"  // PG_TRANS_A / PG_TRANS_B / PG_VEC defaults

#ifndef PG_COL_MAJOR
#define PG_COL_MAJOR 0
#endif

namespace sk2_f32 {

constexpr int kWarps = 8;  // warps splitting K (4 per row half past 16 rows)
constexpr int kThreads = 32 * kWarps;
constexpr int kBM = 32;    // threadblock tile: rows of C
constexpr int kHalfM = 16;  // ... rows of one warp's thread tiles
constexpr int kBN = 32;    // ... columns of C
constexpr int kStepK = 32;  // K depth of one warp step
constexpr int kAStride = kStepK + 4;  // floats per staged A row (16-byte rows, 4-bank shift per row)
constexpr int kRedStride = kBN + 1;  // floats per row of a warp's partial tile
constexpr int kAWords = kHalfM * kAStride;   // one staging buffer
constexpr int kRedWords = kHalfM * kRedStride;
constexpr int kWarpWords = 2 * kAWords > kRedWords ? 2 * kAWords : kRedWords;  // two buffers; red aliases them
static_assert((kBM * kBN) % kThreads == 0, "the final sum gives each thread whole elements of the tile");

constexpr bool kAKContig = PG_COL_MAJOR == PG_TRANS_A;  // A[i*lda + k]
constexpr bool kBNContig = PG_COL_MAJOR == PG_TRANS_B;  // B[k*ldb + j]

__device__ __forceinline__ float4 load4(const float* p, int n, bool vec) {
    if (vec && n >= 4) return __ldg(reinterpret_cast<const float4*>(p));
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (n > 0) v.x = __ldg(p);
    if (n > 1) v.y = __ldg(p + 1);
    if (n > 2) v.z = __ldg(p + 2);
    if (n > 3) v.w = __ldg(p + 3);
    return v;
}

__device__ __forceinline__ float4 ldg_b128(const float* p) { return __ldg(reinterpret_cast<const float4*>(p)); }


// Start copying rows 0 .. R-1 (rows >= `rows` zero) and K step [k0, k0 + 32) of A (K past its
// end zero) into the staging buffer sa[row][k].
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
#pragma unroll
        for (int e0 = 0; e0 < R * kStepK; e0 += 32) {  // one element a lane, along K
            const int row = e0 / kStepK, kk = lane;
            const bool in = row < rows && k0 + kk < K;
            pg_cp_async<4>(sa + row * kAStride + kk, in ? A + row * lda + k0 + kk : A, in ? 4 : 0);
        }
    } else {
#pragma unroll
        for (int e0 = 0; e0 < R * kStepK; e0 += 32) {  // one element a lane, along M (coalesced)
            const int e = e0 + lane, row = e % R, kk = e / R;
            const bool in = row < rows && k0 + kk < K;
            pg_cp_async<4>(sa + row * kAStride + kk, in ? A + row + (k0 + kk) * lda : A, in ? 4 : 0);
        }
    }
}

// This lane's B of step k0 (v1's lane maps): N-contiguous, b[r] = columns n0 + 4jl .. +3 of
// row k0 + 8kt + r; K-contiguous, b[4h + r] = K slice k0 + 16h + 4kq .. +3 of column n0 + jl + 8r.
__device__ __forceinline__ void load_b(float4 (&b)[8], const float* __restrict__ B, int ldb, int N, int K, int n0,
                                       int k0, int lane, bool b_vec) {
    const bool fast = b_vec && n0 + kBN <= N && k0 + kStepK <= K;
    if constexpr (kBNContig) {
        const int jl = lane & 7, kt = lane >> 3;
        const int jc = n0 + 4 * jl;
        const int ncols = N - jc;
#pragma unroll
        for (int r = 0; r < 8; ++r) {
            const int k = k0 + 8 * kt + r;
            if (fast) {
                b[r] = ldg_b128(B + k * ldb + jc);
            } else {
                const int n = k < K ? ncols : 0;
                b[r] = load4(B + (n > 0 ? k * ldb + jc : 0), n, b_vec);
            }
        }
    } else {
        const int jl = lane >> 2, kq = lane & 3;
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int j = n0 + jl + 8 * r;
            const float* col = B + (j < N ? j : N - 1) * ldb;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int kb = k0 + 16 * h + 4 * kq;
                if (fast) {
                    b[4 * h + r] = ldg_b128(col + kb);
                } else {
                    const int n = j < N ? K - kb : 0;
                    b[4 * h + r] = load4(col + (n > 0 ? kb : 0), n, b_vec);
                }
            }
        }
    }
}

// acc += A step (staged in sa) x B step (this lane's b), thread tile R x 4.
template <int R>
__device__ __forceinline__ void ffma_step(float (&acc)[R][4], const float4 (&b)[8], const float* sa, int lane) {
    if constexpr (kBNContig) {
        const int kt = lane >> 3;
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
        const int kq = lane & 3;
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
// partial tile into shared memory red[i * kRedStride + j].
template <int R>
__device__ __forceinline__ void warp_tiles(const float* __restrict__ A, int lda, const float* __restrict__ B, int ldb,
                                           int N, int K, int rows, int n0, float* smem, int warp, int gwarp, int gwarps,
                                           int lane, bool a_vec, bool b_vec) {
    float* sa = smem + warp * kWarpWords;  // two staging buffers: sa and sa + kAWords
    float acc[R][4];
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][e] = 0.f;

    // Two steps in flight: while the FFMAs of step s run on (bx, buffer 0), the loads of step
    // s + gwarps land in (by, buffer 1). The loop is unrolled by two so that the register
    // sets swap roles without copies.
    const int steps = (K + kStepK - 1) / kStepK;
    float4 bx[8], by[8];
    int s = gwarp;  // this warp's steps: gwarp, gwarp + gwarps, ... (gwarps warps share the rows)
    if (s < steps) {
        load_b(bx, B, ldb, N, K, n0, s * kStepK, lane, b_vec);
        stage_a<R>(sa, A, lda, rows, s * kStepK, K, lane, a_vec);
    }
    pg_cp_async_commit();
    while (s < steps) {
        int next = s + gwarps;
        if (next < steps) {
            load_b(by, B, ldb, N, K, n0, next * kStepK, lane, b_vec);
            stage_a<R>(sa + kAWords, A, lda, rows, next * kStepK, K, lane, a_vec);
        }
        pg_cp_async_commit();
        pg_cp_async_wait<1>();  // this step's A has landed (the next step's may still be in flight)
        __syncwarp();
        ffma_step<R>(acc, bx, sa, lane);
        __syncwarp();  // every lane is done reading buffer 0 before it is refilled
        s = next;
        if (s >= steps) break;
        next = s + gwarps;
        if (next < steps) {
            load_b(bx, B, ldb, N, K, n0, next * kStepK, lane, b_vec);
            stage_a<R>(sa, A, lda, rows, next * kStepK, K, lane, a_vec);
        }
        pg_cp_async_commit();
        pg_cp_async_wait<1>();
        __syncwarp();
        ffma_step<R>(acc, by, sa + kAWords, lane);
        __syncwarp();
        s = next;
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

    // Every warp is done with its staging buffers (red aliases them). Past 16 rows the two
    // halves may run different thread tiles, i.e. reach this from different instructions: the
    // non-.aligned barrier allows that (__syncthreads() is bar.sync, which does not).
    asm volatile("barrier.sync 0;\n" ::: "memory");
    float* red = smem + warp * kWarpWords;
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

}  // namespace sk2_f32

extern "C" __global__ void __launch_bounds__(sk2_f32::kThreads, 1)
skinny_v2_f32(int M, int N, int K, float alpha, const float* __restrict__ A, int lda, const float* __restrict__ B,
              int ldb, float beta, float* __restrict__ C, int ldc)
{
    using namespace sk2_f32;
    __shared__ __align__(16) float smem[kWarps * kWarpWords];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int n0 = blockIdx.x * kBN, m0 = blockIdx.y * kBM;
    const int rows = min(kBM, M - m0);
    const float* a = A + (kAKContig ? (long long)m0 * lda : m0);
    // PG_VEC=0 (some operand unaligned): each of A and B still takes 16-byte accesses when it
    // is aligned itself (e.g. the matrix of a GEMV whose vector has an odd length).
    const bool a_vec = PG_VEC || ((reinterpret_cast<uintptr_t>(a) & 15) == 0 && lda % 4 == 0);
    const bool b_vec = PG_VEC || ((reinterpret_cast<uintptr_t>(B) & 15) == 0 && ldb % 4 == 0);
    // Up to 16 rows: all warps on them. Past 16: warps 0-3 on rows 0-15, warps 4-7 on the rest.
    const bool halves = rows > kHalfM;
    const int half = halves ? warp / (kWarps / 2) : 0;
    const int grows = halves ? (half ? rows - kHalfM : kHalfM) : rows;
    const int gwarp = halves ? warp % (kWarps / 2) : warp, gwarps = halves ? kWarps / 2 : kWarps;
    const float* ah = a + (half ? (kAKContig ? (long long)kHalfM * lda : kHalfM) : 0);
    if (grows > 8)
        warp_tiles<16>(ah, lda, B, ldb, N, K, grows, n0, smem, warp, gwarp, gwarps, lane, a_vec, b_vec);
    else if (grows > 4)
        warp_tiles<8>(ah, lda, B, ldb, N, K, grows, n0, smem, warp, gwarp, gwarps, lane, a_vec, b_vec);
    else if (grows > 2)
        warp_tiles<4>(ah, lda, B, ldb, N, K, grows, n0, smem, warp, gwarp, gwarps, lane, a_vec, b_vec);
    else if (grows > 1)
        warp_tiles<2>(ah, lda, B, ldb, N, K, grows, n0, smem, warp, gwarp, gwarps, lane, a_vec, b_vec);
    else
        warp_tiles<1>(ah, lda, B, ldb, N, K, grows, n0, smem, warp, gwarp, gwarps, lane, a_vec, b_vec);
    __syncthreads();

    // Sum the partial tiles in warp order (the same bits every run) and store: consecutive
    // threads along C's contiguous dimension. Row i's partial tiles are those of its half.
#pragma unroll
    for (int e = threadIdx.x; e < kBM * kBN; e += kThreads) {
        const int i = PG_COL_MAJOR ? e % kBM : e / kBN;
        const int j = PG_COL_MAJOR ? e / kBM : e % kBN;
        if (i >= rows || n0 + j >= N) continue;
        const int h = halves && i >= kHalfM;
        const float* red = smem + (h ? kWarps / 2 : 0) * kWarpWords + (i - h * kHalfM) * kRedStride + j;
        float sum = 0.f;
        if (halves) {
#pragma unroll
            for (int w = 0; w < kWarps / 2; ++w) sum += red[w * kWarpWords];
        } else {
#pragma unroll
            for (int w = 0; w < kWarps; ++w) sum += red[w * kWarpWords];
        }
        float* p = PG_COL_MAJOR ? C + (m0 + i) + (n0 + j) * ldc : C + (m0 + i) * ldc + (n0 + j);
        float v = alpha * sum;
        if (beta != 0.f) v = fmaf(beta, *p, v);
        *p = v;
    }
}
