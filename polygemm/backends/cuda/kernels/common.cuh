// common.cuh: helpers shared by every rung (both SGEMM ladders, hgemm, skinny).
// Included by every rung as  #include "common.cuh"  (the backend passes this folder
// with -I); the split-K and stream-K helpers are parts of it in split_k.cuh and
// stream_k.cuh. Rules for editors: add in your own clearly separated section; a change to
// what is here reaches every rung that includes it.
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

// Grouped tile order (L2 reuse): unit `t` of a grid of `along` x `across` units, walked
// `group_size` units along at a time, across, group after group: units that run at the same
// time share their rows of A (or columns of B) in L2. `g`: the unit along, `o`: across.
__device__ __forceinline__ void pg_grouped_walk(int t, int along, int across, int group_size, int& g, int& o) {
    const int per_group = group_size * across;
    const int group = t / per_group;
    const int first = group * group_size;
    const int size = min(along - first, group_size);
    const int r = t - group * per_group;
    g = first + r % size;
    o = r / size;
}
// This block's threadblock tile (row tm, column tn) of a (tiles_n, tiles_m) grid in grouped
// order: consecutive block ids walk down `group_m` tile rows before moving right.
__device__ __forceinline__ void pg_grouped_tile(int group_m, int& tm, int& tn) {
    pg_grouped_walk(blockIdx.y * gridDim.x + blockIdx.x, gridDim.y, gridDim.x, group_m, tm, tn);
}

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
// PG_BATCH_AT(P, S): pointer P of matrix 0 moved to this block's matrix (S: its element stride), for a rung
// that recomputes a seeked pointer at each use rather than holding it: blockIdx.z is read anew each time
// (asm volatile: neither kept in a register nor merged with another read), so a pointer derived from a
// kernel parameter costs no register between its uses. hgemm_v1 moves A and B this way: held across its
// main loop, the two 64-bit pointers spill its batched both-transposed PG_VEC=0 build at 255 registers.
__device__ __forceinline__ long long pg_batch_z() {
    unsigned int z;
    asm volatile("mov.u32 %0, %%ctaid.z;" : "=r"(z));
    return static_cast<long long>(z);
}
#define PG_BATCH_AT(P, S) ((P) + pg_batch_z() * (S))
#else
#define PG_BATCH_PARAMS
#define PG_BATCH_SEEK(A, B, C) \
    do {                       \
    } while (0)
#define PG_BATCH_AT(P, S) (P)
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

#include "split_k.cuh"   // PG_SPLIT: K-slices reduced in the same launch
#include "stream_k.cuh"  // PG_STREAMK: the last waves' k-tiles shared out

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
