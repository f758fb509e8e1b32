// skinny v1 (fp16, first rung of the small-M ladder): C = alpha * A @ B + beta * C for a
// kernel M of a few rows (decode steps, GEMV), judged by bandwidth: the K x N operand B is
// read once from HBM, the M x K operand A is small. A threadblock owns a 16 x 32 tile of C
// (BM x BN) and the whole K range; its 16 warps split K (warp w takes the 64-deep K steps
// w, w + 16, ...), each streaming its part of B into registers by vector loads, and the
// partial tiles are summed in shared memory in a fixed order (deterministic, no workspace,
// no atomics). BN = 32 keeps even N = 4096 at 128 threadblocks for the 132 SMs; every warp
// keeps 4 KB of B in flight per step (64 KB per SM), enough to cover HBM latency.
//
// Math: mma.sync m16n8k16 (fp16 in, fp32 accumulate) with the operands swapped so that the
// long side sits on the instruction's M: instruction A = a 16-column slice of B transposed
// (rows = columns j of C), instruction B = A transposed (its 8 columns = 8 rows i of C), so
// a kernel M <= 8 uses one n8 tile and M <= 16 two. The order of K inside one K step is free
// (both operands use the same one), which lets each lane take its B fragments straight from
// its own vector loads:
//   B K-contiguous (element (k, j) at B[k + j*ldb]): lane (g, t) = (lane / 4, lane % 4) loads
//     halves 16t .. 16t+15 of the step for columns g and g + 8 of each 16-column slice;
//     mma s (s = 0..3) takes its fragment's k pairs {2t, 2t+1} and {2t+8, 2t+9} from halves
//     16t + 4s + {0, 1} and 16t + 4s + {2, 3}.
//   B N-contiguous (element (k, j) at B[k*ldb + j]): lane (g, t) loads 4 columns 4g .. 4g+3
//     (8 bytes) of rows 2t, 2t+1, 2t+8, 2t+9 of each k16 slice, and byte permutes (prmt)
//     pair rows k, k+1 of one column into the fragment's k pairs; the mma q (q = 0, 1) of a
//     slice has columns 4g + 2q (instruction row g) and 4g + 2q + 1 (row g + 8).
// A is staged per warp through shared memory ([16 rows][64 + 8 halves], the pad keeps the
// 16-byte fragment reads conflict-free), read as the matching instruction B fragments.
//
// Layouts. PG_COL_MAJOR=0 ("row" rung, row-major in its own terms): A (i, k) at A[i*lda + k]
// (PG_TRANS_A=1: A[i + k*lda]), B (k, j) at B[k*ldb + j] (PG_TRANS_B=1: B[k + j*ldb]),
// C (i, j) at C[i*ldc + j]. PG_COL_MAJOR=1 ("col" rung): every operand column-major in its
// own terms, the transposes meaning row-major: A (i, k) at A[i + k*lda] (PG_TRANS_A=1:
// A[i*lda + k]), B (k, j) at B[k + j*ldb] (PG_TRANS_B=1: B[k*ldb + j]), C at C[i + j*ldc].
// C is __half, or float when PG_OUT_F32=1. PG_BF16=1: bfloat16 A, B and 16-bit C (common.cuh's
// pg_half; the same fragments and loads, the mma.sync of that type).
//
// PG_VEC=1: A, B, C 16-byte aligned, lda/ldb/ldc % 8 == 0: 16-byte loads of A and of
// K-contiguous B, 8-byte loads of N-contiguous B.
// PG_VEC=0: any alignment; A and B each still take those vector loads when that operand is
// aligned by itself (checked once per threadblock: e.g. the matrix of a GEMV whose vector has
// an odd length), element loads otherwise. Any M, N, K >= 1
// (rows past M, columns past N and K past its end read as zeros and are not stored; M > 16
// takes more threadblock rows, each reading B again). beta == 0 never reads C.
// Launch: blockDim (512, 1, 1), gridDim (ceil(N/32), ceil(M/16)) (grid ["n", "m"]), static
// shared memory only.

#include <cuda_fp16.h>
#include <stdint.h>
#define PG_HALF_TYPES  // pg_half: __half, or __nv_bfloat16 in the PG_BF16=1 build
#include "common.cuh"  // PG_TRANS_A / PG_TRANS_B / PG_VEC defaults

#ifndef PG_OUT_F32
#define PG_OUT_F32 0
#endif
#ifndef PG_COL_MAJOR
#define PG_COL_MAJOR 0
#endif
#ifndef SK_WARPS
#define SK_WARPS 16
#endif
#ifndef SK_MIN_BLOCKS
#define SK_MIN_BLOCKS 1
#endif

