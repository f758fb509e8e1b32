// skinny v4 (fp64, the small-M rung of the float64 ladder): C = alpha * A @ B + beta * C for a
// kernel M of a few rows (GEMV, decode steps, a small user N through the operand swap), judged
// by bandwidth: the K x N operand B is read once from HBM, the M x K operand A is small. The
// DMMA rungs' 128-row tiles would spend 128 times the arithmetic of a GEMV on zero rows and give
// a 4096-wide result 32 threadblocks; here a threadblock owns a 16 x 32 tile of C (BM x BN) and
// the whole K range, and its 8 warps split K (warp w takes the 16-deep K steps w, w + 8, ...),
// each streaming 4 KB of B per step by 16-byte loads; the 8 partial tiles are summed in shared
// memory in a fixed order (deterministic, no workspace, no atomics). CUDA-core DFMA on thread
// tiles of R rows (R = 1, 2, 4, 8 or 16, the fewest covering the threadblock's rows, so a GEMV
// does 1/16 of the DFMAs of a 16-row tile) by 4 columns: float64's arithmetic, float64's sums.
//   B N-contiguous (element (k, j) at B[k*ldb + j]): lane (jl, kt) = (lane % 8, lane / 8) owns
//     columns 4jl .. 4jl+3 (two 16-byte loads a row) and rows 4kt .. 4kt+3 of the step; the
//     warp then sums its four row groups with two shuffles per accumulator.
//   B K-contiguous (element (k, j) at B[k + j*ldb]): lane (kq, jl) = (lane % 4, lane / 4) owns
//     columns jl, jl + 8, jl + 16, jl + 24 and the K slice 4kq .. 4kq+3 (two 16-byte loads a
//     column); the four lanes of a column sum with two shuffles.
// A is staged per warp through shared memory ([16 rows][16 + 2 doubles]) and read by 16-byte
// loads (broadcast to the lanes of one K slice).
//
// Layouts, as the other skinny rungs. PG_COL_MAJOR=0 ("row" rung): A (i, k) at A[i*lda + k]
// (PG_TRANS_A=1: A[i + k*lda]), B (k, j) at B[k*ldb + j] (PG_TRANS_B=1: B[k + j*ldb]), C (i, j)
// at C[i*ldc + j]. PG_COL_MAJOR=1 ("col" rung): every operand column-major in its own terms, the
// transposes meaning row-major: A (i, k) at A[i + k*lda] (PG_TRANS_A=1: A[i*lda + k]), B (k, j)
// at B[k + j*ldb] (PG_TRANS_B=1: B[k*ldb + j]), C at C[i + j*ldc].
//
// PG_VEC=1: A, B, C 16-byte aligned, lda/ldb/ldc even: 16-byte loads. PG_VEC=0: any alignment;
// A and B each still take 16-byte loads when that operand is aligned by itself (checked once per
// threadblock), element loads otherwise. Any M, N, K >= 1 (rows past M, columns past N and K past
// its end read as zeros and are not stored; M > 16 takes more threadblock rows, each reading B
// again). beta == 0 never reads C.
// PG_BATCH=1: blockIdx.z is a matrix of a strided batch (common.cuh). PG_SPLIT=1 (with
// PG_BATCH): blockIdx.z is a K-slice (split_k.cuh's pg_split_slice_k: the launch passes the
// whole K, slices of whole 16-deep steps), the tile stored in the slice's float64 workspace and
// added up by the last slice to arrive, in slice order: a long K over a small output
// (64 x 64 x 65536, 512 x 2 x 500000) would otherwise stream its operands through a few SMs.
// Launch: blockDim (256, 1, 1), gridDim (ceil(N/32), ceil(M/16), matrices or slices)
// (grid ["n", "m"]), static shared memory only (33 KB).

#include <stdint.h>
#define PG_SPLIT_F64 1  // split_k.cuh's workspace, sums and scalars in double
#include "common.cuh"  // PG_TRANS_A / PG_TRANS_B / PG_VEC defaults, PG_BATCH, PG_SPLIT

#ifndef PG_COL_MAJOR
#define PG_COL_MAJOR 0
#endif

