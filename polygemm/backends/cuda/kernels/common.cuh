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
// Section: split-K reduced in the same launch (PG_SPLIT, with PG_BATCH)
// PG_SPLIT=1: the batch on the grid is the K-slices of one product. Each threadblock writes
// its slice's fp32 partial tile into the workspace (the kernel's C, alpha 1, beta 0) as a
// batch member would; then the last threadblock to finish a tile -- one arrival counter per
// tile, in pg_split_count -- adds the tile's slices in slice order and writes
//     D = pg_split_alpha * sum_s W_s + pg_split_beta * D
// (D: float, or pg_half when pg_split_d_half != 0). Why: the separate reduction kernel cost a
// second launch per call, which on the host is as much as the whole call of a small product.
// The sum's order never depends on which slice arrives last, so every run gives the same
// bits (no atomics on the data). The counters start at zero and the reducing block puts its
// tile's back to zero, so the next launch on the same stream finds them ready.
// Parameters after the batch ones: PG_SPLIT_PARAMS.
// ======================================================================================
#ifndef PG_SPLIT
#define PG_SPLIT 0
#endif
#if PG_SPLIT
#define PG_SPLIT_PARAMS                                                                     \
    , unsigned int *pg_split_count, void *pg_split_d, long long pg_split_d_rs,              \
        long long pg_split_d_cs, float pg_split_alpha, float pg_split_beta, int pg_split_d_half
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

// Called by every thread of the group that wrote one slice's partial tile (rows x cols at
// row0, col0 of the kernel's M x N; `rank` in [0, threads)) once its stores are issued. W is
// slice 0 of the workspace (w_rs, w_cs: element strides; w_split: elements from one slice to
// the next); `count` is this tile's arrival counter.
__device__ __forceinline__ void pg_split_fixup(int bar, int threads, int rank, unsigned int* count,
                                               int splits, const float* W, long long w_rs,
                                               long long w_cs, long long w_split, int row0,
                                               int col0, int rows, int cols, void* D,
                                               long long d_rs, long long d_cs, float alpha,
                                               float beta, int d_half) {
    __threadfence();             // this thread's partial sums are visible to every block ...
    pg_bar_sync(bar, threads);   // ... and every thread's, before the tile's arrival counts
    int last = 0;
    if (rank == 0) last = atomicAdd(count, 1u) == static_cast<unsigned int>(splits - 1);
    if (!pg_bar_or(bar, threads, last)) return;
    __threadfence();  // the other slices' sums (published before their arrivals) are read next
    // Threads walk the workspace's contiguous dimension, four elements at a time where the
    // tile allows (16-byte loads: one block alone reads the whole tile, so its bytes in
    // flight set the pace), with every slice's load issued before the sum.
    const bool along_cols = w_cs == 1;
    const int inner = along_cols ? cols : rows, outer = along_cols ? rows : cols;
    const long long w_outer = along_cols ? w_rs : w_cs;
    const int inner0 = along_cols ? col0 : row0;
    const int vec = (inner % 4 == 0 && inner0 % 4 == 0 && w_outer % 4 == 0 && w_split % 4 == 0 &&
                     (reinterpret_cast<unsigned long long>(W) & 15) == 0) ? 4 : 1;
    const int per_line = inner / vec;
    for (int t = rank; t < outer * per_line; t += threads) {
        const int o = t / per_line, in = (t - o * per_line) * vec;
        const long long i = row0 + (along_cols ? o : in), j = col0 + (along_cols ? in : o);
        const float* w = W + i * w_rs + j * w_cs;
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        if (vec == 4) {
            int s = 0;
            for (; s + 8 <= splits; s += 8) {
                float4 v[8];
#pragma unroll
                for (int q = 0; q < 8; ++q) v[q] = __ldcg(reinterpret_cast<const float4*>(w + (s + q) * w_split));
#pragma unroll
                for (int q = 0; q < 8; ++q) {
                    acc[0] += v[q].x; acc[1] += v[q].y; acc[2] += v[q].z; acc[3] += v[q].w;
                }
            }
            for (; s < splits; ++s) {
                const float4 v = __ldcg(reinterpret_cast<const float4*>(w + s * w_split));
                acc[0] += v.x; acc[1] += v.y; acc[2] += v.z; acc[3] += v.w;
            }
        } else {
            for (int s = 0; s < splits; ++s) acc[0] += __ldcg(w + s * w_split);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {  // element e of the run: the next along the inner dimension
            if (e == vec) break;
            const long long at = (i + (along_cols ? 0 : e)) * d_rs + (j + (along_cols ? e : 0)) * d_cs;
            float v = alpha * acc[e];
            if (beta != 0.f) v += beta * pg_split_load(D, at, d_half);
            pg_split_store(D, at, d_half, v);
        }
    }
    if (rank == 0) *count = 0u;  // ready for the next launch on this stream
}
#else
#define PG_SPLIT_PARAMS
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
