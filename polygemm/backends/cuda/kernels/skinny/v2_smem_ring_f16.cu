// skinny v2 (fp16): v1_split_k_warps_f16.cu with B and A in a shared-memory ring.
// What it adds to v1: each warp streams its K steps of B (and A) through a ring of four
// shared-memory stages filled by cp.async, so three steps of B (12 KB) are in flight while it
// runs the mma.sync of a fourth; v1 loaded a step into registers, waited, then computed. The
// fragments each lane reads are v1's (the same lane maps, now read from the stage), so the
// math, the 16 x 32 threadblock tile and the warp-order sums (deterministic, no workspace, no
// atomics) are v1's; 8 warps (256 threads) split K, the rings taking 200 KB of shared memory
// (sm_90's 227 KB a block). (Window staging, below, has 2 steps of 5 KB in flight in a 16-row
// tile, 3 in an 8-row one.)
//   B K-contiguous: a stage is [32 columns][64 k] halves (128 bytes a column) with the 16-byte
//     chunks of odd columns swapped in pairs (chunk q at q ^ 1): the two columns a quarter-warp
//     reads (columns g and g + 1 of a slice, chunks 2t + c) fall in other banks.
//   B N-contiguous: a stage is [64 k][32 columns] halves, two rows to a 128-byte line of eight
//     16-byte chunks, the chunk at line position p stored at p ^ (2 (line % 4)): the four rows
//     2t + c0 a half-warp reads (8 bytes each at columns 4g) fall in four bank octets.
//   A: v1's [16 rows][64 + 8 halves].
// Copies are 16-byte cp.async where the operand is 16-byte aligned (zero-filled past N, M and K
// through the copies' source size). An N-contiguous B whose rows are not 16-byte aligned (an odd
// N such as a 50257-word vocabulary) is staged as windows: each row of a step takes the five
// aligned 16-byte chunks around its 64 bytes (cp.async, an 80-byte row in the stage), and the
// fragment reads shift by the row's offset in its window; three stages then fit (four for a tile
// of up to 8 rows, A then staged unpadded). Any other
// unaligned operand is staged by v1's element loads and plain shared stores when its step is
// issued.
//
// Layouts, PG_TRANS_A/B, PG_VEC, PG_OUT_F32, PG_COL_MAJOR: as v1.
// PG_BF16=1: bfloat16 A, B and 16-bit C (common.cuh's pg_half; the same fragments and copies).
// PG_BATCH=1: blockIdx.z is a matrix of a strided batch (common.cuh). PG_SPLIT=1 (with
// PG_BATCH and PG_OUT_F32): blockIdx.z is a K-slice (split_k.cuh's pg_split_slice_k: the launch
// passes the whole K, slices of whole 64-deep steps), each strip's partial tile stored in the
// slice's fp32 workspace and added up by the last slice to arrive. Why: a long K over a small
// output (512 x 2 x 500000) is 16 strips, 16 of 132 SMs streaming the operand; split 8 ways it
// is 128 threadblocks and the whole GPU's bandwidth.
// The threadblocks walk the 32-column strips (blockIdx.x, + gridDim.x, ...), each warp's ring
// running on from one strip's K steps into the next's, so a product of short K keeps its copies
// in flight between strips; the warps' partial tiles have their own 16.5 KB after the rings.
// Launch: blockDim (256, 1, 1), gridDim (at most ceil(N/32), ceil(M/16), matrices or slices)
// (grid ["n", "m"]; the planner caps x at SMs // (ceil(M/16) z) while that is 2 or more:
// variants.json "walks_strips"),
// 221696 bytes (216.5 KB) of dynamic shared memory.

#include <cuda_fp16.h>
#include <stdint.h>
#define PG_HALF_TYPES  // pg_half: __half, or __nv_bfloat16 in the PG_BF16=1 build
#include "common.cuh"  // PG_TRANS_A / PG_TRANS_B / PG_VEC defaults, PG_BATCH, PG_SPLIT

#ifndef PG_OUT_F32
#define PG_OUT_F32 0
#endif
#ifndef PG_COL_MAJOR
#define PG_COL_MAJOR 0
#endif

