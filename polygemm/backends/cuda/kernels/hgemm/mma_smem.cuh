// The mma.sync rung's shared-memory tiles and their global -> shared movers: the swizzled
// tile of the aligned path (PG_VEC=1) and the padded, realigned one of the unaligned path.
#pragma once
#include "hgemm/mma_ptx.cuh"

namespace hgemm_v1 {

// ------------------------------------------------------------------------------------------
// Swizzled shared tile of kRows x kCols halves: element offset of 16-byte chunk `chunk` of
// row `row` (see the header for why this is conflict-free).
// ------------------------------------------------------------------------------------------
template <int kCols>
__device__ __forceinline__ int swizzle(int row, int chunk) {
    constexpr int kCpr = kCols / 8;  // chunks per row
    static_assert(kCpr == 4 || kCpr % 8 == 0, "tile rows must be 64 B or a multiple of 128 B");
    const int phys = (kCpr >= 8) ? (chunk ^ (row & 7)) : (chunk ^ ((row >> 1) & 3));
    return row * kCols + phys * 8;
}

// The layout the fragments are loaded from: the swizzled tile (PG_VEC=1) or, for PG_VEC=0,
// a padded one (row pitch kCols + 8 halves, one 16-byte chunk more than a row: RawTile).
// Padded rows are conflict-free for ldmatrix too: the pitch is 1 chunk mod 8, so the 8 rows
// of an 8x8 tile fall into 8 distinct 16-byte bank groups.
// Under PG_ROW_SPLIT, A's tile is aligned and swizzled while B's is padded.
constexpr bool kASwizzled = PG_VEC || PG_ROW_SPLIT;
constexpr bool kBSwizzled = PG_VEC;
template <int kCols, bool kSwizzled>
__device__ __forceinline__ int tile_offset(int row, int chunk) {
    if constexpr (kSwizzled)
        return swizzle<kCols>(row, chunk);
    else
        return row * (kCols + 8) + chunk * 8;
}
constexpr int kAPitch = kASwizzled ? kACols : kACols + 8;  // halves from one tile row to the next
constexpr int kBPitch = kBSwizzled ? kBCols : kBCols + 8;

// Global -> shared mover for one operand tile (kRows x kCols, cols contiguous in global
// memory with leading dimension ld). rows_left / cols_left: how many rows / cols of the tile
// lie inside the matrix (may exceed the tile; elements outside read as 0).
template <int kRows, int kCols>
struct TileMover {
    static constexpr int kCpr = kCols / 8;
    static constexpr int kChunks = kRows * kCpr;
    static constexpr int kVecIters = kChunks / kThreads;      // 16-byte chunks per thread
    static_assert(kChunks % kThreads == 0, "tile must split into whole chunks per thread");

    // Thread t owns chunks t, t + kThreads, ...: chunk column fixed, rows kRowStep apart.
    // kRowStep % 8 == 0 keeps row & 7 and hence the swizzled chunk the same for all of them.
    static constexpr int kRowStep = kThreads / kCpr;
    static_assert(kThreads % kCpr == 0 && (kVecIters == 1 || kRowStep % 8 == 0),
                  "thread -> chunk mapping must keep the swizzle phase");

    // PG_VEC=1: cp.async.cg 16 B per chunk.
    __device__ static __forceinline__ void issue_async(pg_half* s, const pg_half* g, int ld,
                                                       int rows_left, int cols_left, int tid) {
        const int row = tid / kCpr;
        const int ch = tid % kCpr;
        int n = cols_left - ch * 8;
        n = n > 8 ? 8 : n;
        const uint32_t dst = smem_addr(s + swizzle<kCols>(row, ch));
        const pg_half* src = g + row * ld + ch * 8;
#pragma unroll
        for (int i = 0; i < kVecIters; ++i) {
            const bool ok = row + i * kRowStep < rows_left && n > 0;
            // Chunks outside the matrix copy 0 bytes (zero fill) from g, an element inside it.
            cp_async16(dst + i * kRowStep * kCols * 2, ok ? src + i * kRowStep * ld : g,
                       ok ? 2 * n : 0);
        }
    }

