// v12_cp_async: replaces v11's global -> register -> shared staging with cp.async
// (sm_80+), which copies global memory straight into shared memory without registers, in a
// 3-stage ring of shared stages. Why: v11 has to hold the next k-tile in registers, so at
// the 128-register cap it can prefetch only one 8-deep k-tile ahead; cp.async frees those
// registers, keeps two k-tiles in flight while the warps compute on a third, lets the
// k-tile grow to 32 (one barrier per 2048 FFMAs per thread instead of per 512; measured
// 0.95x vs 0.91-0.93x for k-tiles of 8/16/24) and pays for explicit double-buffering of
// the per-k fragments (the smem reads of step k+1 are issued before the FMAs of step k).
// A grouped block rasterization (8 tile rows per group) improves L2 reuse between the
// threadblocks resident at one time. Beyond the seeds (seed 000/001 stops at Version 11).
//
// Loads: the MN-contiguous operand moves in 16-byte cp.async.cg chunks (PG_VEC=1) or, with
// PG_VEC=0, in 4-byte cp.async.ca elements with consecutive lanes on consecutive mn (each
// warp instruction reads whole 32-byte sectors); the K-contiguous operand moves element by
// element (4-byte cp.async.ca) and lands directly in the K-major shared layout, lanes
// spread 8 (k) x 4 (mn) so that the global reads use whole sectors and the shared writes
// (row stride kBlock+4) are conflict-free. Out-of-range elements use src-size 0, which
// zero-fills without reading global memory, so edges need no special math.
//
// Geometry: threadblock tile 128 x 128 x 32, 256 threads = 8 warps arranged 2 (M) x 4 (N),
// warp tile 64 x 32, lanes 8 (M) x 4 (N), thread tile 8 x 8 as 2 x 2 blocks of 4 x 4 (as
// v09-v11), 2 threadblocks per SM (128 registers). Shared memory is dynamic:
// 3 stages x 32 x (132 + 132) floats = 101376 bytes (smem_bytes in variants.json).
#include "common.cuh"

// The tile configuration can be set by a rung that reuses this source with another
// threadblock tile (v13, v14): each CM_CPASYNC_* macro defaults to v12's value.
#ifndef PG_BM
#define PG_BM 128
#endif
#ifndef PG_BN
#define PG_BN 128
#endif
#ifndef PG_BK
#define PG_BK 32
#endif
#ifndef CM_CPASYNC_MIN_BLOCKS
// Two threadblocks per SM where two fit: 2 x 101376 bytes of shared memory fit sm_90's 228 KB
// but not sm_80's 164 KB, so on sm_80 asking for two would only cap the registers at 128 for
// an occupancy the SM cannot reach (the batched build then spilled)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define CM_CPASYNC_MIN_BLOCKS 1
#else
#define CM_CPASYNC_MIN_BLOCKS 2
#endif
#endif
#ifndef CM_CPASYNC_SMEM_BYTES
#define CM_CPASYNC_SMEM_BYTES 101376
#endif
#ifndef CM_CPASYNC_ENTRY
#define CM_CPASYNC_ENTRY sgemm_cm_v12_cp_async
#endif