namespace sk2_f16 {

constexpr int kWarps = 8;  // warps splitting K
constexpr int kThreads = 32 * kWarps;
constexpr int kBM = 16;    // threadblock tile: rows of C
constexpr int kBN = 32;    // ... columns of C
constexpr int kStepK = 64;  // K depth of one warp step
constexpr int kAStride = kStepK + 8;          // halves per staged A row (v1's)
constexpr int kABytes = kBM * kAStride * 2;  // one step of A: 2304 bytes
constexpr int kWinRow = 80;                   // bytes of a staged window row of B: 5 chunks
constexpr int kSmemBytes = 221696;            // variants.json: this rung's dynamic shared memory
constexpr int kRedStride = kBN + 1;          // floats per row of a warp's partial tile
constexpr int kRedFloats = kBM * kRedStride;  // a warp's partial tile
constexpr int kRedOffset = 204800;             // the partial tiles' place: after the largest ring

#ifndef SK2_WIN1_STAGES
#define SK2_WIN1_STAGES 4
#endif
// A warp's ring: B's stages as 64 k-rows of 64 bytes (4 stages), or, for window staging (kWin),
// of 80: 3 stages within the same shared memory, or, where the tile has 8 rows (NT = 1), 4 with
// A's rows staged unpadded (kCompactA: a_at).
template <bool kWin, int NT>
struct Ring {
    static constexpr bool kCompactA = kWin && NT == 1;
    static constexpr int kStages = kWin ? (kCompactA ? SK2_WIN1_STAGES : 3) : 4;
    static constexpr int kBBytes = kWin ? kStepK * kWinRow : kStepK * kBN * 2;  // 5120 or 4096 bytes
    static constexpr int kABytes = kCompactA ? 8 * kStepK * 2 : sk2_f16::kABytes;  // 1024 or 2304 bytes
    static constexpr int kStageBytes = kBBytes + kABytes;
    static constexpr int kWarpBytes = kStages * kStageBytes;
    static_assert(kWarps * kWarpBytes <= kRedOffset, "the rings end where the partial tiles start");
    static_assert(kStageBytes % 16 == 0, "stages start on 16-byte boundaries");
};
static_assert(kRedOffset + kWarps * kRedFloats * 4 == kSmemBytes, "the partial tiles end the shared memory");
static_assert((kBM * kBN) % kThreads == 0, "the final sum gives each thread whole elements of the tile");
constexpr int kBBytes = Ring<false, 1>::kBBytes;

constexpr bool kAKContig = PG_COL_MAJOR == PG_TRANS_A;  // A[i*lda + k]
constexpr bool kBNContig = PG_COL_MAJOR == PG_TRANS_B;  // B[k*ldb + j]
// Window staging exists only in the unaligned build and only for an N-contiguous B (a
// K-contiguous one is staged by element loads as before).
constexpr bool kHasWin = !PG_VEC && kBNContig;

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

// 8 halves p[0..n-1] (n <= 0: none) as 4 words, zeros past n; one 16-byte load when whole
// and aligned (v1's).
__device__ __forceinline__ uint4 load8(const uint16_t* p, int n, bool vec) {
    if (vec && n >= 8) return __ldg(reinterpret_cast<const uint4*>(p));
    uint32_t h[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) h[e] = e < n ? ld_u16(p + e) : 0u;
    return make_uint4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
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

__device__ __forceinline__ uint32_t prmt(uint32_t x, uint32_t y, uint32_t sel) { return __byte_perm(x, y, sel); }

// Byte offset in a B stage of 16-byte chunk `ch` of column j (K-contiguous: 8 chunks a column)
// or of row k (N-contiguous: 4 chunks a row), swizzled as the header says.
__device__ __forceinline__ uint32_t kcol_chunk(int j, int ch) { return j * 128 + ((ch ^ (j & 1)) << 4); }
__device__ __forceinline__ uint32_t nrow_chunk(int k, int ch) {
    return (k >> 1) * 128 + (((((k & 1) << 2) | ch) ^ (((k >> 1) & 3) << 1)) << 4);
}

// Start filling B's part of a stage (base address sb, shared) with K step [k0, k0 + 64) of
// the 32-column strip n0.
__device__ __forceinline__ void stage_b(uint32_t sb, const uint16_t* __restrict__ B, int ldb, int N, int K, int n0,
                                        int k0, int lane, bool b_vec) {
#pragma unroll
    for (int q = 0; q < kBBytes / 16 / 32; ++q) {  // 8 chunks of 16 bytes a lane
        const int c = lane + 32 * q;
        uint32_t dst;
        const uint16_t* src;
        int n;
        if constexpr (kBNContig) {  // chunk c: row c / 4, columns 8 (c % 4) .. +7
            const int k = c >> 2, ch = c & 3;
            dst = sb + nrow_chunk(k, ch);
            n = k0 + k < K ? min(max(N - (n0 + 8 * ch), 0), 8) : 0;
            src = B + (n > 0 ? (k0 + k) * ldb + n0 + 8 * ch : 0);
        } else {  // chunk c: column c / 8, K slice 8 (c % 8) .. +7
            const int j = c >> 3, ch = c & 7;
            dst = sb + kcol_chunk(j, ch);
            n = n0 + j < N ? min(max(K - (k0 + 8 * ch), 0), 8) : 0;
            src = B + (n > 0 ? (n0 + j) * ldb + k0 + 8 * ch : 0);
        }
        if (b_vec) {
            pg_cp_async<16>(dst, src, 2 * n);
        } else {
            const uint4 v = load8(src, n, false);
            asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(v.x), "r"(v.y), "r"(v.z),
                         "r"(v.w)
                         : "memory");
        }
    }
}

// Window staging of B's part of a stage (N-contiguous B, rows not 16-byte aligned): row k of
// K step [k0, k0 + 64) of the strip n0 goes to sb + 80 k as the five aligned chunks from the
// one holding its first element; bytes past the strip's last column (or past N) and rows past
// K are zero-filled by the copies' source size. The bytes before the first element (up to 14)
// lie in the same aligned 16-byte chunk as it (the previous strip's columns, the previous
// row's tail or padding, or, for row 0 of strip 0, bytes before B in the same chunk), so no
// copy can fault whatever the allocator; they are never read back. B is element-aligned (2
// bytes), as every rung assumes: the offsets are even.
__device__ __forceinline__ void stage_b_win(uint32_t sb, const uint16_t* __restrict__ B, int ldb, int N, int K,
                                            int n0, int k0, int lane) {
    const int cols = min(N - n0, kBN);
#pragma unroll
    for (int q = 0; q < kStepK * 5 / 32; ++q) {  // 10 chunks a lane
        const int c = lane + 32 * q;
        const int k = c / 5, i = c - 5 * k;
        const bool kin = k0 + k < K;
        const uintptr_t first = reinterpret_cast<uintptr_t>(B + (long long)(kin ? k0 + k : 0) * ldb + n0);
        const uintptr_t at = (first & ~uintptr_t(15)) + 16 * i;
        const long long left = static_cast<long long>(first + 2 * cols) - static_cast<long long>(at);
        const int valid = kin ? static_cast<int>(min(max(left, 0LL), 16LL)) : 0;
        pg_cp_async<16>(sb + k * kWinRow + 16 * i, reinterpret_cast<const void*>(at & ~uintptr_t(15)), valid);
    }
}

// Columns 4g .. 4g+3 of a window row (row base `row`, shared; its first element `off` bytes in),
// as two words: three aligned word reads and a funnel shift by half a word when `off` is not a
// multiple of 4.
__device__ __forceinline__ uint2 win_read(uint32_t row, uint32_t off) {
    const uint32_t at = row + (off & ~3u);
    uint32_t w0, w1, w2;
    asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(w0) : "r"(at) : "memory");
    asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(w1) : "r"(at + 4) : "memory");
    asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(w2) : "r"(at + 8) : "memory");
    const uint32_t sh = (off & 2u) * 8u;
    return make_uint2(__funnelshift_r(w0, w1, sh), __funnelshift_r(w1, w2, sh));
}

