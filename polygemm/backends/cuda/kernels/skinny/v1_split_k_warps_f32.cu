// skinny v1 (fp32, first rung of the small-M ladder): C = alpha * A @ B + beta * C for a
// kernel M of a few rows (decode steps, GEMV), judged by bandwidth: the K x N operand B is
// read once from HBM, the M x K operand A is small. The fp32 twin of v1_split_k_warps_f16.cu:
// a threadblock owns a 16 x 32 tile of C (BM x BN) and the whole K range, its 16 warps split
// K (warp w takes the 32-deep K steps w, w + 16, ...), each streaming 4 KB of B per step by
// 16-byte loads, and the 16 partial tiles are summed in shared memory in a fixed order
// (deterministic, no workspace, no atomics). No tensor cores (fp32 in, fp32 math): FFMA on
// thread tiles of R rows (R = 1, 2, 4, 8 or 16, the fewest covering the threadblock's rows,
// so a GEMV does 1/16 of the FFMAs of a 16-row tile) by 4 columns.
//   B N-contiguous (element (k, j) at B[k*ldb + j]): lane (jl, kt) = (lane % 8, lane / 8)
//     owns columns 4jl .. 4jl+3 (one float4 per row) and rows 8kt .. 8kt+7 of the step;
//     the warp then sums its four row groups with two shuffles per accumulator.
//   B K-contiguous (element (k, j) at B[k + j*ldb]): lane (kq, jl) = (lane % 4, lane / 4)
//     owns columns jl, jl + 8, jl + 16, jl + 24 and K slices 4kq .. 4kq+3 and 16 + 4kq ..
//     19 + 4kq (one float4 each); the four lanes of a column sum with two shuffles.
// A is staged per warp through shared memory ([16 rows][32 + 4 floats]) and read as float4
// (broadcast to the lanes of one K slice).
//
// Layouts. PG_COL_MAJOR=0 ("row" rung, row-major in its own terms): A (i, k) at A[i*lda + k]
// (PG_TRANS_A=1: A[i + k*lda]), B (k, j) at B[k*ldb + j] (PG_TRANS_B=1: B[k + j*ldb]),
// C (i, j) at C[i*ldc + j]. PG_COL_MAJOR=1 ("col" rung): every operand column-major in its
// own terms, the transposes meaning row-major: A (i, k) at A[i + k*lda] (PG_TRANS_A=1:
// A[i*lda + k]), B (k, j) at B[k + j*ldb] (PG_TRANS_B=1: B[k*ldb + j]), C at C[i + j*ldc].
//
// PG_VEC=1: A, B, C 16-byte aligned, lda/ldb/ldc % 4 == 0: float4 loads. PG_VEC=0: any
// alignment; A and B each still take float4 loads when that operand is aligned by itself
// (checked once per threadblock: e.g. the matrix of a GEMV whose vector has an odd length),
// element loads otherwise. Any M, N, K >= 1 (rows past M, columns past N and K past its end
// read as zeros and are not stored; M > 16 takes more threadblock rows, each reading B
// again). beta == 0 never reads C.
// Launch: blockDim (512, 1, 1), gridDim (ceil(N/32), ceil(M/16)) (grid ["n", "m"]), static
// shared memory only.

#include <stdint.h>
#include "common.cuh"  // PG_TRANS_A / PG_TRANS_B / PG_VEC defaults

#ifndef PG_COL_MAJOR
#define PG_COL_MAJOR 0
#endif
#ifndef SK_WARPS
#define SK_WARPS 16
#endif
#ifndef SK_MIN_BLOCKS
#define SK_MIN_BLOCKS 1
#endif

