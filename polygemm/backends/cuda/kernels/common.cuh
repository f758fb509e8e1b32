// common.cuh: helpers shared by the SGEMM ladders (sgemm_cm/, sgemm_rm/).
// Included by every rung as  #include "common.cuh"  (the backend passes this folder
// with -I). Rules for editors: only ADD, in your own clearly separated section; never
// rename or change what is already here (other rungs depend on it).
#pragma once

// ======================================================================================
// Section: shared basics (both ladders)
// ======================================================================================

#ifndef CEIL_DIV
#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
#endif

// Macro defaults promised by the kernel contract (README.md): predicated rungs see the
// values the backend passes with -D, everything else these.
#ifndef PG_TRANS_A
#define PG_TRANS_A 0
#endif
#ifndef PG_TRANS_B
#define PG_TRANS_B 0
#endif
#ifndef PG_VEC
#define PG_VEC 1
#endif

// ======================================================================================
// Section: strided batches on the grid (PG_BATCH, any predicated rung that declares it)
// PG_BATCH=1: blockIdx.z is the matrix of a strided batch. The entry point takes three more
// parameters after ldc -- PG_BATCH_PARAMS, the element strides from one matrix of A, B and
// C to the next (0: one matrix shared by the whole batch) -- and moves its pointers with
// PG_BATCH_SEEK before anything else, so the rest of the kernel is the single product.
// ======================================================================================
#ifndef PG_BATCH
#define PG_BATCH 0
#endif
#if PG_BATCH
#define PG_BATCH_PARAMS , long long pg_batch_a, long long pg_batch_b, long long pg_batch_c
#define PG_BATCH_SEEK(A, B, C)                                   \
    do {                                                         \
        const long long pg_z = static_cast<long long>(blockIdx.z); \
        (A) += pg_z * pg_batch_a;                                \
        (B) += pg_z * pg_batch_b;                                \
        (C) += pg_z * pg_batch_c;                                \
    } while (0)
#else
#define PG_BATCH_PARAMS
#define PG_BATCH_SEEK(A, B, C) \
    do {                       \
    } while (0)
#endif

// ======================================================================================
// Section: the 16-bit element type of the tensor-core rungs (hgemm/), PG_BF16
// A rung that defines PG_HALF_TYPES before including this header gets pg_half (its A, B and
// 16-bit C element), pg_half2 (two of them), the float conversions and PG_MMA_AB, the type
// suffix of mma.sync / wgmma (".f32" PG_MMA_AB PG_MMA_AB: fp32 accumulation). PG_BF16=0:
// __half, "f16"; PG_BF16=1: __nv_bfloat16, "bf16" -- one source per rung for both types (the
// instruction shapes, fragment layouts, ldmatrix and TMA traffic are the same 16-bit ones,
// and both types' zero is all-zero bits, so zero fills need no change). Other headers never
// see cuda_fp16.h / cuda_bf16.h through this one.
// ======================================================================================
#ifndef PG_BF16
#define PG_BF16 0
#endif
#ifdef PG_HALF_TYPES
#if PG_BF16
#include <cuda_bf16.h>
typedef __nv_bfloat16 pg_half;
typedef __nv_bfloat162 pg_half2;
#define PG_MMA_AB ".bf16"
__device__ __forceinline__ float pg_half2float(pg_half v) { return __bfloat162float(v); }
__device__ __forceinline__ pg_half pg_float2half_rn(float v) { return __float2bfloat16_rn(v); }
__device__ __forceinline__ float2 pg_half22float2(pg_half2 v) { return __bfloat1622float2(v); }
__device__ __forceinline__ pg_half2 pg_floats2half2_rn(float lo, float hi) {
    return __floats2bfloat162_rn(lo, hi);
}
#else
#include <cuda_fp16.h>
typedef __half pg_half;
typedef __half2 pg_half2;
#define PG_MMA_AB ".f16"
__device__ __forceinline__ float pg_half2float(pg_half v) { return __half2float(v); }
__device__ __forceinline__ pg_half pg_float2half_rn(float v) { return __float2half_rn(v); }
__device__ __forceinline__ float2 pg_half22float2(pg_half2 v) { return __half22float2(v); }
__device__ __forceinline__ pg_half2 pg_floats2half2_rn(float lo, float hi) {
    return __floats2half2_rn(lo, hi);
}
#endif
#endif  // PG_HALF_TYPES