// Where element (row, k) of a staged A step is, in halves from the stage's A part: v1's padded
// rows, or (kCompact) 64-half rows with 16-byte chunk c of row r at c ^ r (8 rows: the rows a
// fragment read spans fall in other banks).
template <bool kCompact>
__device__ __forceinline__ int a_at(int row, int k) {
    if constexpr (kCompact)
        return row * kStepK + ((((k >> 3) ^ (row & 7)) << 3) | (k & 7));
    else
        return row * kAStride + k;
}

// An M-contiguous A's step (columns of 8 NT halves, one a k) as a lane holds it between its
// loads and its stores into the stage: chunks of 8 rows of one k, lane + 32 i of them.
template <int NT>
struct ACols {
    static constexpr int kChunks = NT * kStepK;  // 8-row chunks of a step
    uint32_t h[kChunks / 32][8];
};
template <int NT>
__device__ __forceinline__ void load_a_cols(ACols<NT>& x, const uint16_t* __restrict__ A, int lda, int rows, int k0,
                                            int K, int lane, bool a_vec) {
#pragma unroll
    for (int i = 0; i < ACols<NT>::kChunks / 32; ++i) {
        const int c = 32 * i + lane;
        const int kk = c / NT, ih = (c % NT) * 8;
        const int n = k0 + kk < K ? rows - ih : 0;
        load8_col(x.h[i], A + (n > 0 ? ih + (k0 + kk) * lda : 0), n, a_vec);
    }
}
template <int NT, bool kCompact>
__device__ __forceinline__ void store_a_cols(uint16_t* sa, const ACols<NT>& x, int lane) {
#pragma unroll
    for (int i = 0; i < ACols<NT>::kChunks / 32; ++i) {
        const int c = 32 * i + lane;
        const int kk = c / NT, ih = (c % NT) * 8;
#pragma unroll
        for (int e = 0; e < 8; ++e) sa[a_at<kCompact>(ih + e, kk)] = static_cast<uint16_t>(x.h[i][e]);
    }
}

