// Split-K (PG_SPLIT=1) helpers of common.cuh, which includes this file: every rung with a
// split build reaches it through common.cuh.
#pragma once

// ======================================================================================
// Section: split-K reduced in the same launch (PG_SPLIT, with PG_BATCH)
// PG_SPLIT=1: the batch on the grid is the K-slices of one product. Each threadblock writes
// its slice's fp32 (PG_SPLIT_F64: fp64) partial tile into the workspace (the kernel's C, alpha 1, beta 0) as a
// batch member would and counts it on the tile's arrival counter (pg_split_count[tile]);
// the slices of a tile are then added in slice order and written as
//     D = pg_split_alpha * sum_s W_s + pg_split_beta * D
// (D: float, or pg_half when pg_split_d_half != 0; double throughout in a float64 rung's build, PG_SPLIT_F64), by one of two schedules:
//   * pg_split_fixup: the last block to finish a tile reduces it (any grid);
//   * pg_split_reduce_all, for a grid whose blocks are all resident at once (the TMA rungs'
//     persistent grid; others when the host says so, pg_split_resident; the host launches
//     such a grid cooperatively, so it runs whole or not at all): every block, once
//     its own tiles are stored, takes bands of the output (the tiles cut into as many bands
//     as there are blocks) and reduces each when its tile's slices are all in, so no single
//     SM reads a whole tile's slices (one SM reads them at a few tens of GB/s).
// Tiles are counted in row-major order of the kernel's tile grid (tile = tm * tiles_n + tn).
// Why: the separate reduction kernel cost a second launch per call, which on the host is as
// much as the whole call of a small product. The sum's order never depends on which slice
// arrives last, so every run gives the same bits (no atomics on the data). The counters
// (pg_split_count: arrivals per tile, then bands done per tile) start at zero and the
// reduction puts them back to zero, so the next launch on the same stream finds them ready.
// Parameters after the batch ones: PG_SPLIT_PARAMS.
// ======================================================================================
// `threads` threads (whole warps) meet at named barrier `bar`: bar.sync, and an OR of `v`.
__device__ __forceinline__ void pg_bar_sync(int bar, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(bar), "r"(threads) : "memory");
}
__device__ __forceinline__ int pg_bar_or(int bar, int threads, int v) {
    int r;
    asm volatile(
        "{\n .reg .pred p, q;\n setp.ne.s32 p, %1, 0;\n bar.red.or.pred q, %2, %3, p;\n"
        " selp.s32 %0, 1, 0, q;\n}\n"
        : "=r"(r)
        : "r"(v), "r"(bar), "r"(threads)
        : "memory");
    return r;
}

// How a split-K slice is published (pg_split_arrive): PG_SPLIT_FENCES=0 (default): the group
// meets at its barrier, then its first thread alone releases the group's stores with the
// arrival (atom.add.acq_rel at gpu scope: the barrier orders the other threads' stores before
// it, and the acquire half lets the last slice's block read the others). =1: every thread
// fences its own stores first (__threadfence), kept for comparison: under the main loops'
// traffic each such fence waits 1-3 us for its stores (h100_trace_items_fp16.json), and the
// single release is 2.5-3.3% faster at 512x512x16384 (docs/benchmarks/split_sync_ab.py).
#ifndef PG_SPLIT_FENCES
#define PG_SPLIT_FENCES 0
#endif
#ifndef PG_SPLIT
#define PG_SPLIT 0
#endif
#ifndef PG_SPLIT_LINES  // runs of four elements a thread reduces at once (1, 2 and 4 measured alike: docs/benchmarks)
#define PG_SPLIT_LINES 2
#endif
#ifndef PG_SPLIT_F64  // 1: a float64 rung's split (its source defines it): workspace, sums, alpha, beta and D in double
#define PG_SPLIT_F64 0
#endif
#if PG_SPLIT
#if PG_SPLIT_F64
typedef double pg_split_t;
typedef double2 pg_split_v;  // 16 bytes of the workspace
__device__ __forceinline__ void pg_split_add(pg_split_t* acc, const double2& v) { acc[0] += v.x; acc[1] += v.y; }
#else
typedef float pg_split_t;
typedef float4 pg_split_v;
__device__ __forceinline__ void pg_split_add(pg_split_t* acc, const float4& v) {
    acc[0] += v.x; acc[1] += v.y; acc[2] += v.z; acc[3] += v.w;
}
#endif
constexpr int kPgSplitVec = 16 / static_cast<int>(sizeof(pg_split_t));  // elements of one 16-byte workspace load
#define PG_SPLIT_PARAMS                                                                     \
    , unsigned int *pg_split_count, void *pg_split_d, long long pg_split_d_rs,              \
        long long pg_split_d_cs, pg_split_t pg_split_alpha, pg_split_t pg_split_beta, int pg_split_d_half, \
        int pg_split_resident