namespace sk1_f16 {

constexpr int kWarps = SK_WARPS;  // warps splitting K (16 shipped; SK_WARPS for tuning only)
constexpr int kThreads = 32 * kWarps;
constexpr int kBM = 16;    // threadblock tile: rows of C
constexpr int kBN = 32;    // ... columns of C
constexpr int kStepK = 64;  // K depth of one warp step
constexpr int kAStride = kStepK + 8;     // halves per staged A row (144 bytes: 16 B-phase shift per row)
constexpr int kRedStride = kBN + 1;     // floats per row of a warp's partial tile
constexpr int kAWords = kBM * kAStride / 2;  // 32-bit words of one warp's staged A
constexpr int kRedWords = kBM * kRedStride;  // ... of one warp's partial tile
constexpr int kSmemWords = kWarps * (kAWords > kRedWords ? kAWords : kRedWords);
static_assert((kBM * kBN) % kThreads == 0, "the final sum gives each thread whole elements of the tile");

// Element (i, k) of A, (k, j) of B and (i, j) of C in the kernel's own terms.
constexpr bool kAKContig = PG_COL_MAJOR == PG_TRANS_A;  // A[i*lda + k]
constexpr bool kBNContig = PG_COL_MAJOR == PG_TRANS_B;  // B[k*ldb + j]

#if PG_OUT_F32
using OutT = float;
__device__ __forceinline__ float load_out(const float* p) { return *p; }
__device__ __forceinline__ void store_out(float* p, float v) { *p = v; }
#else
using OutT = pg_half;
__device__ __forceinline__ float load_out(const pg_half* p) { return pg_half2float(*p); }
__device__ __forceinline__ void store_out(pg_half* p, float v) { *p = pg_float2half_rn(v); }
#endif

__device__ __forceinline__ uint32_t ld_u16(const uint16_t* p) { return __ldg(p); }

// Whole 16- and 8-byte chunks of B.
__device__ __forceinline__ uint4 ldg_b128(const uint16_t* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ uint2 ldg_b64(const uint16_t* p) { return __ldg(reinterpret_cast<const uint2*>(p)); }

// 8 halves p[0..n-1] (n <= 0: none) as 4 words, zeros past n; one 16-byte load when whole
// and aligned.
__device__ __forceinline__ uint4 load8(const uint16_t* p, int n, bool vec) {
    if (vec && n >= 8) return __ldg(reinterpret_cast<const uint4*>(p));
    uint32_t h[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) h[e] = e < n ? ld_u16(p + e) : 0u;
    return make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
}
// 4 halves, zeros past n; one 8-byte load when whole and aligned.
__device__ __forceinline__ uint2 load4(const uint16_t* p, int n, bool vec) {
    if (vec && n >= 4) return __ldg(reinterpret_cast<const uint2*>(p));
    uint32_t h[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) h[e] = e < n ? ld_u16(p + e) : 0u;
    return make_uint2(h[0] | h[1] << 16, h[2] | h[3] << 16);
}
// 8 halves strided by ld (a column of 8 rows of M-contiguous A is contiguous: stride 1 there).
__device__ __forceinline__ void load8_col(uint32_t (&h)[8], const uint16_t* p, int n, bool vec) {
    if (vec && n >= 8) {
        const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            h[2 * e] = w[e] & 0xffffu;
            h[2 * e + 1] = w[e] >> 16;
        }
        return;
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) h[e] = e < n ? ld_u16(p + e) : 0u;
}

__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32" PG_MMA_AB PG_MMA_AB ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t prmt(uint32_t x, uint32_t y, uint32_t sel) {
    return __byte_perm(x, y, sel);
}

// Copy rows 0 .. 8*NT-1 (rows >= `rows` zero) and K step [k0, k0 + 64) of A (K past its end
// zero) into the warp's staging tile sa[row][k] (row stride kAStride halves).
template <int NT>
__device__ __forceinline__ void stage_a(uint16_t* sa, const uint16_t* __restrict__ A, int lda, int rows, int k0,
                                        int K, int lane, bool a_vec) {
    constexpr int kRows = 8 * NT;
    if constexpr (kAKContig) {  // rows of 64 halves: 8 chunks of 8 per row
        constexpr int kChunks = kRows * 8;
#pragma unroll
        for (int c0 = 0; c0 < kChunks; c0 += 32) {
            const int c = c0 + lane;
            const int row = c >> 3, kc = (c & 7) * 8;
            const int n = row < rows ? K - (k0 + kc) : 0;
            const uint16_t* p = A + (row < rows ? row : 0) * lda + (n > 0 ? k0 + kc : 0);
            const uint4 v = load8(p, n, a_vec);
            *reinterpret_cast<uint4*>(sa + row * kAStride + kc) = v;
        }
    } else {  // columns of kRows halves: chunks of 8 rows of one k
        constexpr int kPerK = kRows / 8;
        constexpr int kChunks = kPerK * kStepK;
#pragma unroll
        for (int c0 = 0; c0 < kChunks; c0 += 32) {
            const int c = c0 + lane;
            const int kk = c / kPerK, ih = (c % kPerK) * 8;
            const bool kin = k0 + kk < K;
            const int n = kin ? rows - ih : 0;
            const uint16_t* p = A + (n > 0 ? ih + (k0 + kk) * lda : 0);
            uint32_t h[8];
            load8_col(h, p, n, a_vec);
#pragma unroll
            for (int e = 0; e < 8; ++e) sa[(ih + e) * kAStride + kk] = static_cast<uint16_t>(h[e]);
        }
    }
}