namespace sk1_f32 {

constexpr int kWarps = SK_WARPS;  // warps splitting K (16 shipped; SK_WARPS for tuning only)
constexpr int kThreads = 32 * kWarps;
constexpr int kBM = 16;    // threadblock tile: rows of C
constexpr int kBN = 32;    // ... columns of C
constexpr int kStepK = 32;  // K depth of one warp step
constexpr int kAStride = kStepK + 4;  // floats per staged A row (144 bytes: 16 B-phase shift per row)
constexpr int kRedStride = kBN + 1;  // floats per row of a warp's partial tile
constexpr int kAWords = kBM * kAStride;
constexpr int kRedWords = kBM * kRedStride;
constexpr int kSmemWords = kWarps * (kAWords > kRedWords ? kAWords : kRedWords);
static_assert((kBM * kBN) % kThreads == 0, "the final sum gives each thread whole elements of the tile");

constexpr bool kAKContig = PG_COL_MAJOR == PG_TRANS_A;  // A[i*lda + k]
constexpr bool kBNContig = PG_COL_MAJOR == PG_TRANS_B;  // B[k*ldb + j]

// 4 floats p[0..n-1] (n <= 0: none), zeros past n; one 16-byte load when whole and aligned.
__device__ __forceinline__ float4 load4(const float* p, int n, bool vec) {
    if (vec && n >= 4) return __ldg(reinterpret_cast<const float4*>(p));
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (n > 0) v.x = __ldg(p);
    if (n > 1) v.y = __ldg(p + 1);
    if (n > 2) v.z = __ldg(p + 2);
    if (n > 3) v.w = __ldg(p + 3);
    return v;
}

// A whole float4 of B.
__device__ __forceinline__ float4 ldg_b128(const float* p) { return __ldg(reinterpret_cast<const float4*>(p)); }

// Copy rows 0 .. R-1 (rows >= `rows` zero) and K step [k0, k0 + 32) of A (K past its end
// zero) into the warp's staging tile sa[row][k] (row stride kAStride floats).
template <int R>
__device__ __forceinline__ void stage_a(float* sa, const float* __restrict__ A, int lda, int rows, int k0, int K,
                                        int lane, bool a_vec) {
    if constexpr (kAKContig) {  // rows of 32 floats: 8 float4 chunks per row
        constexpr int kChunks = R * 8;
#pragma unroll 2
        for (int c0 = 0; c0 < kChunks; c0 += 32) {
            const int c = c0 + lane;
            if (kChunks % 32 == 0 || c < kChunks) {
                const int row = c >> 3, kc = (c & 7) * 4;
                const int n = row < rows ? K - (k0 + kc) : 0;
                const float4 v = load4(A + (row < rows ? row : 0) * lda + (n > 0 ? k0 + kc : 0), n, a_vec);
                *reinterpret_cast<float4*>(sa + row * kAStride + kc) = v;
            }
        }
    } else if constexpr (R >= 4) {  // columns of R floats: float4 chunks of 4 rows of one k
        constexpr int kPerK = R / 4;
        constexpr int kChunks = kPerK * kStepK;
#pragma unroll 2
        for (int c0 = 0; c0 < kChunks; c0 += 32) {
            const int c = c0 + lane;
            const int kk = c / kPerK, ih = (c % kPerK) * 4;
            const int n = k0 + kk < K ? rows - ih : 0;
            const float4 v = load4(A + (n > 0 ? ih + (k0 + kk) * lda : 0), n, a_vec);
            sa[(ih + 0) * kAStride + kk] = v.x;
            sa[(ih + 1) * kAStride + kk] = v.y;
            sa[(ih + 2) * kAStride + kk] = v.z;
            sa[(ih + 3) * kAStride + kk] = v.w;
        }
    } else {  // R = 1 or 2 rows: one element per lane and row
#pragma unroll
        for (int i = 0; i < R; ++i) {
            const bool in = i < rows && k0 + lane < K;
            sa[i * kAStride + lane] = in ? __ldg(A + i + (k0 + lane) * lda) : 0.f;
        }
    }
}

// One warp's share of the threadblock tile with thread tiles of R rows (rows <= R), then the
// partial tile into shared memory red[i * kRedStride + j].
template <int R>
__device__ __forceinline__ void warp_tiles(const float* __restrict__ A, int lda, const float* __restrict__ B, int ldb,
                                           int N, int K, int rows, int n0, float* smem, int warp, int lane, bool a_vec,
                                           bool b_vec) {
    float* sa = smem + warp * kAWords;
    float acc[R][4];
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][e] = 0.f;

    const int steps = (K + kStepK - 1) / kStepK;
    const bool full_n = n0 + kBN <= N;
    // N-contiguous B: lane (jl, kt); K-contiguous B: lane (kq, jl).
    const int jl = kBNContig ? lane & 7 : lane >> 2;
    const int kt = lane >> 3, kq = lane & 3;
    for (int s = warp; s < steps; s += kWarps) {
        const int k0 = s * kStepK;
        const bool fast = b_vec && full_n && k0 + kStepK <= K;
        float4 b[8];
        if constexpr (kBNContig) {
            // b[r] = columns n0 + 4jl .. +3 of row k0 + 8kt + r
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
            // b[4h + r] = K slice k0 + 16h + 4kq .. +3 of column n0 + jl + 8r
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
        __syncwarp();  // the previous step's reads of the staging tile are done
        stage_a<R>(sa, A, lda, rows, k0, K, lane, a_vec);
        __syncwarp();
        if constexpr (kBNContig) {
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

    __syncthreads();  // every warp is done with its staging tile (it aliases red)
    float* red = smem + warp * kRedWords;
    const int part = kBNContig ? kt : kq;  // the lanes of one element split its R rows
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

}  // namespace sk1_f32

extern "C" __global__ void __launch_bounds__(sk1_f32::kThreads, SK_MIN_BLOCKS)
skinny_v1_f32(int M, int N, int K, float alpha, const float* __restrict__ A, int lda, const float* __restrict__ B,
              int ldb, float beta, float* __restrict__ C, int ldc)
{
    using namespace sk1_f32;
    __shared__ __align__(16) float smem[kSmemWords];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int n0 = blockIdx.x * kBN, m0 = blockIdx.y * kBM;
    const int rows = min(kBM, M - m0);
    const float* a = A + (kAKContig ? m0 * lda : m0);
    // PG_VEC=0 (some operand unaligned): each of A and B still takes float4 loads when it is
    // aligned itself (e.g. the matrix of a GEMV whose vector has an odd length).
    const bool a_vec = PG_VEC || ((reinterpret_cast<uintptr_t>(a) & 15) == 0 && lda % 4 == 0);
    const bool b_vec = PG_VEC || ((reinterpret_cast<uintptr_t>(B) & 15) == 0 && ldb % 4 == 0);
    if (rows > 8)
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
        for (int w = 0; w < kWarps; ++w) sum += smem[w * kRedWords + i * kRedStride + j];
        float* p = PG_COL_MAJOR ? C + (m0 + i) + (n0 + j) * ldc : C + (m0 + i) * ldc + (n0 + j);
        float v = alpha * sum;
        if (beta != 0.f) v = fmaf(beta, *p, v);
        *p = v;
    }
}