namespace cm_v12 {

// ---- tile configuration ------------------------------------------------------------
constexpr int kBM = PG_BM;  // threadblock tile M
constexpr int kBN = PG_BN;  // threadblock tile N
constexpr int kBK = PG_BK;  // threadblock tile K (one k-tile)
constexpr int kWM = 64;       // warp tile M
constexpr int kWN = 32;       // warp tile N
constexpr int kThreadM = 8;      // thread tile M
constexpr int kThreadN = 8;      // thread tile N
constexpr int kStages = 3;       // shared-memory stages (cp.async ring)
constexpr int kMinBlocksPerSM = CM_CPASYNC_MIN_BLOCKS;
constexpr int kGroupM = 8;       // block rasterization: groups of kGroupM tile rows (<=1: off)

// ---- derived -------------------------------------------------------------------------
constexpr int kWarpsM = kBM / kWM;
constexpr int kWarpsN = kBN / kWN;
constexpr int kThreads = 32 * kWarpsM * kWarpsN;
constexpr int kLanesM = kWM / kThreadM;
constexpr int kLanesN = kWN / kThreadN;
constexpr int kVecM = kThreadM / 4;
constexpr int kVecN = kThreadN / 4;
constexpr int kStrideA = kBM + 4;  // K-major shared rows, +4 floats: conflict-free
constexpr int kStrideB = kBN + 4;
constexpr int kTileFloatsA = kBK * kStrideA;
constexpr int kTileFloatsB = kBK * kStrideB;
constexpr int kStageFloats = kTileFloatsA + kTileFloatsB;
constexpr int kSmemBytes = kStages * kStageFloats * 4;
static_assert(kLanesM * kLanesN == 32, "a warp tile must hold exactly 32 thread tiles");
static_assert(kThreadM % 4 == 0 && kThreadN % 4 == 0, "thread tile is made of 4x4 blocks");
static_assert(kStages >= 2, "need at least two stages");
static_assert(kSmemBytes == CM_CPASYNC_SMEM_BYTES, "keep smem_bytes in variants.json in step");

// ---- cp.async primitives (PTX, sm_80+) -----------------------------------------------
__device__ __forceinline__ void cp_async_4(unsigned dst, const float* src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
                 "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_16(unsigned dst, const float* src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Global -> shared copier of one operand tile (kTileMN x kBK, stored K-major in shared
// memory as s[k * (kTileMN + 4) + mn]). kKContig: the operand is K-contiguous in global
// memory (B as is, A transposed); otherwise MN-contiguous.
template <int kTileMN, bool kKContig, bool kVec>
struct AsyncTileCopier {
    static constexpr int kStride = kTileMN + 4;
    // MN-contiguous: chunks of 4 mn at one k.
    static constexpr int kChunksPerLine = kTileMN / 4;
    static constexpr int kLinesPerPass = kThreads / kChunksPerLine;
    static constexpr int kChunks = kTileMN * kBK / (4 * kThreads);
    // MN-contiguous, PG_VEC=0: single elements, kThreads consecutive (mn, k) per pass.
    static constexpr int kKPerPassE = kThreads / kTileMN;
    static constexpr int kElems = kTileMN * kBK / kThreads;
    static_assert(kKContig || kVec || (kThreads % kTileMN == 0 && kBK % kKPerPassE == 0),
                  "MN-contiguous scalar split");
    // K-contiguous: single elements, lanes 8 (k) x 4 (mn), a block covers 8 k x 32 mn.
    static constexpr int kMnPerPass = kThreads / 8;
    static constexpr int kMnPasses = kTileMN / kMnPerPass;
    static constexpr int kKPasses = kBK / 8;
    static_assert(kKContig || !kVec || (kChunks >= 1 && kChunks * 4 * kThreads == kTileMN * kBK &&
                               kThreads % kChunksPerLine == 0), "MN-contiguous split");
    static_assert(!kKContig || (kBK % 8 == 0 && kTileMN % kMnPerPass == 0), "K-contiguous split");

    const float* ptr;  // first element of this thread, current k-tile
    int ld;
    int kOff;          // tile-local k of the first element
    int mnLeft;        // valid mn from the first element (may be <= 0)
    unsigned sOff;     // byte offset in a stage tile of the first element

    __device__ __forceinline__ AsyncTileCopier(const float* base, int ld_, int mn0, int extentMN,
                                               int tid) {
        ld = ld_;
        if (kKContig) {
            const int k = tid % 8, mn = tid / 8;
            ptr = base + CM_IDX(k, mn0 + mn, ld);
            kOff = k;
            mnLeft = extentMN - (mn0 + mn);
            sOff = 4u * (k * kStride + mn);
        } else if (!kVec) {  // single elements, a warp covers 32 consecutive mn of one k
            const int mn = tid % kTileMN, k = tid / kTileMN;
            ptr = base + CM_IDX(mn0 + mn, k, ld);
            kOff = k;
            mnLeft = extentMN - (mn0 + mn);
            sOff = 4u * (k * kStride + mn);
        } else {
            const int mn = (tid % kChunksPerLine) * 4, k = tid / kChunksPerLine;
            ptr = base + CM_IDX(mn0 + mn, k, ld);
            kOff = k;
            mnLeft = extentMN - (mn0 + mn);
            sOff = 4u * (k * kStride + mn);
        }
    }

    // Issue the copies of the current k-tile into the shared tile at byte address s;
    // kLeft = K - (first k of this tile).
    __device__ __forceinline__ void copy(unsigned s, int kLeft) const {
        if (kKContig) {
#pragma unroll
            for (int kp = 0; kp < kKPasses; ++kp) {
                const bool kValid = kOff + 8 * kp < kLeft;
#pragma unroll
                for (int mp = 0; mp < kMnPasses; ++mp)
                    cp_async_4(s + sOff + 4u * (8 * kp * kStride + mp * kMnPerPass),
                               ptr + 8 * kp + mp * kMnPerPass * ld,
                               kValid && mnLeft > mp * kMnPerPass);
            }
        } else if (!kVec) {
            // Scalar path: element (mn, k) per lane with consecutive lanes on consecutive mn,
            // so each warp instruction reads whole 32-byte sectors (no reliance on L1 hits).
#pragma unroll
            for (int r = 0; r < kElems; ++r) {
                const bool kValid = kOff + r * kKPerPassE < kLeft;
                cp_async_4(s + sOff + 4u * (r * kKPerPassE * kStride), ptr + r * kKPerPassE * ld,
                           kValid && mnLeft > 0);
            }
        } else {
#pragma unroll
            for (int r = 0; r < kChunks; ++r) {
                const bool kValid = kOff + r * kLinesPerPass < kLeft;
                const float* p = ptr + r * kLinesPerPass * ld;
                const unsigned d = s + sOff + 4u * (r * kLinesPerPass * kStride);
                const int n = kValid ? min(max(mnLeft, 0), 4) : 0;
                cp_async_16(d, p, 4 * n);
            }
        }
    }

    __device__ __forceinline__ void advance() { ptr += kKContig ? kBK : kBK * ld; }
};

using CopierA = AsyncTileCopier<kBM, PG_TRANS_A != 0, PG_VEC != 0>;
using CopierB = AsyncTileCopier<kBN, PG_TRANS_B == 0, PG_VEC != 0>;

// Fragments of one k: kThreadM values of A and kThreadN of B, as float4 pieces.
// Fragment reads. nvcc sees that these float pointers point into shared memory and
// addresses them with 32-bit registers; NVRTC keeps the generic pointer to dynamic shared
// memory in 64-bit ones, which cost this loop 7% at 4096^3 on an H200. Under NVRTC the reads
// therefore go through 32-bit shared-window addresses (ld.shared.v4), which matches nvcc's
// speed there; nvcc builds keep the pointer code they were measured with (the same reads
// through addresses measured 2-3% slower with nvcc). Not in PG_BATCH builds: NVRTC's sm_80
// build of v13 then spills 4 bytes (the batch's pointer seek holds registers).
#if defined(__CUDACC_RTC__) && !PG_BATCH
typedef unsigned SmemRef;  // a shared-window byte address
#define SMEM_BASE(smem, sBase) (sBase)
#define SMEM_OFF(ref, floats) ((ref) + 4u * (floats))
__device__ __forceinline__ float4 smem_ld4(SmemRef r) {
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(r));
    return v;
}
#else
typedef const float* SmemRef;
#define SMEM_BASE(smem, sBase) (smem)
#define SMEM_OFF(ref, floats) ref + floats  // unparenthesized: the measured pointer arithmetic
__device__ __forceinline__ float4 smem_ld4(SmemRef r) {
    return *reinterpret_cast<const float4*>(r);
}
#endif

// sA, sB: the stage's A and B tiles.
__device__ __forceinline__ void load_fragments(SmemRef sA, SmemRef sB, int k,
                                               int aOff, int bOff, float4 (&a)[kVecM],
                                               float4 (&b)[kVecN]) {
#pragma unroll
    for (int v = 0; v < kVecM; ++v)
        a[v] = smem_ld4(SMEM_OFF(sA, k * kStrideA + aOff + v * kLanesM * 4));
#pragma unroll
    for (int v = 0; v < kVecN; ++v)
        b[v] = smem_ld4(SMEM_OFF(sB, k * kStrideB + bOff + v * kLanesN * 4));
}

__device__ __forceinline__ void fma_thread_tile(float (&acc)[kThreadM][kThreadN],
                                                const float4 (&a)[kVecM],
                                                const float4 (&b)[kVecN]) {
    const float* av = reinterpret_cast<const float*>(a);
    const float* bv = reinterpret_cast<const float*>(b);
#pragma unroll
    for (int j = 0; j < kThreadN; ++j)
#pragma unroll
        for (int i = 0; i < kThreadM; ++i) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
}

}  // namespace cm_v12