// One warp's share of the threadblock tile with NT n8 tiles (rows <= 8 * NT), then the
// partial tile into shared memory red[i * kRedStride + j].
template <int NT>
__device__ __forceinline__ void warp_tiles(const uint16_t* __restrict__ A, int lda, const uint16_t* __restrict__ B,
                                           int ldb, int N, int K, int rows, int n0, uint32_t* smem, int warp,
                                           int lane, bool a_vec, bool b_vec) {
    const int g = lane >> 2, t = lane & 3;
    uint16_t* sa = reinterpret_cast<uint16_t*>(smem + warp * kAWords);
    const uint32_t* sa32 = smem + warp * kAWords;
    float acc[2][NT][4];
#pragma unroll
    for (int x = 0; x < 2; ++x)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[x][nt][e] = 0.f;

    const int steps = (K + kStepK - 1) / kStepK;
    const bool full_n = n0 + kBN <= N;
    for (int s = warp; s < steps; s += kWarps) {
        const int k0 = s * kStepK;
        const bool fast = b_vec && full_n && k0 + kStepK <= K;
        if constexpr (!kBNContig) {
            // B K-contiguous: bw[x][h][c] = halves k0 + 16t + 8c .. +7 of column n0 + 16x + g + 8h
            uint4 bw[2][2][2];
#pragma unroll
            for (int x = 0; x < 2; ++x)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int j = n0 + 16 * x + g + 8 * h;
                    const uint16_t* col = B + (j < N ? j : N - 1) * ldb;
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        const int kb = k0 + 16 * t + 8 * c;
                        if (fast) {
                            bw[x][h][c] = ldg_b128(col + kb);
                        } else {
                            const int n = j < N ? K - kb : 0;
                            bw[x][h][c] = load8(col + (n > 0 ? kb : 0), n, b_vec);
                        }
                    }
                }
            __syncwarp();  // the previous step's fragment reads are done
            stage_a<NT>(sa, A, lda, rows, k0, K, lane, a_vec);
            __syncwarp();
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                // z = halves 16t .. 16t+15 of staged row g + 8nt
                const uint4 z0 = *reinterpret_cast<const uint4*>(sa32 + (g + 8 * nt) * (kAStride / 2) + 8 * t);
                const uint4 z1 = *reinterpret_cast<const uint4*>(sa32 + (g + 8 * nt) * (kAStride / 2) + 8 * t + 4);
                const uint32_t z[8] = {z0.x, z0.y, z0.z, z0.w, z1.x, z1.y, z1.z, z1.w};
#pragma unroll
                for (int x = 0; x < 2; ++x) {
                    const uint32_t w0[8] = {bw[x][0][0].x, bw[x][0][0].y, bw[x][0][0].z, bw[x][0][0].w,
                                            bw[x][0][1].x, bw[x][0][1].y, bw[x][0][1].z, bw[x][0][1].w};
                    const uint32_t w1[8] = {bw[x][1][0].x, bw[x][1][0].y, bw[x][1][0].z, bw[x][1][0].w,
                                            bw[x][1][1].x, bw[x][1][1].y, bw[x][1][1].z, bw[x][1][1].w};
#pragma unroll
                    for (int q = 0; q < 4; ++q)
                        mma16816(acc[x][nt], w0[2 * q], w1[2 * q], w0[2 * q + 1], w1[2 * q + 1], z[2 * q], z[2 * q + 1]);
                }
            }
        } else {
            // B N-contiguous, 8-byte loads: br[ss][r] = columns n0 + 4g .. +3 of row
            // k0 + 16ss + {2t, 2t+1, 2t+8, 2t+9}[r]
            uint2 br[4][4];
            const int jc = n0 + 4 * g;
            const int ncols = N - jc;
#pragma unroll
            for (int ss = 0; ss < 4; ++ss)
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    const int k = k0 + 16 * ss + 2 * t + (r & 1) + 8 * (r >> 1);
                    if (fast) {
                        br[ss][r] = ldg_b64(B + k * ldb + jc);
                    } else {
                        const int n = k < K ? ncols : 0;
                        br[ss][r] = load4(B + (n > 0 ? k * ldb + jc : 0), n, b_vec);
                    }
                }
            __syncwarp();
            stage_a<NT>(sa, A, lda, rows, k0, K, lane, a_vec);
            __syncwarp();