// D's elements: pg_split_t, or (pg_split_d_half != 0, rungs with PG_HALF_TYPES) pg_half.
__device__ __forceinline__ pg_split_t pg_split_load(const void* d, long long at, int half) {
#ifdef PG_HALF_TYPES
    if (half) return pg_half2float(static_cast<const pg_half*>(d)[at]);
#endif
    return static_cast<const pg_split_t*>(d)[at];
}
__device__ __forceinline__ void pg_split_store(void* d, long long at, int half, pg_split_t v) {
#ifdef PG_HALF_TYPES
    if (half) {
        static_cast<pg_half*>(d)[at] = pg_float2half_rn(v);
        return;
    }
#endif
    static_cast<pg_split_t*>(d)[at] = v;
}

// The sum of the slices of one region (rows x cols at row0, col0 of the kernel's M x N) of
// the workspace, written to D by `threads` threads (`rank` in [0, threads)). W is slice 0 of
// the workspace (w_rs, w_cs: element strides; w_split: elements from one slice to the next).
// Not inlined: its registers are its own, not added to the rung's main loop's budget.
__device__ __noinline__ void pg_split_reduce_region(int threads, int rank, int splits,
                                                       const pg_split_t* W, long long w_rs,
                                                       long long w_cs, long long w_split,
                                                       int row0, int col0, int rows, int cols,
                                                       void* D, long long d_rs, long long d_cs,
                                                       pg_split_t alpha, pg_split_t beta, int d_half) {
    // Threads walk the workspace's contiguous dimension, four elements at a time where the
    // region allows, PG_SPLIT_LINES runs of four per thread at once, every slice's loads issued
    // before the sums: one block reads the region, so its bytes in flight set the pace.
    const bool along_cols = w_cs == 1;
    const int inner = along_cols ? cols : rows, outer = along_cols ? rows : cols;
    const long long w_outer = along_cols ? w_rs : w_cs;
    const int inner0 = along_cols ? col0 : row0;
    constexpr int kV = kPgSplitVec;
    const int vec = (inner % kV == 0 && inner0 % kV == 0 && w_outer % kV == 0 && w_split % kV == 0 &&
                     (reinterpret_cast<unsigned long long>(W) & 15) == 0) ? kV : 1;
    const int per_line = inner / vec;
    const int total = outer * per_line;
    constexpr int kLines = PG_SPLIT_LINES;
    for (int t0 = rank; t0 < total; t0 += threads * kLines) {
        long long at_w[kLines], at_d[kLines];
        bool live[kLines];
#pragma unroll
        for (int q = 0; q < kLines; ++q) {
            const int t = t0 + q * threads;
            live[q] = t < total;
            const int o = live[q] ? t / per_line : 0, in = live[q] ? (t - o * per_line) * vec : 0;
            const long long i = row0 + (along_cols ? o : in), j = col0 + (along_cols ? in : o);
            at_w[q] = i * w_rs + j * w_cs;
            at_d[q] = i * d_rs + j * d_cs;
        }
        pg_split_t acc[kLines][4];
#pragma unroll
        for (int q = 0; q < kLines; ++q) acc[q][0] = acc[q][1] = acc[q][2] = acc[q][3] = 0;
        if (vec == kV) {
            int s = 0;
            for (; s + 8 <= splits; s += 8) {
                pg_split_v v[kLines][8];
#pragma unroll
                for (int q = 0; q < kLines; ++q)
#pragma unroll
                    for (int r = 0; r < 8; ++r)
                        v[q][r] = live[q] ? __ldcg(reinterpret_cast<const pg_split_v*>(W + at_w[q] + (s + r) * w_split))
                                          : pg_split_v{};
#pragma unroll
                for (int q = 0; q < kLines; ++q)
#pragma unroll
                    for (int r = 0; r < 8; ++r) pg_split_add(acc[q], v[q][r]);
            }
            for (; s < splits; ++s) {
#pragma unroll
                for (int q = 0; q < kLines; ++q) {
                    if (!live[q]) continue;
                    pg_split_add(acc[q], __ldcg(reinterpret_cast<const pg_split_v*>(W + at_w[q] + s * w_split)));
                }
            }
        } else {
            for (int s = 0; s < splits; ++s)
#pragma unroll
                for (int q = 0; q < kLines; ++q)
                    if (live[q]) acc[q][0] += __ldcg(W + at_w[q] + s * w_split);
        }
        const long long d_step = along_cols ? d_cs : d_rs;  // the next element along the inner dimension
#pragma unroll
        for (int q = 0; q < kLines; ++q) {
            if (!live[q]) continue;
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                if (e == vec) break;
                const long long at = at_d[q] + e * d_step;
                pg_split_t v = alpha * acc[q][e];
                if (beta != 0) v += beta * pg_split_load(D, at, d_half);
                pg_split_store(D, at, d_half, v);
            }
        }
    }
}