namespace sk4_f64 {

constexpr int kWarps = 8;  // warps splitting K
constexpr int kThreads = 32 * kWarps;
constexpr int kBM = 16;     // threadblock tile: rows of C
constexpr int kBN = 32;     // ... columns of C
constexpr int kStepK = 16;  // K depth of one warp step
constexpr int kAStride = kStepK + 2;  // doubles per staged A row (144 bytes: 16-byte aligned rows, banks shifted)
constexpr int kRedStride = kBN + 1;   // doubles per row of a warp's partial tile
constexpr int kAWords = kBM * kAStride;
constexpr int kRedWords = kBM * kRedStride;
constexpr int kSmemWords = kWarps * (kAWords > kRedWords ? kAWords : kRedWords);
static_assert((kBM * kBN) % kThreads == 0, "the final sum gives each thread whole elements of the tile");

constexpr bool kAKContig = PG_COL_MAJOR == PG_TRANS_A;  // A[i*lda + k]
constexpr bool kBNContig = PG_COL_MAJOR == PG_TRANS_B;  // B[k*ldb + j]

// 2 doubles p[0..n-1] (n <= 0: none), zeros past n; one 16-byte load when whole and aligned.
__device__ __forceinline__ double2 load2(const double* p, int n, bool vec) {
    if (vec && n >= 2) return __ldg(reinterpret_cast<const double2*>(p));
    double2 v = make_double2(0.0, 0.0);
    if (n > 0) v.x = __ldg(p);
    if (n > 1) v.y = __ldg(p + 1);
    return v;
}

// Copy rows 0 .. R-1 (rows >= `rows` zero) and K step [k0, k0 + 16) of A (K past its end zero)
// into the warp's staging tile sa[row][k] (row stride kAStride doubles).
template <int R>
__device__ __forceinline__ void stage_a(double* sa, const double* __restrict__ A, int lda, int rows, int k0, int K,
                                        int lane, bool a_vec) {
    if constexpr (kAKContig) {  // rows of 16 doubles: 8 two-double chunks per row
        constexpr int kChunks = R * 8;
#pragma unroll
        for (int c0 = 0; c0 < kChunks; c0 += 32) {
            const int c = c0 + lane;
            if (kChunks % 32 == 0 || c < kChunks) {
                const int row = c >> 3, kc = (c & 7) * 2;
                const int n = row < rows ? K - (k0 + kc) : 0;
                const double2 v = load2(A + (row < rows ? row : 0) * (long long)lda + (n > 0 ? k0 + kc : 0), n, a_vec);
                *reinterpret_cast<double2*>(sa + row * kAStride + kc) = v;
            }
        }
    } else if constexpr (R >= 2) {  // columns of R doubles: two-double chunks of 2 rows of one k
        constexpr int kPerK = R / 2;
        constexpr int kChunks = kPerK * kStepK;
#pragma unroll
        for (int c0 = 0; c0 < kChunks; c0 += 32) {
            const int c = c0 + lane;
            if (kChunks % 32 == 0 || c < kChunks) {
                const int kk = c / kPerK, ih = (c % kPerK) * 2;
                const int n = k0 + kk < K ? rows - ih : 0;
                const double2 v = load2(A + (n > 0 ? ih + (k0 + kk) * (long long)lda : 0), n, a_vec);
                sa[ih * kAStride + kk] = v.x;
                sa[(ih + 1) * kAStride + kk] = v.y;
            }
        }
    } else {  // one row: one element per lane
        if (lane < kStepK) sa[lane] = (rows > 0 && k0 + lane < K) ? __ldg(A + (k0 + lane) * (long long)lda) : 0.0;
    }
}

// One warp's share of the threadblock tile with thread tiles of R rows (rows <= R), then the
// partial tile into shared memory red[i * kRedStride + j].
template <int R>
__device__ __forceinline__ void warp_tiles(const double* __restrict__ A, int lda, const double* __restrict__ B, int ldb,
                                           int N, int K, int rows, int n0, double* smem, int warp, int lane, bool a_vec,
                                           bool b_vec) {
    double* sa = smem + warp * kAWords;
    double acc[R][4];
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][e] = 0.0;