#pragma unroll
            for (int ss = 0; ss < 4; ++ss) {
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    const uint32_t* row = sa32 + (g + 8 * nt) * (kAStride / 2) + 8 * ss + t;
                    const uint32_t b0 = row[0], b1 = row[4];  // halves 16ss + 2t (+1), 16ss + 2t + 8 (+1)
#pragma unroll
                    for (int q = 0; q < 2; ++q) {
                        const uint32_t u = q ? br[ss][0].y : br[ss][0].x, v = q ? br[ss][1].y : br[ss][1].x;
                        const uint32_t x = q ? br[ss][2].y : br[ss][2].x, y = q ? br[ss][3].y : br[ss][3].x;
                        mma16816(acc[q][nt], prmt(u, v, 0x5410), prmt(u, v, 0x7632), prmt(x, y, 0x5410),
                                 prmt(x, y, 0x7632), b0, b1);
                    }
                }
            }
        }
    }

    // Partial tile: accumulator (x, nt) holds rows i = 8nt + 2t + {0, 1} (c0/c1 and c2/c3)
    // of columns jA (c0, c1) and jB (c2, c3).
    __syncthreads();  // every warp is done with its staging tile (it aliases red)
    float* red = reinterpret_cast<float*>(smem) + warp * kRedWords;
#pragma unroll
    for (int x = 0; x < 2; ++x) {
        const int ja = kBNContig ? 4 * g + 2 * x : 16 * x + g;
        const int jb = kBNContig ? ja + 1 : ja + 8;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            const int i = 8 * nt + 2 * t;
            red[i * kRedStride + ja] = acc[x][nt][0];
            red[(i + 1) * kRedStride + ja] = acc[x][nt][1];
            red[i * kRedStride + jb] = acc[x][nt][2];
            red[(i + 1) * kRedStride + jb] = acc[x][nt][3];
        }
    }
}

}  // namespace sk1_f16

extern "C" __global__ void __launch_bounds__(sk1_f16::kThreads, SK_MIN_BLOCKS)
skinny_v1_f16(int M, int N, int K, float alpha, const pg_half* __restrict__ A, int lda, const pg_half* __restrict__ B,
              int ldb, float beta, void* __restrict__ Cv, int ldc)
{
    using namespace sk1_f16;
    __shared__ __align__(16) uint32_t smem[kSmemWords];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int n0 = blockIdx.x * kBN, m0 = blockIdx.y * kBM;
    const int rows = min(kBM, M - m0);
    const uint16_t* a = reinterpret_cast<const uint16_t*>(A) + (kAKContig ? m0 * lda : m0);
    const uint16_t* b = reinterpret_cast<const uint16_t*>(B);
    // PG_VEC=0 (some operand unaligned): each of A and B still takes vector loads when it is
    // aligned itself (e.g. the matrix of a GEMV whose vector has an odd length).
    const bool a_vec = PG_VEC || ((reinterpret_cast<uintptr_t>(a) & 15) == 0 && lda % 8 == 0);
    const bool b_vec = PG_VEC || ((reinterpret_cast<uintptr_t>(b) & 15) == 0 && ldb % 8 == 0);
    if (rows > 8)
        warp_tiles<2>(a, lda, b, ldb, N, K, rows, n0, smem, warp, lane, a_vec, b_vec);
    else
        warp_tiles<1>(a, lda, b, ldb, N, K, rows, n0, smem, warp, lane, a_vec, b_vec);
    __syncthreads();

    // Sum the partial tiles in warp order (the same bits every run) and store: consecutive
    // threads along C's contiguous dimension.
    const float* red = reinterpret_cast<const float*>(smem);
    OutT* C = reinterpret_cast<OutT*>(Cv);
#pragma unroll
    for (int e = threadIdx.x; e < kBM * kBN; e += kThreads) {
        const int i = PG_COL_MAJOR ? e % kBM : e / kBN;
        const int j = PG_COL_MAJOR ? e / kBM : e % kBN;
        if (i >= rows || n0 + j >= N) continue;
        float sum = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) sum += red[w * kRedWords + i * kRedStride + j];
        OutT* p = PG_COL_MAJOR ? C + (m0 + i) + (n0 + j) * ldc : C + (m0 + i) * ldc + (n0 + j);
        float v = alpha * sum;
        if (beta != 0.f) v = fmaf(beta, load_out(p), v);
        store_out(p, v);
    }
}