// Start filling A's part of a stage: rows 0 .. 8*NT-1 (rows >= `rows` zero) and K step
// [k0, k0 + 64) into sa at a_at<kCompact>(row, k).
template <int NT, bool kCompact>
__device__ __forceinline__ void stage_a(uint16_t* sa, const uint16_t* __restrict__ A, int lda, int rows, int k0,
                                        int K, int lane, bool a_vec) {
    constexpr int kRows = 8 * NT;
    if constexpr (kAKContig) {  // rows of 64 halves: 8 chunks of 8 per row
        constexpr int kChunks = kRows * 8;
#pragma unroll
        for (int c0 = 0; c0 < kChunks; c0 += 32) {
            const int c = c0 + lane;
            const int row = c >> 3, kc = (c & 7) * 8;
            const int n = row < rows ? min(max(K - (k0 + kc), 0), 8) : 0;
            const uint16_t* p = A + (n > 0 ? row * lda + k0 + kc : 0);
            if (a_vec) {
                pg_cp_async<16>(sa + a_at<kCompact>(row, kc), p, 2 * n);
            } else {
                *reinterpret_cast<uint4*>(sa + a_at<kCompact>(row, kc)) = load8(p, n, false);
            }
        }
    } else {  // columns of kRows halves: chunks of 8 rows of one k, transposed by plain stores
        ACols<NT> h;
        load_a_cols<NT>(h, A, lda, rows, k0, K, lane, a_vec);
        store_a_cols<NT, kCompact>(sa, h, lane);
    }
}

// The mma.sync of one step (v1's fragments, B read from stage sb, A from sa).
// win_off[r] (window staging): the offset in its window of row 2t + (r & 1) + 8 (r >> 1) of
// every 16-row slice (the same for every step and slice: 16 rows of B are 32 ldb bytes, a
// multiple of 16, and a strip starts 64 n0/32 bytes in).
template <int NT, bool kWin>
__device__ __forceinline__ void mma_step(float (&acc)[2][NT][4], uint32_t sb, const uint32_t* sa32, int lane,
                                         const uint32_t (&win_off)[4]) {
    const int g = lane >> 2, t = lane & 3;
    if constexpr (!kBNContig) {
        // bw[x][h][c] = halves 16t + 8c .. +7 of column 16x + g + 8h
        uint4 bw[2][2][2];
#pragma unroll
        for (int x = 0; x < 2; ++x)
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const uint32_t at = sb + kcol_chunk(16 * x + g + 8 * h, 2 * t + c);
                    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                                 : "=r"(bw[x][h][c].x), "=r"(bw[x][h][c].y), "=r"(bw[x][h][c].z), "=r"(bw[x][h][c].w)
                                 : "r"(at) : "memory");
                }
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
        // br[ss][r] = columns 4g .. +3 of row 16ss + {2t, 2t+1, 2t+8, 2t+9}[r]
        uint2 br[4][4];