    const int steps = (K + kStepK - 1) / kStepK;
    const bool full_n = n0 + kBN <= N;
    // N-contiguous B: lane (jl, kt); K-contiguous B: lane (kq, jl).
    const int jl = kBNContig ? lane & 7 : lane >> 2;
    const int kt = lane >> 3, kq = lane & 3;
    for (int s = warp; s < steps; s += kWarps) {
        const int k0 = s * kStepK;
        const bool fast = b_vec && full_n && k0 + kStepK <= K;
        double b[4][4];  // N-contiguous: b[r][e] = B(k0 + 4kt + r, n0 + 4jl + e); K-contiguous: b[r][q] = B(k0 + 4kq + q, n0 + jl + 8r)
        if constexpr (kBNContig) {
            const int jc = n0 + 4 * jl;
            const int ncols = N - jc;
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int k = k0 + 4 * kt + r;
                const double* row = B + (long long)k * ldb + jc;
                double2 lo, hi;
                if (fast) {
                    lo = __ldg(reinterpret_cast<const double2*>(row));
                    hi = __ldg(reinterpret_cast<const double2*>(row + 2));
                } else {
                    const int n = k < K ? ncols : 0;
                    lo = load2(n > 0 ? row : B, n, b_vec);
                    hi = load2(n > 2 ? row + 2 : B, n - 2, b_vec);
                }
                b[r][0] = lo.x, b[r][1] = lo.y, b[r][2] = hi.x, b[r][3] = hi.y;
            }
        } else {
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int j = n0 + jl + 8 * r;
                const int kb = k0 + 4 * kq;
                const double* col = B + (long long)(j < N ? j : N - 1) * ldb + kb;
                double2 lo, hi;
                if (fast) {
                    lo = __ldg(reinterpret_cast<const double2*>(col));
                    hi = __ldg(reinterpret_cast<const double2*>(col + 2));
                } else {
                    const int n = j < N ? K - kb : 0;
                    lo = load2(n > 0 ? col : B, n, b_vec);
                    hi = load2(n > 2 ? col + 2 : B, n - 2, b_vec);
                }
                b[r][0] = lo.x, b[r][1] = lo.y, b[r][2] = hi.x, b[r][3] = hi.y;
            }
        }
        __syncwarp();  // the previous step's reads of the staging tile are done
        stage_a<R>(sa, A, lda, rows, k0, K, lane, a_vec);
        __syncwarp();
#pragma unroll
        for (int i = 0; i < R; ++i) {
            const int at = i * kAStride + 4 * (kBNContig ? kt : kq);
            const double2 a01 = *reinterpret_cast<const double2*>(sa + at);
            const double2 a23 = *reinterpret_cast<const double2*>(sa + at + 2);
            const double a[4] = {a01.x, a01.y, a23.x, a23.y};
            if constexpr (kBNContig) {
#pragma unroll
                for (int r = 0; r < 4; ++r)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[i][e] = fma(a[r], b[r][e], acc[i][e]);
            } else {
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    double d = acc[i][r];
#pragma unroll
                    for (int q = 0; q < 4; ++q) d = fma(a[q], b[r][q], d);
                    acc[i][r] = d;
                }
            }
        }
    }

    // Sum the lanes that hold other K slices of the same elements (fixed butterfly order).
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            double v = acc[i][e];
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
    double* red = smem + warp * kRedWords;
    const int part = kBNContig ? kt : kq;  // the four lanes of one element split its R rows
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

}  // namespace sk4_f64

extern "C" __global__ void __launch_bounds__(sk4_f64::kThreads, 1)
skinny_v4_f64(int M, int N, int K, double alpha, const double* __restrict__ A, int lda, const double* __restrict__ B,
              int ldb, double beta, double* __restrict__ C, int ldc PG_BATCH_PARAMS PG_SPLIT_PARAMS)
{
    using namespace sk4_f64;
    __shared__ __align__(16) double smem[kSmemWords];
    PG_BATCH_SEEK(A, B, C);  // blockIdx.z: a matrix of the batch, or (PG_SPLIT) a K-slice
#if PG_SPLIT
    static_assert(PG_BATCH, "PG_SPLIT: the K-slices are a batch");
    K = pg_split_slice_k(K, kStepK);
#endif
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int n0 = blockIdx.x * kBN, m0 = blockIdx.y * kBM;
    const int rows = min(kBM, M - m0);
    const double* a = A + (kAKContig ? (long long)m0 * lda : m0);
    // PG_VEC=0 (some operand unaligned): each of A and B still takes 16-byte loads when it is
    // aligned itself (e.g. the matrix of a GEMV whose vector has an odd length).
    const bool a_vec = PG_VEC || ((reinterpret_cast<uintptr_t>(a) & 15) == 0 && lda % 2 == 0);
    const bool b_vec = PG_VEC || ((reinterpret_cast<uintptr_t>(B) & 15) == 0 && ldb % 2 == 0);
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
        double sum = 0.0;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) sum += smem[w * kRedWords + i * kRedStride + j];
        double* p = PG_COL_MAJOR ? C + (m0 + i) + (long long)(n0 + j) * ldc : C + (long long)(m0 + i) * ldc + (n0 + j);
        double v = alpha * sum;
        if (beta != 0.0) v = fma(beta, *p, v);
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