// This thread's part of a slice's partial tile is stored: once every thread of the group
// (`threads` at named barrier `bar`) is there, the tile's arrival counter counts the slice.
// Returns (to every thread of the group) whether this was the tile's last slice.
__device__ __forceinline__ int pg_split_arrive(int bar, int threads, int rank, unsigned int* count,
                                               int splits) {
#if PG_SPLIT_FENCES
    __threadfence();             // this thread's partial sums are visible to every block ...
    pg_bar_sync(bar, threads);   // ... and every thread's, before the tile's arrival counts
    int last = 0;
    if (rank == 0) last = atomicAdd(count, 1u) == static_cast<unsigned int>(splits - 1);
#else
    pg_bar_sync(bar, threads);   // every thread's partial sums stored (CTA order) ...
    int last = 0;
    if (rank == 0) {             // ... released to the GPU with the arrival; the last arrival acquires the others'
        unsigned int before;
        asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;\n" : "=r"(before) : "l"(count) : "memory");
        last = before == static_cast<unsigned int>(splits - 1);
    }
#endif
    return pg_bar_or(bar, threads, last);
}

// Block until the tile's `splits` slices have all arrived (the group's rank 0 polls the
// counter with acquire loads; the barrier then lets the whole group read the slices). Only
// for grids whose blocks are all resident at once: the slices come from other blocks.
__device__ __forceinline__ void pg_split_wait(int bar, int threads, int rank, const unsigned int* count,
                                              int splits) {
    if (rank == 0) {
        unsigned int seen;
        for (;;) {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(seen) : "l"(count) : "memory");
            if (seen >= static_cast<unsigned int>(splits)) break;
            __nanosleep(64);
        }
    }
    pg_bar_sync(bar, threads);
}