extern "C" __global__ void __launch_bounds__(cm_v12::kThreads, cm_v12::kMinBlocksPerSM)
CM_CPASYNC_ENTRY(int M, int N, int K, float alpha,
                      const float* __restrict__ A, int lda,
                      const float* __restrict__ B, int ldb,
                      float beta, float* __restrict__ C, int ldc PG_BATCH_PARAMS PG_SPLIT_PARAMS) {
    using namespace cm_v12;
    PG_BATCH_SEEK(A, B, C);
    extern __shared__ __align__(16) float smem[];  // kStages x (A tile, B tile)

    const int tid = threadIdx.x;

    // Grouped rasterization: consecutive block ids walk kGroupM tile rows (M) down one
    // tile column before moving right, so the blocks resident at one time share A and B
    // panels in L2. Remapped from the plain (m, n) grid.
    int bm = blockIdx.x, bn = blockIdx.y;
    if (kGroupM > 1) {
        const int pid = blockIdx.x + blockIdx.y * gridDim.x;
        const int perGroup = kGroupM * gridDim.y;
        const int first = (pid / perGroup) * kGroupM;
        const int rows = min(gridDim.x - first, kGroupM);
        const int in = pid % perGroup;
        bm = first + in % rows;
        bn = in / rows;
    }
    const int m0 = bm * kBM;
    const int n0 = bn * kBN;

    const int warp = tid / 32, lane = tid % 32;
    const int warpM = warp % kWarpsM, warpN = warp / kWarpsM;
    const int laneM = lane % kLanesM, laneN = lane / kLanesM;
    const int aOff = warpM * kWM + laneM * 4;
    const int bOff = warpN * kWN + laneN * 4;

    CopierA copyA(A, lda, m0, M, tid);
    CopierB copyB(B, ldb, n0, N, tid);
    const unsigned sBase = static_cast<unsigned>(__cvta_generic_to_shared(smem));

    float acc[kThreadM][kThreadN];
#pragma unroll
    for (int i = 0; i < kThreadM; ++i)
#pragma unroll
        for (int j = 0; j < kThreadN; ++j) acc[i][j] = 0.f;

    const int kTiles = CEIL_DIV(K, kBK);

    // Prologue: k-tiles 0 .. kStages-2 in flight, one commit group each (empty groups
    // past the end keep the group count uniform).
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < kTiles) {
            const unsigned st = sBase + 4u * (s * kStageFloats);
            copyA.copy(st, K - s * kBK);
            copyB.copy(st + 4u * kTileFloatsA, K - s * kBK);
            copyA.advance();
            copyB.advance();
        }
        cp_async_commit();
    }

    int readStage = 0;              // stage holding k-tile kt
    int writeStage = kStages - 1;   // stage receiving k-tile kt + kStages - 1

    float4 fragA[2][kVecM], fragB[2][kVecN];
    cp_async_wait<kStages - 2>();
    __syncthreads();
    const SmemRef s0 = SMEM_BASE(smem, sBase);
    load_fragments(s0, SMEM_OFF(s0, kTileFloatsA), 0, aOff, bOff, fragA[0], fragB[0]);
    for (int kt = 0; kt < kTiles; ++kt) {
        const SmemRef sA = SMEM_OFF(s0, readStage * kStageFloats);
        const SmemRef sB = SMEM_OFF(sA, kTileFloatsA);
#pragma unroll
        for (int k = 0; k < kBK; ++k) {
            if (k == 0) {
                // Refill the stage read during k-tile kt-1 (all reads of it happened
                // before the barrier that ended k-tile kt-1).
                const int next = kt + kStages - 1;
                if (next < kTiles) {
                    const unsigned st = sBase + 4u * (writeStage * kStageFloats);
                    copyA.copy(st, K - next * kBK);
                    copyB.copy(st + 4u * kTileFloatsA, K - next * kBK);
                    copyA.advance();
                    copyB.advance();
                }
                cp_async_commit();
            }
            if (k + 1 < kBK) {
                load_fragments(sA, sB, k + 1, aOff, bOff, fragA[(k + 1) & 1], fragB[(k + 1) & 1]);
            } else {
                // k-tile kt+1 has landed for this thread; the barrier makes it visible
                // to all and ends every read of stage readStage.
                cp_async_wait<kStages - 2>();
                __syncthreads();
                const int nextRead = (readStage + 1 == kStages) ? 0 : readStage + 1;
                const SmemRef nA = SMEM_OFF(s0, nextRead * kStageFloats);
                load_fragments(nA, SMEM_OFF(nA, kTileFloatsA), 0, aOff, bOff, fragA[(k + 1) & 1],
                               fragB[(k + 1) & 1]);
            }
            fma_thread_tile(acc, fragA[k & 1], fragB[k & 1]);
        }
        writeStage = readStage;
        readStage = (readStage + 1 == kStages) ? 0 : readStage + 1;
    }
    cp_async_wait<0>();  // no copy may outlive the block (only empty groups remain)

    // Epilogue: C = alpha*acc + beta*C, guarded; beta == 0 never reads C.