#pragma unroll
        for (int ss = 0; ss < 4; ++ss)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int k = 16 * ss + 2 * t + (r & 1) + 8 * (r >> 1);
                if constexpr (kWin) {
                    br[ss][r] = win_read(sb + k * kWinRow, win_off[r] + 8 * g);
                } else {
                    const uint32_t at = sb + nrow_chunk(k, g >> 1) + (g & 1) * 8;
                    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(br[ss][r].x), "=r"(br[ss][r].y) : "r"(at) : "memory");
                }
            }
#pragma unroll
        for (int ss = 0; ss < 4; ++ss) {
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                // halves 16ss + 2t (+1) and 16ss + 2t + 8 (+1) of staged row g + 8nt
                uint32_t b0, b1;
                if constexpr (Ring<kWin, NT>::kCompactA) {
                    b0 = sa32[a_at<true>(g + 8 * nt, 16 * ss + 2 * t) >> 1];
                    b1 = sa32[a_at<true>(g + 8 * nt, 16 * ss + 2 * t + 8) >> 1];
                } else {
                    const uint32_t* row = sa32 + (g + 8 * nt) * (kAStride / 2) + 8 * ss + t;
                    b0 = row[0], b1 = row[4];
                }
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

// Sum the warps' partial tiles of the strip n0 (red: kWarps tiles of kBM x kRedStride floats)
// in warp order (the same bits every run) and store them: consecutive threads along C's
// contiguous dimension.
__device__ __forceinline__ void store_strip(const float* red, int rows, int m0, int n0, int N, float alpha,
                                            float beta, OutT* __restrict__ C, int ldc) {
#pragma unroll
    for (int e = threadIdx.x; e < kBM * kBN; e += kThreads) {
        const int i = PG_COL_MAJOR ? e % kBM : e / kBN;
        const int j = PG_COL_MAJOR ? e / kBM : e % kBN;
        if (i >= rows || n0 + j >= N) continue;
        float sum = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) sum += red[w * kRedFloats + i * kRedStride + j];
        OutT* p = PG_COL_MAJOR ? C + (m0 + i) + (long long)(n0 + j) * ldc : C + (long long)(m0 + i) * ldc + (n0 + j);
        float v = alpha * sum;
        if (beta != 0.f) v = fmaf(beta, load_out(p), v);
        store_out(p, v);
    }
}

// What a split build (PG_SPLIT) needs to add up a strip's K-slices once they are all stored:
// the tiles' arrival counters, slice 0 of the workspace and the destination (split_k.cuh).
struct SplitOut {
#if PG_SPLIT
    unsigned int* count;
    const float* w;
    long long w_split;
    void* d;
    long long d_rs, d_cs;
    float alpha, beta;
    int d_half;
#endif
};

// A split build's strip n0 is stored in its slice of the workspace: the last slice to arrive
// adds them all into the destination (nothing to do in other builds).
__device__ __forceinline__ void finish_strip(const SplitOut& so, int rows, int m0, int n0, int N, int ldc) {
#if PG_SPLIT
    const int tiles_n = (N + kBN - 1) / kBN;
    pg_split_fixup(0, kThreads, threadIdx.x, so.count + blockIdx.y * tiles_n + n0 / kBN, gridDim.z, so.w,
                   PG_COL_MAJOR ? 1 : ldc, PG_COL_MAJOR ? ldc : 1, so.w_split, m0, n0, rows, min(kBN, N - n0), so.d,
                   so.d_rs, so.d_cs, so.alpha, so.beta, so.d_half);
#endif
}