    // PG_VEC=1 interior fast path: the whole tile lies inside the matrix, so every chunk is a
    // full unpredicated 16-byte copy. The per-thread source (first chunk) and shared offset are
    // computed once per kernel; chunk i is at src + i * kRowStep * ld and dst + i * kDstStep
    // (an immediate), so a copy costs one 64-bit add and the cp.async itself.
    // part(): chunks [kLo, kHi) only, so the copies of one K-tile can be spread over k16 steps.
    static constexpr int kDstStep = kRowStep * kCols * 2;  // bytes
    __device__ static __forceinline__ const pg_half* thread_src(const pg_half* g, int ld, int tid) {
        return g + (tid / kCpr) * ld + (tid % kCpr) * 8;
    }
    __device__ static __forceinline__ uint32_t thread_dst(int tid) {
        return 2 * swizzle<kCols>(tid / kCpr, tid % kCpr);
    }
    template <int kLo, int kHi>
    __device__ static __forceinline__ void issue_full(uint32_t dst, const pg_half* src,
                                                      int row_step) {
#pragma unroll
        for (int i = kLo; i < kHi; ++i)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst + i * kDstStep),
                         "l"(__cvta_generic_to_global(src + i * row_step))
                         : "memory");
    }
};

// PG_VEC=0 (any alignment): realigning mover. A tile row of kCols halves starts e = (address
// / 2) % 8 halves past a 16-byte boundary. Its aligned window of kCpr + 1 chunks (from the
// row start rounded down to 16 bytes) moves with full-width cp.async into a padded tile row
// (pitch kCols + 8 halves); later, while an earlier stage is multiplied, a realign pass
// shifts every row left by e halves in place (16-byte shared loads of chunks c and c+1, a
// word select and a funnel shift, a 16-byte store to chunk c), leaving the row's elements
// at its start, where the fragments are loaded from. The shift is the same for every row a
// thread touches, in every K-tile: rows kRowStep apart, and K-tile steps, move the address
// by multiples of 16 bytes. Bytes past the matrix edge are zero-filled by cp.async's
// src-size; bytes before a row's first element (in the same aligned 16-byte segment, hence
// inside the allocation) are read and shifted out.
// Output chunk o of a realigned row from its input chunks lo (same index) and hi (next): the
// 8 words lo:hi shifted down by e halves (q = e / 2 whole words, then a half word).
__device__ __forceinline__ void shift_chunk(const uint32_t (&lo)[4], const uint32_t (&hi)[4], int e,
                                            uint32_t (&o)[4]) {
    const int q = e >> 1;
    const uint32_t sh = (e & 1) * 16;
    const uint32_t r[8] = {lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]};
    uint32_t x[6], y[5];
#pragma unroll
    for (int i = 0; i < 6; ++i) x[i] = (q & 2) ? r[i + 2] : r[i];
#pragma unroll
    for (int i = 0; i < 5; ++i) y[i] = (q & 1) ? x[i + 1] : x[i];
#pragma unroll
    for (int i = 0; i < 4; ++i) o[i] = __funnelshift_r(y[i], y[i + 1], sh);
}

// kDown: the realign walks each lane's kRun contiguous chunks downwards, one per k16 step
// (realign_down), instead of the lanes of a row striding through it together (realign).
template <int kRows, int kCols, bool kDown = false>
struct RawTile {
    static constexpr int kCpr = kCols / 8;                   // output chunks per row
    static constexpr int kPitch = kCols + 8;                 // kCpr + 1 chunks
    static constexpr int kHalves = kRows * kPitch;
    static constexpr int kRowStep = kThreads / kCpr;         // copy mapping (as TileMover)
    static constexpr int kIters = kRows * kCpr / kThreads;   // main chunks per thread
    static constexpr int kRunsPerRow = kThreads / kRows;     // realign: lanes per row ...
    static constexpr int kRun = kCpr / kRunsPerRow;          // ... each realigning kRun chunks
    static constexpr int kRowsPerWarp = kRows / (kThreads / 32);
    static_assert(kThreads % kRows == 0 && kCpr % kRunsPerRow == 0, "realign mapping");
    static_assert(kRowsPerWarp >= 8 && kRowsPerWarp * kRunsPerRow == 32, "a warp realigns whole rows");
    static_assert(kRowStep % 8 == 0 || kIters == 1, "copy rows must share the 16-byte phase");
    // Bank groups: the pitch is 1 chunk mod 8, so 8 consecutive chunks of a row (main
    // copies), or one chunk of 8 consecutive rows (extra copies; realign: lanes l..l+7 take
    // rows l..l+7 of the same run), hit 8 distinct 16-byte bank groups.
    static_assert((kPitch / 8) % 8 == 1, "pitch must be 1 chunk mod 8");

    __device__ static __forceinline__ int shift(const pg_half* p) {
        return static_cast<int>((reinterpret_cast<uintptr_t>(p) >> 1) & 7);
    }