// Every block of a resident grid (`bid` of `nblocks`), once its own slices are counted:
// reduce bands of the bm x bn tiles of the M x N output, as described above. count: arrivals
// per tile, then bands done per tile.
__device__ __forceinline__ void pg_split_reduce_all(int bar, int threads, int rank, int bid,
                                                    int nblocks, unsigned int* count, int M, int N,
                                                    int bm, int bn, int splits, const pg_split_t* W,
                                                    long long w_rs, long long w_cs,
                                                    long long w_split, void* D, long long d_rs,
                                                    long long d_cs, pg_split_t alpha, pg_split_t beta,
                                                    int d_half) {
    const int tiles_m = CEIL_DIV(M, bm), tiles_n = CEIL_DIV(N, bn), tiles = tiles_m * tiles_n;
    const bool by_rows = w_cs == 1;  // bands across the workspace's contiguous dimension
    const int extent = by_rows ? bm : bn;
    const int bands = max(1, min(nblocks / tiles, extent / 8));  // bands of >= 8 lines
    unsigned int* const done = count + tiles;
    for (int chunk = bid; chunk < tiles * bands; chunk += nblocks) {
        const int tile = chunk / bands, band = chunk - tile * bands;
        const int m0 = (tile / tiles_n) * bm, n0 = (tile % tiles_n) * bn;
        const int rows = min(bm, M - m0), cols = min(bn, N - n0);
        const int lines = by_rows ? rows : cols, per_band = CEIL_DIV(lines, bands);
        const int l0 = band * per_band, l1 = min(lines, l0 + per_band);
        pg_split_wait(bar, threads, rank, count + tile, splits);
        if (l0 < l1) {
            if (by_rows)
                pg_split_reduce_region(threads, rank, splits, W, w_rs, w_cs, w_split, m0 + l0, n0,
                                       l1 - l0, cols, D, d_rs, d_cs, alpha, beta, d_half);
            else
                pg_split_reduce_region(threads, rank, splits, W, w_rs, w_cs, w_split, m0, n0 + l0,
                                       rows, l1 - l0, D, d_rs, d_cs, alpha, beta, d_half);
        }
        if (rank == 0 && atomicAdd(done + tile, 1u) == static_cast<unsigned int>(bands - 1)) {
            count[tile] = 0u;  // every band's block is past its wait: the counters are
            done[tile] = 0u;   // ready for the next launch
        }
    }
}

// Called by every thread of the group that wrote one slice's partial tile (rows x cols at
// row0, col0) once its stores are issued: the last slice to arrive reduces the whole tile
// and puts its counter back to zero.
__device__ __forceinline__ void pg_split_fixup(int bar, int threads, int rank, unsigned int* count,
                                               int splits, const pg_split_t* W, long long w_rs,
                                               long long w_cs, long long w_split, int row0,
                                               int col0, int rows, int cols, void* D,
                                               long long d_rs, long long d_cs, pg_split_t alpha,
                                               pg_split_t beta, int d_half) {
    if (!pg_split_arrive(bar, threads, rank, count, splits)) return;
#if PG_SPLIT_FENCES
    __threadfence();  // the other slices' sums (published before their arrivals) are read next
#endif
    pg_split_reduce_region(threads, rank, splits, W, w_rs, w_cs, w_split, row0, col0, rows, cols,
                           D, d_rs, d_cs, alpha, beta, d_half);
    if (rank == 0) *count = 0u;  // ready for the next launch on this stream
}

// Rungs that cut K into slices themselves (variants.json "split_step": the skinny rungs, whose
// K is long and not always a multiple of a slice count): the launch passes the whole K and
// PG_BATCH_SEEK moves A and B to slice z's first element; slice z of gridDim.z is K elements
// [z ks, min(K, (z + 1) ks)), ks the slices' common length rounded up to `step` (a warp step:
// every slice but the last is whole steps, and each starts as aligned as the operand does).
// KernelSpec.split_slice (variants.py) computes the same ks. Returns this block's slice length.
__device__ __forceinline__ int pg_split_slice_k(int K, int step) {
    const int ks = CEIL_DIV(CEIL_DIV(K, static_cast<int>(gridDim.z)), step) * step;
    return min(ks, K - static_cast<int>(blockIdx.z) * ks);
}
#else
#define PG_SPLIT_PARAMS
#endif