// ======================================================================================
// Section: cp.async (used by the skinny rungs' shared-memory rings)
// cp.async (sm_80+): kBytes (4, 8 or 16) from global `src` to shared memory (a generic pointer
// or a shared-window address), of which the first `valid` bytes are read and the rest
// zero-filled (valid 0: nothing is read from src, which must still be a valid address).
// 16-byte copies bypass L1 (.cg); smaller ones cannot (.ca).
template <int kBytes>
__device__ __forceinline__ void pg_cp_async(unsigned dst, const void* src, int valid) {
    static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async moves 4, 8 or 16 bytes");
    if constexpr (kBytes == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(kBytes), "r"(valid) : "memory");
}
template <int kBytes>
__device__ __forceinline__ void pg_cp_async(void* dst, const void* src, int valid) {
    pg_cp_async<kBytes>(static_cast<unsigned>(__cvta_generic_to_shared(dst)), src, valid);
}
__device__ __forceinline__ void pg_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Wait until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void pg_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory"); }

// ======================================================================================
// Section: split-K reduced in the same launch (PG_SPLIT, with PG_BATCH)
// PG_SPLIT=1: the batch on the grid is the K-slices of one product. Each threadblock writes
// its slice's fp32 partial tile into the workspace (the kernel's C, alpha 1, beta 0) as a
// batch member would and counts it on the tile's arrival counter (pg_split_count[tile]);
// the slices of a tile are then added in slice order and written as
//     D = pg_split_alpha * sum_s W_s + pg_split_beta * D
// (D: float, or pg_half when pg_split_d_half != 0), by one of two schedules:
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
#if PG_SPLIT
#define PG_SPLIT_PARAMS                                                                     \
    , unsigned int *pg_split_count, void *pg_split_d, long long pg_split_d_rs,              \
        long long pg_split_d_cs, float pg_split_alpha, float pg_split_beta, int pg_split_d_half, \
        int pg_split_resident
// D's elements: float, or (pg_split_d_half != 0, rungs with PG_HALF_TYPES) pg_half.
__device__ __forceinline__ float pg_split_load(const void* d, long long at, int half) {
#ifdef PG_HALF_TYPES
    if (half) return pg_half2float(static_cast<const pg_half*>(d)[at]);
#endif
    return static_cast<const float*>(d)[at];
}
__device__ __forceinline__ void pg_split_store(void* d, long long at, int half, float v) {
#ifdef PG_HALF_TYPES
    if (half) {
        static_cast<pg_half*>(d)[at] = pg_float2half_rn(v);
        return;
    }
#endif
    static_cast<float*>(d)[at] = v;
}