#pragma unroll
    for (int vn = 0; vn < kVecN; ++vn)
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
            const int j = vn * 4 + jj;
            const int n = n0 + bOff + vn * kLanesN * 4 + jj;
            if (n >= N) continue;
#pragma unroll
            for (int vm = 0; vm < kVecM; ++vm) {
                const int m = m0 + aOff + vm * kLanesM * 4;
                const int left = M - m;
                if (left <= 0) continue;
                float* p = C + CM_IDX(m, n, ldc);
                float r[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) r[e] = alpha * acc[vm * 4 + e][j];
                if (PG_VEC && left >= 4) {
                    if (beta != 0.f) {
                        const float4 c = cm_ld4_rw(p);
                        r[0] += beta * c.x; r[1] += beta * c.y;
                        r[2] += beta * c.z; r[3] += beta * c.w;
                    }
                    cm_st4(p, make_float4(r[0], r[1], r[2], r[3]));
                } else {
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        if (e < left) p[e] = (beta != 0.f) ? r[e] + beta * p[e] : r[e];
                }
            }
        }
#if PG_SPLIT
    // K-slice blockIdx.z of this tile is in the workspace: the last slice to finish adds them
    // all into D (common.cuh).
    static_assert(PG_BATCH, "PG_SPLIT: the K-slices are a batch");
    const float* const W = C - blockIdx.z * pg_batch_c;
    unsigned int* const count = pg_split_count + bm * gridDim.y + bn;  // tile (bm, bn), row-major
    if (pg_split_resident) {  // every block resident: all of them reduce, band by band
        pg_split_arrive(0, kThreads, tid, count, gridDim.z);
        pg_split_reduce_all(0, kThreads, tid,
                            blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z),
                            gridDim.x * gridDim.y * gridDim.z, pg_split_count, M, N, kBM,
                            kBN, gridDim.z, W, 1, ldc, pg_batch_c, pg_split_d,
                            pg_split_d_rs, pg_split_d_cs, pg_split_alpha, pg_split_beta,
                            pg_split_d_half);
    } else {
        pg_split_fixup(0, kThreads, tid, count, gridDim.z, W, 1, ldc, pg_batch_c, m0, n0,
                       min(kBM, M - m0), min(kBN, N - n0), pg_split_d, pg_split_d_rs,
                       pg_split_d_cs, pg_split_alpha, pg_split_beta, pg_split_d_half);
    }
#endif
}