// The threadblock's strips (blockIdx.x, + gridDim.x, ...) with NT n8 tiles (rows <= 8 * NT):
// each warp computes its share of K for one strip after another through one ring, so the
// copies of the next strip's first steps are in flight while the block sums and stores the
// last one (a block per strip would drain its ring and start cold every 32 columns).
template <int NT, bool kWin>
__device__ __forceinline__ void walk_strips(const uint16_t* __restrict__ A, int lda, const uint16_t* __restrict__ B,
                                            int ldb, int N, int K, int rows, int m0, unsigned char* smem, int warp,
                                            int lane, bool a_vec, bool b_vec, float alpha, float beta,
                                            OutT* __restrict__ C, int ldc, const SplitOut& so) {
    using R = Ring<kWin, NT>;
    constexpr int kStages = R::kStages, kStageBytes = R::kStageBytes;
    const int g = lane >> 2, t = lane & 3;
    unsigned char* ring = smem + warp * R::kWarpBytes;
    const uint32_t ring_s = static_cast<uint32_t>(__cvta_generic_to_shared(ring));
    float* red = reinterpret_cast<float*>(smem + kRedOffset);
    // A window row's offset is the same in every strip (a strip starts 64 bytes after the last)
    uint32_t win_off[4] = {0u, 0u, 0u, 0u};
    if constexpr (kWin) {
#pragma unroll
        for (int r = 0; r < 4; ++r)
            win_off[r] = static_cast<uint32_t>(
                reinterpret_cast<uintptr_t>(B + (long long)(2 * t + (r & 1) + 8 * (r >> 1)) * ldb) & 15);
    }

    // This warp's steps: K steps warp, warp + kWarps, ... (`mine` of them) of each of the block's
    // strips in turn; step v (strip v / mine, its step v % mine) goes to stage v % kStages. The
    // copies of the first kStages - 1 steps start before any mma; each round starts the step
    // kStages - 1 ahead (into the stage the last round finished with), waits for its own and
    // computes it.
    const int strips = (N + kBN - 1) / kBN;
    const int walked = (int)blockIdx.x < strips ? (strips - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x : 0;
    const int steps = (K + kStepK - 1) / kStepK;
    const int mine = steps > warp ? (steps - warp + kWarps - 1) / kWarps : 0;
    const int total = mine * walked;
    // An M-contiguous A (a transposed small operand) is read by plain loads, not cp.async: in
    // the loop its step is loaded into registers when the step is issued and stored into the
    // stage after this round's mma, so the loads' latency hides behind the mma and the wait
    // (stored at once, it stalled every round: 512 x 2 x 500000 nn ran at 0.8 of its nt twin).
    ACols<NT> a_next;
    bool a_held = false;
    auto issue = [&](int v, bool defer_a) {
        if (v < total) {
            const int j = v / mine, u = v - j * mine;
            const int st = (v % kStages) * kStageBytes;
            const int n0 = ((int)blockIdx.x + j * (int)gridDim.x) * kBN;
            const int k0 = (warp + u * kWarps) * kStepK;
            if constexpr (kWin)
                stage_b_win(ring_s + st, B, ldb, N, K, n0, k0, lane);
            else
                stage_b(ring_s + st, B, ldb, N, K, n0, k0, lane, b_vec);
            if (!kAKContig && defer_a) {
                load_a_cols<NT>(a_next, A, lda, rows, k0, K, lane, a_vec);
                a_held = true;
            } else {
                stage_a<NT, R::kCompactA>(reinterpret_cast<uint16_t*>(ring + st + R::kBBytes), A, lda, rows, k0, K,
                                          lane, a_vec);
            }
        }
        pg_cp_async_commit();  // an empty group past the end keeps the count the wait below relies on
    };
#pragma unroll
    for (int v = 0; v < kStages - 1; ++v) issue(v, false);
    for (int j = 0; j < walked; ++j) {
        float acc[2][NT][4];
#pragma unroll
        for (int x = 0; x < 2; ++x)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[x][nt][e] = 0.f;
        for (int u = 0; u < mine; ++u) {
            const int v = j * mine + u;
            issue(v + kStages - 1, true);
            pg_cp_async_wait<kStages - 1>();  // step v's group has landed
            __syncwarp();
            const int st = (v % kStages) * kStageBytes;
            mma_step<NT, kWin>(acc, ring_s + st, reinterpret_cast<const uint32_t*>(ring + st + R::kBBytes), lane,
                               win_off);
            if (!kAKContig && a_held) {  // step v + kStages - 1's A, into the stage step v - 1 left
                const int sn = ((v + kStages - 1) % kStages) * kStageBytes;
                store_a_cols<NT, R::kCompactA>(reinterpret_cast<uint16_t*>(ring + sn + R::kBBytes), a_next, lane);
                a_held = false;
            }
            __syncwarp();  // every lane is done reading stage v % kStages before it is refilled,
                           // and the A stored above is there for every lane
        }

        // Partial tile: accumulator (x, nt) holds rows i = 8nt + 2t + {0, 1} (c0/c1 and c2/c3)
        // of columns ja (c0, c1) and jb (c2, c3); a warp with no K step of its own adds zeros.
        float* mine_red = red + warp * kRedFloats;
#pragma unroll
        for (int x = 0; x < 2; ++x) {
            const int ja = kBNContig ? 4 * g + 2 * x : 16 * x + g;
            const int jb = kBNContig ? ja + 1 : ja + 8;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const int i = 8 * nt + 2 * t;
                mine_red[i * kRedStride + ja] = acc[x][nt][0];
                mine_red[(i + 1) * kRedStride + ja] = acc[x][nt][1];
                mine_red[i * kRedStride + jb] = acc[x][nt][2];
                mine_red[(i + 1) * kRedStride + jb] = acc[x][nt][3];
            }
        }
        __syncthreads();
        const int n0 = ((int)blockIdx.x + j * (int)gridDim.x) * kBN;
        store_strip(red, rows, m0, n0, N, alpha, beta, C, ldc);
        finish_strip(so, rows, m0, n0, N, ldc);
        __syncthreads();  // the partial tiles are read before the next strip's overwrite them
    }
    pg_cp_async_wait<0>();
}

}  // namespace sk2_f16