// The sum of the slices of one region (rows x cols at row0, col0 of the kernel's M x N) of
// the workspace, written to D by `threads` threads (`rank` in [0, threads)). W is slice 0 of
// the workspace (w_rs, w_cs: element strides; w_split: elements from one slice to the next).
// Not inlined: its registers are its own, not added to the rung's main loop's budget.
__device__ __noinline__ void pg_split_reduce_region(int threads, int rank, int splits,
                                                       const float* W, long long w_rs,
                                                       long long w_cs, long long w_split,
                                                       int row0, int col0, int rows, int cols,
                                                       void* D, long long d_rs, long long d_cs,
                                                       float alpha, float beta, int d_half) {
    // Threads walk the workspace's contiguous dimension, four elements at a time where the
    // region allows, PG_SPLIT_LINES runs of four per thread at once, every slice's loads issued
    // before the sums: one block reads the region, so its bytes in flight set the pace.
    const bool along_cols = w_cs == 1;
    const int inner = along_cols ? cols : rows, outer = along_cols ? rows : cols;
    const long long w_outer = along_cols ? w_rs : w_cs;
    const int inner0 = along_cols ? col0 : row0;
    const int vec = (inner % 4 == 0 && inner0 % 4 == 0 && w_outer % 4 == 0 && w_split % 4 == 0 &&
                     (reinterpret_cast<unsigned long long>(W) & 15) == 0) ? 4 : 1;
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
        float acc[kLines][4];
#pragma unroll
        for (int q = 0; q < kLines; ++q) acc[q][0] = acc[q][1] = acc[q][2] = acc[q][3] = 0.f;
        if (vec == 4) {
            int s = 0;
            for (; s + 8 <= splits; s += 8) {
                float4 v[kLines][8];
#pragma unroll
                for (int q = 0; q < kLines; ++q)
#pragma unroll
                    for (int r = 0; r < 8; ++r)
                        v[q][r] = live[q] ? __ldcg(reinterpret_cast<const float4*>(W + at_w[q] + (s + r) * w_split))
                                          : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
                for (int q = 0; q < kLines; ++q)
#pragma unroll
                    for (int r = 0; r < 8; ++r) {
                        acc[q][0] += v[q][r].x; acc[q][1] += v[q][r].y;
                        acc[q][2] += v[q][r].z; acc[q][3] += v[q][r].w;
                    }
            }
            for (; s < splits; ++s) {
#pragma unroll
                for (int q = 0; q < kLines; ++q) {
                    if (!live[q]) continue;
                    const float4 v = __ldcg(reinterpret_cast<const float4*>(W + at_w[q] + s * w_split));
                    acc[q][0] += v.x; acc[q][1] += v.y; acc[q][2] += v.z; acc[q][3] += v.w;
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
                float v = alpha * acc[q][e];
                if (beta != 0.f) v += beta * pg_split_load(D, at, d_half);
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
                                                    int bm, int bn, int splits, const float* W,
                                                    long long w_rs, long long w_cs,
                                                    long long w_split, void* D, long long d_rs,
                                                    long long d_cs, float alpha, float beta,
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
                                               int splits, const float* W, long long w_rs,
                                               long long w_cs, long long w_split, int row0,
                                               int col0, int rows, int cols, void* D,
                                               long long d_rs, long long d_cs, float alpha,
                                               float beta, int d_half) {
    if (!pg_split_arrive(bar, threads, rank, count, splits)) return;
#if PG_SPLIT_FENCES
    __threadfence();  // the other slices' sums (published before their arrivals) are read next
#endif
    pg_split_reduce_region(threads, rank, splits, W, w_rs, w_cs, w_split, row0, col0, rows, cols,
                           D, d_rs, d_cs, alpha, beta, d_half);
    if (rank == 0) *count = 0u;  // ready for the next launch on this stream
}
#else
#define PG_SPLIT_PARAMS
#endif

// ======================================================================================
// Section: stream-K (PG_STREAMK=1; the wgmma rung on its persistent grid of G blocks)
// The tiles of the last one or two waves are not dealt out whole: their k-tiles, in tile
// order, are cut into G equal runs, one per block. A block whose run begins inside a tile
// stores its partial sums of that tile into its own workspace slot and raises its flag
// (pg_sk_signal); the block whose run holds the tile's first k-tile waits for the flags of
// the blocks after it (pg_sk_wait), adds their slots in block order and stores the tile.
// Why: a short last wave leaves SMs idle for a whole tile's time (4096^3 in 128 x 256 tiles is
// 3.88 waves; 1000 x 3000 x 2000 is 96 tiles for 132 SMs). The sum's order is fixed, so the
// bits are the same every run. A block contributes to at most one tile (its run's first), so
// one slot per block suffices; the waiting block puts the flags back to zero, so the next
// launch finds them ready. Every block must be resident at once (the persistent grid is, and
// the host launches it cooperatively so that other work on the GPU cannot break that).
// Parameters after the rung's own: PG_STREAMK_PARAMS (the slots, G x tile floats; the flags).
// ======================================================================================
#ifndef PG_STREAMK
#define PG_STREAMK 0
#endif
#if PG_STREAMK
#define PG_STREAMK_PARAMS , float *pg_sk_ws, unsigned int *pg_sk_flag
// Every thread of the group has stored its part of the block's slot: the flag goes up.
// (Every thread's fence stays here: one release by the first thread after the barrier, as the
// split arrival now does, read 1.4-3.3% slower at 4096^3 in three runs out of three (old time
// over new 0.967-0.986) and faster or level at 1000x3000x2000: docs/benchmarks/split_sync_ab.py.)
__device__ __forceinline__ void pg_sk_signal(int bar, int threads, int rank, unsigned int* flag) {
    __threadfence();
    pg_bar_sync(bar, threads);
    if (rank == 0) asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(flag), "r"(1u) : "memory");
}
// Block until another block's flag is up (rank 0 polls with acquire loads; the barrier then
// lets the whole group read that block's slot).
__device__ __forceinline__ void pg_sk_wait(int bar, int threads, int rank, const unsigned int* flag) {
    if (rank == 0) {
        unsigned int seen;
        for (;;) {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(seen) : "l"(flag) : "memory");
            if (seen) break;
            __nanosleep(32);
        }
    }
    pg_bar_sync(bar, threads);
}
#else
#define PG_STREAMK_PARAMS
#endif

// ======================================================================================
// Section: column-major ladder (sgemm_cm/, seed 000/001)
// Element (r, c) of a column-major matrix with leading dimension ld is p[r + c*ld].
// ======================================================================================

#define CM_IDX(r, c, ld) ((r) + (c) * (ld))

// float4 access; the caller guarantees 16-byte alignment.
__device__ __forceinline__ float4 cm_ld4(const float* p) {
    return __ldg(reinterpret_cast<const float4*>(p));
}
__device__ __forceinline__ float4 cm_ld4_rw(const float* p) {  // for C (not read-only)
    return *reinterpret_cast<const float4*>(p);
}
__device__ __forceinline__ void cm_st4(float* p, float4 v) {
    *reinterpret_cast<float4*>(p) = v;
}

// Guarded read of the n valid floats p[0..n-1] of a 4-float chunk (n may be <= 0 or
// > 4); missing elements read as 0. kVec: a full chunk may use one float4 load (the
// chunk start is 16-byte aligned); otherwise only scalar loads are issued.
template <bool kVec>
__device__ __forceinline__ float4 cm_ld4_guarded(const float* p, int n) {
    if (kVec && n >= 4) return cm_ld4(p);
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (n > 0) v.x = __ldg(p + 0);
    if (n > 1) v.y = __ldg(p + 1);
    if (n > 2) v.z = __ldg(p + 2);
    if (n > 3) v.w = __ldg(p + 3);
    return v;
}

// Predicated global -> register -> shared loader for one operand tile of the
// column-major ladder's predicated rungs (v09 onwards).
//
// Both operands are handled as an "MN x K" tile: A's threadblock tile is BM x BK (i, k),
// B's is BN x BK (j, k). In shared memory the tile is always stored K-major,
// s[k * kSmemStride + mn], so a thread's fragment for one k is contiguous along MN.
// In global memory the operand is either MN-contiguous (A as is, B transposed) or
// K-contiguous (B as is, A transposed); kKContig says which. Chunks of 4 floats are read
// along the contiguous global dimension (one float4 when kVec and the chunk is whole,
// scalars otherwise) and, for K-contiguous operands, scattered into the K-major shared
// layout. Elements outside the matrix read as 0, so partial tiles need no special
// handling in the math.
template <int kTileMN, int kTileK, int kThreads, bool kKContig, bool kVec>
struct CmTileLoader {
    static constexpr int kSmemStride = kTileMN + 4;  // +4 floats: conflict-free scatter
    static constexpr int kSmemFloats = kTileK * kSmemStride;
    static constexpr int kChunks = kTileMN * kTileK / (4 * kThreads);
    static constexpr int kChunksPerLine = kKContig ? kTileK / 4 : kTileMN / 4;
    static constexpr int kLinesPerPass = kThreads / kChunksPerLine;
    static_assert(kTileMN % 4 == 0 && kTileK % 4 == 0, "tile dims must be multiples of 4");
    static_assert(kChunks >= 1 && kChunks * 4 * kThreads == kTileMN * kTileK,
                  "tile must split evenly into 4-float chunks per thread");
    static_assert(kThreads % kChunksPerLine == 0, "threads must cover whole lines");

    const float* ptr;  // chunk 0 of this thread, current k-tile
    int ld;            // leading dimension
    int kOff;          // tile-local k of chunk 0's first element
    int mnLeft;        // valid elements along MN from chunk 0's first element
    int sOff;          // shared-memory offset of chunk 0's first element
    float4 reg[kChunks];

    __device__ __forceinline__ CmTileLoader(const float* base, int ld_, int mn0, int extentMN,
                                            int tid) {
        const int line = tid / kChunksPerLine;      // k if MN-contiguous, mn if K-contiguous
        const int pos = (tid % kChunksPerLine) * 4;  // along the contiguous dimension
        ld = ld_;
        if (kKContig) {  // chunk = 4 consecutive k of one mn
            ptr = base + CM_IDX(pos, mn0 + line, ld);
            kOff = pos;
            mnLeft = extentMN - (mn0 + line);
            sOff = pos * kSmemStride + line;
        } else {         // chunk = 4 consecutive mn of one k
            ptr = base + CM_IDX(mn0 + pos, line, ld);
            kOff = line;
            mnLeft = extentMN - (mn0 + pos);
            sOff = line * kSmemStride + pos;
        }
    }

    // Read the current k-tile into registers; kLeft = K - (first k of this tile).
    __device__ __forceinline__ void load(int kLeft) {
#pragma unroll
        for (int r = 0; r < kChunks; ++r) {
            int n;  // valid floats in chunk r
            if (kKContig) n = (mnLeft - r * kLinesPerPass > 0) ? kLeft - kOff : 0;
            else          n = (kOff + r * kLinesPerPass < kLeft) ? mnLeft : 0;
            reg[r] = cm_ld4_guarded<kVec>(ptr + r * kLinesPerPass * ld, n);
        }
    }

    // Move to the next k-tile.
    __device__ __forceinline__ void advance() { ptr += kKContig ? kTileK : kTileK * ld; }

    // Write the registers into the K-major shared tile s[kTileK][kSmemStride].
    __device__ __forceinline__ void store(float* s) const {
#pragma unroll
        for (int r = 0; r < kChunks; ++r) {
            if (kKContig) {
                float* q = s + sOff + r * kLinesPerPass;
                q[0 * kSmemStride] = reg[r].x;
                q[1 * kSmemStride] = reg[r].y;
                q[2 * kSmemStride] = reg[r].z;
                q[3 * kSmemStride] = reg[r].w;
            } else {
                cm_st4(s + sOff + r * kLinesPerPass * kSmemStride, reg[r]);
            }
        }
    }
};