    // Per-thread constants of one operand, from the tile origin g of K-tile 0 (offsets in
    // elements from g; every function below takes the same g). Kept small (registers are
    // scarce); what the edge path needs besides is recomputed from tid.
    struct Thread {
        int src;        // main copies: window chunk tid % kCpr of row tid / kCpr
        int xsrc;       // extra chunk kCpr of row tid (tid < kRows)
        uint32_t run;   // realign: byte offset of this thread's first chunk in a stage
        int e_run;      // realign: the run row's phase (halves past a 16-byte boundary)
    };
    __device__ static __forceinline__ uint32_t main_dst(int tid) {
        return 2 * ((tid / kCpr) * kPitch + (tid % kCpr) * 8);
    }
    __device__ static __forceinline__ uint32_t extra_dst(int tid) {
        return 2 * ((tid < kRows ? tid : 0) * kPitch + kCpr * 8);
    }
    __device__ static __forceinline__ Thread init(const pg_half* g, int ld, int tid) {
        Thread t;
        const int row = tid / kCpr, ch = tid % kCpr;
        t.src = row * ld - shift(g + row * ld) + ch * 8;
        const int xr = tid < kRows ? tid : 0;
        t.xsrc = xr * ld - shift(g + xr * ld) + kCpr * 8;
        const int lane = tid & 31, warp = tid >> 5;
        const int run_row = warp * kRowsPerWarp + lane % kRowsPerWarp;
        const int j0 = lane / kRowsPerWarp;  // this lane's first chunk (see realign)
        t.e_run = shift(g + run_row * ld);
        t.run = 2 * (run_row * kPitch + (kDown ? j0 * kRun : j0) * 8);
        return t;
    }

    // Bytes of a chunk inside the matrix: chunk c of a row covers row elements
    // [8c - e, 8c + 8 - e); those at or past cols_left read as zero.
    __device__ static __forceinline__ int chunk_bytes(int cols_left, int e, int c) {
        const int n = 2 * (cols_left + e - 8 * c);
        return n < 0 ? 0 : (n > 16 ? 16 : n);
    }