extern "C" __global__ void __launch_bounds__(sk2_f16::kThreads, 1)
skinny_v2_f16(int M, int N, int K, float alpha, const pg_half* __restrict__ A, int lda, const pg_half* __restrict__ B,
              int ldb, float beta, void* __restrict__ Cv, int ldc PG_BATCH_PARAMS PG_SPLIT_PARAMS)
{
    using namespace sk2_f16;
    extern __shared__ __align__(16) unsigned char smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int m0 = blockIdx.y * kBM;
    const int rows = min(kBM, M - m0);
    OutT* C = reinterpret_cast<OutT*>(Cv);
    PG_BATCH_SEEK(A, B, C);  // blockIdx.z: a matrix of the batch, or (PG_SPLIT) a K-slice
    SplitOut so;
#if PG_SPLIT
    static_assert(PG_BATCH && PG_OUT_F32, "PG_SPLIT: the K-slices are a batch of fp32 partial tiles");
    K = pg_split_slice_k(K, kStepK);
    so = SplitOut{pg_split_count, C - blockIdx.z * pg_batch_c, pg_batch_c, pg_split_d, pg_split_d_rs,
                  pg_split_d_cs, pg_split_alpha, pg_split_beta, pg_split_d_half};
#endif
    const uint16_t* a = reinterpret_cast<const uint16_t*>(A) + (kAKContig ? (long long)m0 * lda : m0);
    const uint16_t* b = reinterpret_cast<const uint16_t*>(B);
    // PG_VEC=0 (some operand unaligned): each of A and B still takes 16-byte copies when it is
    // aligned itself (e.g. the matrix of a GEMV whose vector has an odd length).
    const bool a_vec = PG_VEC || ((reinterpret_cast<uintptr_t>(a) & 15) == 0 && lda % 8 == 0);
    const bool b_vec = PG_VEC || ((reinterpret_cast<uintptr_t>(b) & 15) == 0 && ldb % 8 == 0);
    if (kHasWin && !b_vec) {
        if constexpr (kHasWin) {
            if (rows > 8)
                walk_strips<2, true>(a, lda, b, ldb, N, K, rows, m0, smem, warp, lane, a_vec, b_vec, alpha, beta, C, ldc, so);
            else
                walk_strips<1, true>(a, lda, b, ldb, N, K, rows, m0, smem, warp, lane, a_vec, b_vec, alpha, beta, C, ldc, so);
        }
    } else if (rows > 8) {
        walk_strips<2, false>(a, lda, b, ldb, N, K, rows, m0, smem, warp, lane, a_vec, b_vec, alpha, beta, C, ldc, so);
    } else {
        walk_strips<1, false>(a, lda, b, ldb, N, K, rows, m0, smem, warp, lane, a_vec, b_vec, alpha, beta, C, ldc, so);
    }
}