    // Edge tiles: every chunk predicated (rows_left / cols_left as in TileMover). `off` is
    // the K-tile origin's element offset from K-tile 0's, `stage` a shared byte address.
    // Under PG_ROW_SPLIT, rows below row_lo read as zero too (B's leading rows).
    __device__ static __forceinline__ void issue(const Thread& t, const pg_half* g, uint32_t stage,
                                                 int off, int ld, int rows_left, int cols_left,
                                                 int tid, int row_lo = 0) {
        const int row = tid / kCpr, ch = tid % kCpr;
        const int nb = chunk_bytes(cols_left, shift(g + row * ld), ch);
        const uint32_t dst = stage + main_dst(tid);
#pragma unroll
        for (int i = 0; i < kIters; ++i) {
            const int ri = row + i * kRowStep;
            const int b = (ri < rows_left && !(PG_ROW_SPLIT && ri < row_lo)) ? nb : 0;
            // 0 bytes: nothing is read; the address stays 16-byte aligned.
            cp_async16(dst + i * kRowStep * kPitch * 2, g + (b ? t.src + off + i * kRowStep * ld : t.src), b);
        }
        issue_extra(t, g, stage, off, ld, rows_left, cols_left, tid, row_lo);
    }
    __device__ static __forceinline__ void issue_extra(const Thread& t, const pg_half* g,
                                                       uint32_t stage, int off, int ld,
                                                       int rows_left, int cols_left, int tid,
                                                       int row_lo = 0) {
        if (kRows == kThreads || tid < kRows) {
            const int b = (tid < rows_left && !(PG_ROW_SPLIT && tid < row_lo))
                              ? chunk_bytes(cols_left, shift(g + tid * ld), kCpr) : 0;
            cp_async16(stage + extra_dst(tid), g + (b ? t.xsrc + off : t.xsrc), b);
        }
    }
    // Interior tiles (rows_left >= kRows, cols_left >= kCols): main chunks [kLo, kHi) are
    // whole (chunk ch ends at row element 8 ch + 8 - e_main <= kCols).
    template <int kLo, int kHi>
    __device__ static __forceinline__ void issue_full(uint32_t dst, const pg_half* src,
                                                      int row_step) {
#pragma unroll
        for (int i = kLo; i < kHi; ++i)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(
                             dst + i * kRowStep * kPitch * 2),
                         "l"(__cvta_generic_to_global(src + i * row_step))
                         : "memory");
    }

    // Realign, in place, steps [kLo, kHi) of this thread's share of its row in stage `stage`.
    // Output chunk c needs input chunks c and c+1. One thread per row (kRunsPerRow == 1):
    // the thread walks the row upwards, reading chunk c+1 before it overwrites it. Several
    // lanes per row (the same warp): lane j0 of a row does chunks j0, j0 + kRunsPerRow, ...;
    // in step j the row's lanes read chunks [j R, j R + R] and, after a __syncwarp, write
    // [j R, j R + R), so nothing is overwritten before it is read.
    template <int kLo, int kHi>
    __device__ static __forceinline__ void realign(const Thread& t, uint32_t stage) {
        // All loads of the call first (they overlap), then the stores: step j reads
        // [j R, j R + R] and writes [j R, j R + R), so no step writes what a step of the same
        // call reads before it.
        constexpr int kN = kHi > kLo ? kHi - kLo : 1;
        if constexpr (kHi > kLo) {
            const int q = t.e_run >> 1;               // whole words
            const uint32_t sh = (t.e_run & 1) * 16;   // and a half word
            const uint32_t base = stage + t.run;
            uint32_t w[kN + 1][4];                    // one lane per row: chunks kLo .. kHi
            uint32_t v[kRunsPerRow == 1 ? 1 : kN][4]; // several: chunk j R + R of each step
#pragma unroll
            for (int j = 0; j < kN; ++j) {
                lds128(w[j], base + (kLo + j) * kRunsPerRow * 16);
                if (kRunsPerRow > 1) lds128(v[j], base + (kLo + j) * kRunsPerRow * 16 + 16);
            }
            if (kRunsPerRow == 1) lds128(w[kN], base + kHi * 16);
            if (kRunsPerRow > 1) __syncwarp();
#pragma unroll
            for (int j = 0; j < kN; ++j) {
                const uint32_t* hi = kRunsPerRow == 1 ? w[j + 1] : v[kRunsPerRow == 1 ? 0 : j];
                const uint32_t r[8] = {w[j][0], w[j][1], w[j][2], w[j][3], hi[0], hi[1], hi[2], hi[3]};
                uint32_t x[6], y[5], o[4];  // as shift_chunk (kept inline: the measured build)
#pragma unroll
                for (int i = 0; i < 6; ++i) x[i] = (q & 2) ? r[i + 2] : r[i];
#pragma unroll
                for (int i = 0; i < 5; ++i) y[i] = (q & 1) ? x[i + 1] : x[i];
#pragma unroll
                for (int i = 0; i < 4; ++i) o[i] = __funnelshift_r(y[i], y[i + 1], sh);
                sts128(base + (kLo + j) * kRunsPerRow * 16, o);
            }
        }
    }

    // kDown realign, step P of kRun (one chunk per call, P = 0 .. kRun-1 in order): this
    // lane's chunk kRun-1-P, from that input chunk and the one above it, carried in `hi`
    // from the previous step (step 0 loads it: the first chunk of the next lane's run, or
    // the window's extra chunk). 5 shared loads per 4 chunks (the strided walk needs 8).
    // Only the last step overwrites a chunk another lane reads (its step-0 `hi`), so only
    // it waits for the warp.
    template <int P>
    __device__ static __forceinline__ void realign_down(const Thread& t, uint32_t stage,
                                                        uint32_t (&hi)[4]) {
        static_assert(kDown && P >= 0 && P < kRun, "realign_down: steps 0 .. kRun-1");
        constexpr int c = kRun - 1 - P;
        const uint32_t base = stage + t.run;
        uint32_t lo[4], o[4];
        if (P == 0) lds128(hi, base + kRun * 16);
        lds128(lo, base + c * 16);
        shift_chunk(lo, hi, t.e_run, o);
        if (P == kRun - 1) __syncwarp();
        sts128(base + c * 16, o);
#pragma unroll
        for (int i = 0; i < 4; ++i) hi[i] = lo[i];
    }
};

using AMover = TileMover<kARows, kACols>;
using BMover = TileMover<kBRows, kBCols>;
#if !PG_VEC
using ARaw = RawTile<kARows, kACols>;
using BRaw = RawTile<kBRows, kBCols, PG_ROW_SPLIT>;
// PG_VEC=0 shared memory: kRawStages stages (copied into, realigned, multiplied); A's is a
// swizzled unpadded tile under PG_ROW_SPLIT.
constexpr int kRawStages = 4;
constexpr int kRawAHalves = PG_ROW_SPLIT ? kAStage : ARaw::kHalves;
constexpr int kRawSmemBytes = kRawStages * (kRawAHalves + BRaw::kHalves) * 2;
static_assert(kRawSmemBytes <= 227 * 1024, "PG_VEC=0 shared memory above the sm_90 limit");
#endif

}  // namespace hgemm_v1
