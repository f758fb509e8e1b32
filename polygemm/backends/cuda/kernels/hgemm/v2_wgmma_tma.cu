// hgemm v2 (FP16 tensor-core ladder, second rung, Hopper only): C = alpha * A @ B + beta * C
// with fp16 operands and fp32 accumulation on the warpgroup-level tensor-core instruction
// wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16, both operands read straight from shared
// memory through 64-bit matrix descriptors, the tiles brought in by the Tensor Memory
// Accelerator (cp.async.bulk.tensor.2d, completion counted on an mbarrier).
// PG_BF16=1 builds it for bf16 operands and a bf16 or fp32 C (wgmma ...f32.bf16.bf16; pg_half
// and its conversions from common.cuh; the tensor maps say BFLOAT16).
// What it adds to v1 (ldmatrix + mma.sync, capped near 636 TFLOP/s on an H200):
//   * no ldmatrix and no per-thread address arithmetic: one thread issues whole tiles with
//     TMA, the hardware applies the 128-byte swizzle and zero-fills everything outside the
//     matrix (M, N and K edges need no predication in the main loop);
//   * warp specialization: warpgroup 0 is the producer (one elected thread issues TMA,
//     registers handed back with setmaxnreg.dec), warpgroups 1..kConsumers are consumers
//     (setmaxnreg.inc) that issue wgmma on a 64 x BN slice of the threadblock tile each;
//   * a kStages ring of shared stages guarded by two mbarriers per stage: `full` (producer
//     arrive.expect_tx + TMA complete_tx) and `empty` (one arrive per consumer warp once the
//     wgmma reading the stage has retired, wgmma.wait_group);
//   * the consumers' k-tile loop unrolled over the ring (HG2_RING_UNROLL=1, the default): each
//     stage's descriptors and barrier addresses are uniform-register constants of its copy, with
//     the warpgroup index made visibly warp-uniform (a shuffle), so no wgmma waits on R2UR moves;
//   * a persistent tile loop (any grid works: with the plain grid each CTA takes one tile,
//     with a grid of #SMs each CTA walks tiles, its producer prefetching the next tile while
//     the consumers run the epilogue), tiles visited in groups of kGroupM tile rows (L2 reuse);
//   * a staged epilogue (HG2_EPILOGUE=1, the default): each consumer warp passes its
//     accumulator rows through its own 2 KB shared buffer (stmatrix for a 16-bit C), so C is
//     written with coalesced 16-byte stores instead of 4/8-byte stores scattered over 8 rows
//     (HG2_EPILOGUE=0, kept for comparison);
//   * optional thread-block clusters: HG2_CLUSTER=2 CTAs own vertically adjacent tiles and
//     share their B tile, HG2_CLUSTER_N=2 CTAs horizontally adjacent ones and share A; each
//     CTA loads its share of a shared tile, multicast to the CTAs that share it (L2 traffic of
//     that operand halves). A stage goes back to the producers once every CTA's consumers
//     have released it (one remote arrival per consumer warpgroup and CTA, without a
//     .release.cluster fence: that compiles to MEMBAR.ALL.GPU before every arrival).
//
//   * HG2_PINGPONG=1 (BN 128): each consumer warpgroup owns whole 128 x 128 tiles (two m64
//     wgmma per k16 step) and the two alternate (a `turn` mbarrier pair orders their main
//     loops), so one warpgroup's epilogue runs under the other's main loop.
//   * HG2_COL_C=1: C (and a split's fp32 partial sums) column-major in the kernel's terms,
//     C[i + j*ldc], stored from the fragments (HG2_EPILOGUE=0). With it a row of layout "col"
//     takes a row-major M x N result with a thin M as C^T = B^T A^T: the long side N on wgmma's
//     M, the thin side on a 32-wide B tile (HG2_BN=32, m64n32k16, B K-major only), so a 12 KB
//     stage leaves room for an 18-stage ring of the long operand's loads.
//
// Entry (tensor maps first). NOTE for launchers: ptxas puts a __grid_constant__ CUtensorMap at
// a 128-byte aligned constant-bank address, i.e. parameter offset 0x70 (112) on sm_90, not 0
// (cuobjdump -elf: EIATTR_KPARAM_INFO). cuLaunchKernel's kernelParams array handles that by
// itself; PyCUDA's packed argument buffer needs 112 bytes of padding first (tma.param_padding,
// tma.first_param_offset).
//   hgemm_v2_wgmma_tma(const __grid_constant__ CUtensorMap tmap_a,
//                      const __grid_constant__ CUtensorMap tmap_b,
//                      int M, int N, int K, float alpha, float beta, void* C, int ldc)
// A is M x K, B is K x N, C row-major (C[i*ldc + j]), pg_half, or float when PG_OUT_F32=1.
// PG_TRANS_A=0: A row-major (K contiguous)    -> tensor map dims {K, M}, box {64, BM / cluster_n}
//                                                (BM = 64*kConsumers), wgmma K-major (trans-a 0)
// PG_TRANS_A=1: A column-major (M contiguous) -> dims {M, K}, box {64, 64}, BM/64 boxes per
//                                                stage, wgmma M-major (trans-a 1)
// PG_TRANS_B=0: B row-major (N contiguous)    -> dims {N, K}, box {64, 64}, BN/64 boxes per
//                                                stage, wgmma N-major (trans-b 1)
// PG_TRANS_B=1: B column-major (K contiguous) -> dims {K, N}, box {64, BN / cluster},
//                                                wgmma K-major (trans-b 0)
// Every map: fp16, CU_TENSOR_MAP_SWIZZLE_128B, zero OOB fill; the host side is
// polygemm/backends/cuda/tma.py. TMA needs 16-byte aligned base addresses and leading
// dimensions that are multiples of 8 elements (variants.json "align": 8); the epilogue's
// half2/float2 stores rely on the same (C 16-byte aligned, ldc % 8 == 0).
// beta == 0 never reads C. Any M, N, K >= 1.
// PG_BATCH=1 (a strided batch): four more parameters after ldc (HG2_BATCH_PARAMS). The work
// units are the tiles of every matrix (unit u: matrix z = u / tiles-per-matrix), so a
// persistent grid walks the whole batch and each producer prefetches the next tile, maybe of
// the next matrix, while the consumers store. A and B are 3-D tensor maps whose third
// dimension is the batch (its byte stride lives in the map), loaded at coordinate
// z * pg_batch_a (pg_batch_b): 1 for a batched operand, 0 for one shared by the whole batch;
// C moves pg_batch_c elements per matrix. With clusters a unit is a cluster's block of tiles
// of one matrix, and the multicast loads take the batch coordinate too (HG2_LOAD_MC).
//
// Shared memory (all swizzled tiles 1024-byte aligned, as the 128-byte swizzle requires):
// stage s = [A tile BM x 64 | B tile 64 x BN]; a K-major tile is rows of 64 k (128 B, one
// swizzle row each); an MN-major tile is boxes of 64 (m or n) x 64 k, one 128-byte row per k.
// Descriptors (PTX "matrix descriptor": start >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO >> 4
// in 32-45, swizzle mode 1 = 128 B in bits 62-63):
//   K-major : SBO = 1024 (next 8 rows), LBO unused; k16 step = start + 32 B.
//   MN-major: SBO = 1024 (next 8 k), LBO = 8192 (next 64-wide MN box); k16 step = start + 2048 B.
// Accumulators: m64nN fp32 fragment, thread t of warp w (in its warpgroup) holds, for each
// n8 block j, rows 16w + t/4 (+8) and columns 8j + 2(t%4) + {0, 1}: d[4j..4j+3].
//
// Launch: blockDim (128 * (kConsumers + 1)); any grid (plain: (ceil(N/BN), ceil(M/BM)),
// persistent: #SMs); with clusters gridDim.x is a multiple of the cluster's CTAs (compiled-in
// cluster dims, 1-D: rank r takes tile row r % HG2_CLUSTER and column r / HG2_CLUSTER of its unit).
// DYNAMIC SHARED MEMORY: kSmemBytes (default 4 x 48 KB + 1024 alignment slack + 256 barrier
// bytes + 8 x 2 KB staged-epilogue buffers = 214272); the launcher raises
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (variants.json "smem_bytes").
// Build: nvcc -cubin -gencode=arch=compute_90a,code=sm_90a (wgmma/setmaxnreg need sm_90a).
// ptxas: 168 registers at entry (setmaxnreg: producer 40, consumers 232), no spills, all builds.
//
// Measurements (epilogues, tile orders, stage counts, clusters, beside cuBLAS):
// docs/benchmarks/README.md and docs/benchmarks/h200_epilogue.md.

#include <cuda.h>  // CUtensorMap
#define PG_HALF_TYPES 1  // pg_half: __half, or __nv_bfloat16 with PG_BF16=1 (common.cuh)
#include <stdint.h>
#include "common.cuh"  // CEIL_DIV, PG_TRANS_A / PG_TRANS_B defaults, pg_half

#ifndef PG_OUT_F32
#define PG_OUT_F32 0
#endif

// Tuning knobs (the shipped configuration is the default; variants.json describes it).
#ifndef HG2_BN
#define HG2_BN 256
#endif
#ifndef HG2_CONSUMERS
#define HG2_CONSUMERS 2
#endif
#ifndef HG2_STAGES
#define HG2_STAGES 4
#endif
#ifndef HG2_GROUP_M  // tile rows per group of the tile order (1, 2, 4, 8 measured: 8 kept)
#define HG2_GROUP_M 8
#endif
#ifndef HG2_GROUP_N  // > 0: groups of this many unit columns walked row by row instead of kGroupM rows
#define HG2_GROUP_N 0
#endif
#ifndef HG2_PINGPONG  // 1: each consumer warpgroup owns whole 128 x BN tiles, alternating
#define HG2_PINGPONG 0
#endif
#ifndef HG2_ENTRY  // a rung built from this source under another name (v3) defines it
#define HG2_ENTRY hgemm_v2_wgmma_tma
#endif
#ifndef HG2_CLUSTER  // CTAs of a cluster along M (vertically adjacent tiles sharing one B tile)
#define HG2_CLUSTER 1
#endif
#ifndef HG2_CLUSTER_N  // CTAs of a cluster along N (horizontally adjacent tiles sharing one A tile)
#define HG2_CLUSTER_N 1
#endif
#ifndef HG2_WATCHDOG  // 1: a wait longer than ~2 s traps (test builds: no silent hangs)
#define HG2_WATCHDOG 0
#endif
#ifndef HG2_COL_C  // 1: C (and a split's partial sums) column-major in the kernel's terms, C[i + j*ldc]
#define HG2_COL_C 0  // (a "col" row: the planner swaps operands for a row-major result)
#endif
#ifndef HG2_EPILOGUE  // 0: C stored straight from the fragments; 1: staged in shared memory;
#define HG2_EPILOGUE 1  // 2: no C store (measurement aid: the main loop alone; C is not written);
#endif                  // 3: staged, then stored by TMA (a third tensor map, tmap_c)
#if HG2_EPILOGUE == 3
#define HG2_TMAP_C_PARAM const __grid_constant__ CUtensorMap tmap_c,
#else
#define HG2_TMAP_C_PARAM
#endif

namespace hgemm_v2 {

constexpr int kBK = 64;                  // one 128-byte swizzle row of fp16
constexpr int kConsumers = HG2_CONSUMERS;
constexpr bool kPingpong = HG2_PINGPONG != 0;
// Cooperative: the consumers split a tile, 64 rows each. Ping-pong: each consumer owns whole
// 128-row tiles (two m64 wgmma per k16 step), the two taking turns on the tensor cores.
constexpr int kBM = kPingpong ? 128 : 64 * kConsumers;
constexpr int kMW = kPingpong ? 2 : 1;   // m64 blocks per consumer warpgroup
constexpr int kBN = HG2_BN;
constexpr int kStages = HG2_STAGES;
constexpr int kGroupM = HG2_GROUP_M;
constexpr int kGroupN = HG2_GROUP_N;
constexpr int kClusterM = HG2_CLUSTER;    // CTAs sharing one B tile (rank % kClusterM: their M position)
constexpr int kClusterN = HG2_CLUSTER_N;  // CTAs sharing one A tile (rank / kClusterM: their N position)
constexpr int kCluster = kClusterM * kClusterN;
constexpr int kThreads = 128 * (kConsumers + 1);
constexpr int kAcc = kBN / 2;            // fp32 accumulators per consumer thread
constexpr int kATileBytes = kBM * kBK * 2;
constexpr int kBTileBytes = kBN * kBK * 2;
constexpr int kStageBytes = kATileBytes + kBTileBytes;
constexpr int kBoxBytes = 64 * 64 * 2;   // one 64 x 64 MN-major box (8 KB)
// Staged epilogue (HG2_EPILOGUE=1): one 16-row x 128-byte buffer per consumer warp, after the
// barriers (a warp stages only its own fragment rows, so no barrier between warps).
constexpr bool kStaged = HG2_EPILOGUE == 1 || HG2_EPILOGUE == 3;
// TMA-store epilogue (HG2_EPILOGUE=3): a 16-bit C of one matrix with beta == 0 leaves each
// warp's buffer through cp.async.bulk.tensor (the warp goes on while the copy drains); other
// builds of that row (fp32 C, batches, K-slices) and beta != 0 take the staged path.
constexpr bool kTmaStore = HG2_EPILOGUE == 3 && !PG_OUT_F32 && !PG_BATCH && !PG_STREAMK;
constexpr int kEpiRowBytes = 128;                  // a staged chunk row: 64 fp16 or 32 fp32 columns
constexpr int kEpiWarpBytes = 16 * kEpiRowBytes;   // a warp's 16 accumulator rows of one m64 block
// TMA store: two buffers per warp (one fills while the other drains), 1024-byte aligned (the
// 128-byte swizzle's period), so the barriers get a 1024-byte slot of their own before them.
constexpr int kEpiBuffers = HG2_EPILOGUE == 3 ? 2 : 1;
constexpr int kEpiBytes = kStaged ? kEpiBuffers * 4 * kConsumers * kEpiWarpBytes : 0;
// (a ring deeper than 15 stages needs more than 256 bytes of barriers: 512)
constexpr int kBarBytes = HG2_EPILOGUE == 3 ? 1024 : 2 * kStages * 8 + 16 <= 256 ? 256 : 512;
constexpr int kSmemBytes = kStages * kStageBytes + 1024 + kBarBytes + kEpiBytes;
constexpr int kTransA = PG_TRANS_A ? 1 : 0;  // wgmma trans-a: 1 = M-major
constexpr int kTransB = PG_TRANS_B ? 0 : 1;  // wgmma trans-b: 1 = N-major (B row-major)

static_assert(kConsumers == 1 || kConsumers == 2, "1 or 2 consumer warpgroups");
static_assert(kBN == 32 || kBN == 64 || kBN == 128 || kBN == 192 || kBN == 256, "BN is 32, 64, 128, 192 or 256 (wgmma n)");
// A 32-wide B tile is K-major only: an N-major box is 64 wide (the 128-byte swizzle row), and
// the staged epilogues move 64-column chunks of a 16-bit C.
static_assert(kBN >= 64 || (PG_TRANS_B && !kStaged && kClusterM == 1), "BN 32: B column-major, HG2_EPILOGUE=0, no B multicast");
static_assert(!HG2_COL_C || (HG2_EPILOGUE == 0 || HG2_EPILOGUE == 2), "HG2_COL_C stores from the fragments (HG2_EPILOGUE=0)");
static_assert(!kPingpong || (kConsumers == 2 && kCluster == 1 && kBN == 128),
              "ping-pong: 2 consumers, BN 128 (2 x 64 accumulators), no cluster");
static_assert(!PG_SPLIT || (PG_BATCH && PG_OUT_F32), "PG_SPLIT: the K-slices are a batch of fp32 partial tiles");
static_assert(!PG_STREAMK || (!PG_BATCH && !PG_SPLIT && !kPingpong && kCluster == 1),
              "PG_STREAMK: one product, cooperative consumers, no cluster");
static_assert((kClusterM == 1 || kClusterM == 2) && (kClusterN == 1 || kClusterN == 2), "clusters of 1 or 2 CTAs along M and N");
static_assert(kClusterN == 1 || (PG_TRANS_A ? kBM / 64 : kBM) % kClusterN == 0, "the A tile splits between the CTAs sharing it");
static_assert(kSmemBytes <= 227 * 1024, "dynamic shared memory above the sm_90 limit");
static_assert(!kTmaStore || kBN % 64 == 0, "TMA store: C leaves in 64-column chunks");
static_assert(2 * kStages * 8 + 16 <= kBarBytes, "barrier area");

// ------------------------------------------------------------------------------------------
// PTX wrappers
// ------------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Arrive on the barrier at the same offset in CTA `rank` of the cluster.
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t rank) {
    asm volatile(
        "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" ::"r"(bar),
        "r"(rank)
        : "memory");
}
// Block until the phase with parity `parity` of the barrier has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#if HG2_WATCHDOG
    const long long t0 = clock64();
#endif
    uint32_t done;
    do {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
#if HG2_WATCHDOG
        if (!done && clock64() - t0 > 4000000000ll) __trap();
#endif
    } while (!done);
}

// 2-D tile load global -> shared (this CTA), completion on `bar` (bytes counted as tx).
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                            uint32_t bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}
// 3-D tile load (PG_BATCH: the batch is the map's third dimension).
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                            int c2, uint32_t bar) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
        : "memory");
}
// Same, delivered to the same shared offset (data and barrier) of every CTA in `mask`.
__device__ __forceinline__ void tma_load_2d_mc(uint32_t dst, const CUtensorMap* map, int c0,
                                               int c1, uint32_t bar, uint16_t mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
        : "memory");
}
__device__ __forceinline__ void tma_load_3d_mc(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                               int c2, uint32_t bar, uint16_t mask) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"(mask)
        : "memory");
}
// A tile load of this CTA (HG2_LOAD) or multicast to the CTAs in `mask` (HG2_LOAD_MC), at
// batch coordinate z under PG_BATCH (the maps' third dimension), 2-D otherwise (z unused).
#if PG_BATCH
#define HG2_LOAD(dst, map, c0, c1, z, bar) tma_load_3d(dst, map, c0, c1, z, bar)
#define HG2_LOAD_MC(dst, map, c0, c1, z, bar, mask) tma_load_3d_mc(dst, map, c0, c1, z, bar, mask)
#define HG2_BATCH_PARAMS , int pg_batch_count, int pg_batch_a, int pg_batch_b, long long pg_batch_c
#else
#define HG2_BATCH_PARAMS
#define HG2_LOAD(dst, map, c0, c1, z, bar) tma_load_2d(dst, map, c0, c1, bar)
#define HG2_LOAD_MC(dst, map, c0, c1, z, bar, mask) tma_load_2d_mc(dst, map, c0, c1, bar, mask)
#endif

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                     : "memory");
}

// Shared-memory matrix descriptor, 128-byte swizzle (PTX "matrix descriptor"), kept as its two
// 32-bit words. Every descriptor here has SBO = 1024 and the 128-byte swizzle mode, so the
// high word is one constant (kDescHi) and only the low word (start address >> 4 in bits 0-13,
// LBO >> 4 in bits 16-29) moves from one wgmma to the next. Why: built as a 64-bit value, each
// k16 step cost a 64-bit add and four R2UR moves per wgmma in the main loop (about 80
// instructions per k-tile per warp); with the start address below 256 KB the low word's add
// never carries into LBO, and the asm joins the words itself (mov.b64 {lo, hi}).
constexpr uint32_t kDescHi = (1024u >> 4) | (1u << 30);  // SBO 1024 B (bits 32-45), swizzle 128 B (62-63)
__device__ __forceinline__ uint32_t desc_lo(uint32_t addr, uint32_t lbo) {
    return ((addr & 0x3FFFF) >> 4) | ((lbo >> 4) << 16);
}

// wgmma.mma_async m64nNk16, fp32 += fp16 * fp16, A and B from shared memory (descriptors),
// scale-d = 1 (accumulate), imm-scale-a/b = 1, trans-a / trans-b compile-time.
// (Operand lists written out by a small generator: N/2 accumulator registers.)
template <int kTA, int kTB>
__device__ __forceinline__ void wgmma_m64n32k16(float (&d)[16], uint32_t da, uint32_t db) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 da, db;\nsetp.ne.b32 p, %18, 0;\n"
        "mov.b64 da, {%16, %21};\nmov.b64 db, {%17, %21};\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32" PG_MMA_AB PG_MMA_AB " {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
        "}, da, db, p, 1, 1, %19, %20;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "r"(da), "r"(db), "r"(1), "n"(kTA), "n"(kTB), "r"(kDescHi));
}

template <int kTA, int kTB>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], uint32_t da, uint32_t db) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 da, db;\nsetp.ne.b32 p, %34, 0;\n"
        "mov.b64 da, {%32, %37};\nmov.b64 db, {%33, %37};\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32" PG_MMA_AB PG_MMA_AB " {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, da, db, p, 1, 1, %35, %36;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(da), "r"(db), "r"(1), "n"(kTA), "n"(kTB), "r"(kDescHi));
}

template <int kTA, int kTB>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint32_t da, uint32_t db) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 da, db;\nsetp.ne.b32 p, %66, 0;\n"
        "mov.b64 da, {%64, %69};\nmov.b64 db, {%65, %69};\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32" PG_MMA_AB PG_MMA_AB " {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, da, db, p, 1, 1, %67, %68;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(da), "r"(db), "r"(1), "n"(kTA), "n"(kTB), "r"(kDescHi));
}

template <int kTA, int kTB>
__device__ __forceinline__ void wgmma_m64n192k16(float (&d)[96], uint32_t da, uint32_t db) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 da, db;\nsetp.ne.b32 p, %98, 0;\n"
        "mov.b64 da, {%96, %101};\nmov.b64 db, {%97, %101};\n"
        "wgmma.mma_async.sync.aligned.m64n192k16.f32" PG_MMA_AB PG_MMA_AB " {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
        "}, da, db, p, 1, 1, %99, %100;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
        : "r"(da), "r"(db), "r"(1), "n"(kTA), "n"(kTB), "r"(kDescHi));
}

template <int kTA, int kTB>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint32_t da, uint32_t db) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 da, db;\nsetp.ne.b32 p, %130, 0;\n"
        "mov.b64 da, {%128, %133};\nmov.b64 db, {%129, %133};\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32" PG_MMA_AB PG_MMA_AB " {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, da, db, p, 1, 1, %131, %132;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "r"(da), "r"(db), "r"(1), "n"(kTA), "n"(kTB), "r"(kDescHi));
}

template <int kTA, int kTB>
__device__ __forceinline__ void wgmma_tile(float (&d)[kAcc], uint32_t da, uint32_t db) {
#if HG2_BN == 256
    wgmma_m64n256k16<kTA, kTB>(d, da, db);
#elif HG2_BN == 192
    wgmma_m64n192k16<kTA, kTB>(d, da, db);
#elif HG2_BN == 128
    wgmma_m64n128k16<kTA, kTB>(d, da, db);
#elif HG2_BN == 32
    wgmma_m64n32k16<kTA, kTB>(d, da, db);
#else
    wgmma_m64n64k16<kTA, kTB>(d, da, db);
#endif
}

#if PG_OUT_F32
using OutT = float;
#else
using OutT = pg_half;
#endif

// One output (row, col) of a column-major C (HG2_COL_C): alpha * v + beta * C.
__device__ __forceinline__ void store_one(OutT* p, float v, float beta) {
#if PG_OUT_F32
    *p = beta != 0.f ? fmaf(beta, *p, v) : v;
#else
    *p = pg_float2half_rn(beta != 0.f ? fmaf(beta, pg_half2float(*p), v) : v);
#endif
}

// Two adjacent outputs (row, col), (row, col + 1); col is even. Stores are predicated on N;
// with ldc % 8 == 0 and a 16-byte aligned C the pair is 4 (8) byte aligned. HG2_COL_C: the two
// lie ldc apart (a column-major C), each stored alone.
__device__ __forceinline__ void store_pair(OutT* __restrict__ C, int ldc, int row, int col, int N,
                                           float v0, float v1, float alpha, float beta) {
#if HG2_COL_C
    OutT* q = C + static_cast<size_t>(col) * ldc + row;
    if (col < N) store_one(q, alpha * v0, beta);
    if (col + 1 < N) store_one(q + ldc, alpha * v1, beta);
    return;
#endif
    OutT* p = C + static_cast<size_t>(row) * ldc + col;
    v0 *= alpha;
    v1 *= alpha;
    if (col + 1 < N) {
#if PG_OUT_F32
        float2* q = reinterpret_cast<float2*>(p);
        if (beta != 0.f) {
            const float2 old = *q;
            v0 = fmaf(beta, old.x, v0);
            v1 = fmaf(beta, old.y, v1);
        }
        *q = make_float2(v0, v1);
#else
        pg_half2* q = reinterpret_cast<pg_half2*>(p);
        if (beta != 0.f) {
            const float2 old = pg_half22float2(*q);
            v0 = fmaf(beta, old.x, v0);
            v1 = fmaf(beta, old.y, v1);
        }
        *q = pg_floats2half2_rn(v0, v1);
#endif
    } else if (col < N) {
#if PG_OUT_F32
        *p = beta != 0.f ? fmaf(beta, *p, v0) : v0;
#else
        *p = pg_float2half_rn(beta != 0.f ? fmaf(beta, pg_half2float(*p), v0) : v0);
#endif
    }
}

// ------------------------------------------------------------------------------------------
// Staged epilogue (HG2_EPILOGUE=1). Why: the fragment layout gives each store instruction
// 8 rows x 16 bytes (fp16) -- half-used 32-byte sectors and kBN/4 store instructions per row
// pair. Instead each consumer warp moves its 16 rows through its own 16 x 128-byte shared
// buffer one 128-byte column chunk at a time (stmatrix.x4 for a 16-bit C, st.shared.v2.f32
// for fp32 values) and reads the chunk back one 16-byte vector per lane: each store
// instruction then writes 4 whole 128-byte row segments of C. beta != 0 with a 16-bit C
// stages fp32 alpha*acc (32-column chunks) so that alpha*acc + beta*C is rounded once.
// Element conversions live in out_pack2 / out_unpack2 (one place for another 16-bit type).
// ------------------------------------------------------------------------------------------
// 16-byte unit u of staged row r sits at unit u ^ epi_swz(r): the 8 rows of one stmatrix
// 8x8 matrix (one unit) land in 8 distinct units, and so do the 4 rows x 2 units a half-warp
// writes with st.shared.v2.f32 -- both without bank conflicts; reads take whole rows.
__device__ __forceinline__ uint32_t epi_addr(uint32_t buf, int r, int u) {
    const int swz = ((r & 3) << 1) | ((r >> 2) & 1);
    return buf + static_cast<uint32_t>(r * kEpiRowBytes + ((u ^ swz) << 4));
}
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                            uint32_t r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
                 "r"(r0), "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}
__device__ __forceinline__ void sts_f32x2(uint32_t addr, float a, float b) {
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(a), "f"(b) : "memory");
}
__device__ __forceinline__ uint4 lds_128(uint32_t addr) {
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(addr)
                 : "memory");
    return v;
}
// Two 16-bit outputs in one 32-bit word (lo in the low half: the lower column), and back.
__device__ __forceinline__ uint32_t out_pack2(float lo, float hi) {
    const pg_half2 h = pg_floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ float2 out_unpack2(uint32_t w) {
    return pg_half22float2(*reinterpret_cast<const pg_half2*>(&w));
}

// Row segment stores of one lane: `left` = N - (its first column); 16 bytes when whole.
// 8 16-bit outputs (packed pairs in v).
__device__ __forceinline__ void put8_16bit(OutT* p, uint4 v, int left) {
    if (left >= 8) {
        *reinterpret_cast<uint4*>(p) = v;
    } else {
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
        uint16_t* q = reinterpret_cast<uint16_t*>(p);
#pragma unroll
        for (int e = 0; e < 8; ++e)
            if (e < left) q[e] = static_cast<uint16_t>(w[e / 2] >> (16 * (e % 2)));
    }
}
// 4 fp32 values v (already alpha * acc): + beta * C when beta != 0, stored as OutT.
__device__ __forceinline__ void put4_f32(OutT* p, float4 v, int left, float beta) {
#if PG_OUT_F32
    if (left >= 4) {
        float4* q = reinterpret_cast<float4*>(p);
        if (beta != 0.f) {
            const float4 o = *q;
            v.x = fmaf(beta, o.x, v.x);
            v.y = fmaf(beta, o.y, v.y);
            v.z = fmaf(beta, o.z, v.z);
            v.w = fmaf(beta, o.w, v.w);
        }
        *q = v;
    } else {
        const float f[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int e = 0; e < 4; ++e)
            if (e < left) p[e] = beta != 0.f ? fmaf(beta, p[e], f[e]) : f[e];
    }
#else
    if (left >= 4) {
        uint2* q = reinterpret_cast<uint2*>(p);
        if (beta != 0.f) {
            const uint2 o = *q;
            const float2 o0 = out_unpack2(o.x), o1 = out_unpack2(o.y);
            v.x = fmaf(beta, o0.x, v.x);
            v.y = fmaf(beta, o0.y, v.y);
            v.z = fmaf(beta, o1.x, v.z);
            v.w = fmaf(beta, o1.y, v.w);
        }
        *q = make_uint2(out_pack2(v.x, v.y), out_pack2(v.z, v.w));
    } else {
        const float f[4] = {v.x, v.y, v.z, v.w};
        uint16_t* q = reinterpret_cast<uint16_t*>(p);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            if (e < left) {
                float x = f[e];
                if (beta != 0.f) x = fmaf(beta, out_unpack2(q[e]).x, x);
                q[e] = static_cast<uint16_t>(out_pack2(x, 0.f));
            }
        }
    }
#endif
}

// 64-column chunk c of one consumer warp's 16 accumulator rows, times alpha, as 16-bit pairs
// into a staged buffer: one stmatrix.x4 takes n8 blocks j, j+1 (rows 0-7 and 8-15 of each),
// lane l giving row l%8 (+8) of matrix l/8. addr(r, u): the address of 16-byte unit u of row r
// (each buffer's own swizzle).
template <typename Addr>
__device__ __forceinline__ void stage_chunk16(const float (&d)[kAcc], int c, float alpha, int lane, Addr addr) {
    const int mi = lane >> 3;
    const int srow = (mi & 1) * 8 + (lane & 7);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const int j = 8 * c + 2 * q;
        stmatrix_x4(addr(srow, 2 * q + (mi >> 1)), out_pack2(alpha * d[4 * j], alpha * d[4 * j + 1]),
                    out_pack2(alpha * d[4 * j + 2], alpha * d[4 * j + 3]),
                    out_pack2(alpha * d[4 * j + 4], alpha * d[4 * j + 5]),
                    out_pack2(alpha * d[4 * j + 6], alpha * d[4 * j + 7]));
    }
}

// One consumer warp's 16 accumulator rows of one m64 block (fragment: n8 block j in
// d[4j..4j+3], rows lane/4 and lane/4 + 8) to C rows row0.., columns n0.., through `buf`.
__device__ __forceinline__ void epilogue_staged(const float (&d)[kAcc], uint32_t buf,
                                                OutT* __restrict__ C, int ldc, int row0, int n0,
                                                int M, int N, float alpha, float beta, int lane) {
    if (row0 >= M) return;  // warp-uniform: none of its rows exists
    __syncwarp();           // stmatrix is .sync.aligned; the buffer's last reads are done
    const int rr = lane >> 3, uu = lane & 7;  // read side: rows rr + 4p, 16-byte unit uu
#if !PG_OUT_F32
    if (beta == 0.f) {
        // 64-column chunks of 16-bit results (stage_chunk16)
#pragma unroll
        for (int c = 0; c < kBN / 64; ++c) {
            if (n0 + 64 * c >= N) break;  // warp-uniform
            stage_chunk16(d, c, alpha, lane, [buf](int r, int u) { return epi_addr(buf, r, u); });
            __syncwarp();
#pragma unroll
            for (int p = 0; p < 4; ++p) {
                const int r = 4 * p + rr;
                const uint4 v = lds_128(epi_addr(buf, r, uu));
                const int row = row0 + r, col = n0 + 64 * c + 8 * uu;
                if (row < M && col < N) put8_16bit(C + static_cast<size_t>(row) * ldc + col, v, N - col);
            }
            __syncwarp();
        }
        return;
    }
#endif
    // 32-column chunks of fp32 values; lane l holds row l/4 (+8), columns 2(l%4) + {0, 1} of
    // each n8 block: unit 2jj + (l%4)/2, byte 8 * (l%2) within it.
    const int srow = lane >> 2;
    const int su = (lane & 3) >> 1;
    const uint32_t sbyte = (lane & 1) * 8;
#pragma unroll
    for (int c = 0; c < kBN / 32; ++c) {
        if (n0 + 32 * c >= N) break;  // warp-uniform
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
            const int j = 4 * c + jj;
#pragma unroll
            for (int h = 0; h < 2; ++h)
                sts_f32x2(epi_addr(buf, srow + 8 * h, 2 * jj + su) + sbyte, alpha * d[4 * j + 2 * h],
                          alpha * d[4 * j + 2 * h + 1]);
        }
        __syncwarp();
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            const int r = 4 * p + rr;
            const uint4 w = lds_128(epi_addr(buf, r, uu));
            const float4 v = make_float4(__uint_as_float(w.x), __uint_as_float(w.y),
                                         __uint_as_float(w.z), __uint_as_float(w.w));
            const int row = row0 + r, col = n0 + 32 * c + 4 * uu;
            if (row < M && col < N) put4_f32(C + static_cast<size_t>(row) * ldc + col, v, N - col, beta);
        }
        __syncwarp();
    }
}

#if HG2_EPILOGUE == 3
// ------------------------------------------------------------------------------------------
// TMA-store epilogue (HG2_EPILOGUE=3). Why: the staged epilogue's read-back and 16-byte global
// stores are issued by every lane and wait in the LSU when all SMs store their tiles at once;
// here each 16 x 64 chunk goes from the warp's buffer to C by one cp.async.bulk.tensor that
// lane 0 issues, and the warp stages the next chunk (two buffers) or starts its next tile
// while the copy drains. The buffer is laid out as the tensor map's 128-byte swizzle wants
// (16-byte unit u of row r at unit u ^ (r % 8)), which is also conflict-free for stmatrix.
// TMA clips the rows past M and columns past N.
// ------------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t epi_addr_tma(uint32_t buf, int r, int u) {
    return buf + static_cast<uint32_t>(r * kEpiRowBytes + ((u ^ (r & 7)) << 4));
}
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, uint32_t src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                     reinterpret_cast<uint64_t>(map)),
                 "r"(src), "r"(c0), "r"(c1)
                 : "memory");
}
// Lane 0's bulk copies: commit the ones issued, wait until at most N groups still read shared
// memory (or, bulk_wait_all, until all are complete).
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// One consumer warp's 16 accumulator rows of one m64 block (beta == 0, 16-bit C) to C rows
// row0.., columns n0.., through its buffers buf and buf + kEpiWarpBytes.
__device__ __forceinline__ void epilogue_tma(const float (&d)[kAcc], uint32_t buf, const CUtensorMap* tmap_c,
                                             int row0, int n0, int M, int N, float alpha, int lane) {
    if (row0 >= M) return;  // warp-uniform: none of its rows exists
    if (lane == 0) bulk_wait_read<0>();  // the last tile's copies have left both buffers
    __syncwarp();
#pragma unroll
    for (int c = 0; c < kBN / 64; ++c) {
        if (n0 + 64 * c >= N) break;  // warp-uniform
        const uint32_t b = buf + (c & 1) * kEpiWarpBytes;
        if (c >= 2) {  // this buffer's copy (chunk c - 2) has read it
            if (lane == 0) bulk_wait_read<1>();
            __syncwarp();
        }
        stage_chunk16(d, c, alpha, lane, [b](int r, int u) { return epi_addr_tma(b, r, u); });
        // the shared writes (generic proxy) become visible to the copy (async proxy)
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncwarp();
        if (lane == 0) {
            tma_store_2d(tmap_c, b, n0 + 64 * c, row0);
            bulk_commit();
        }
    }
}
#endif

// Tile `t` of the cluster-level grid (kCluster vertically adjacent BM x BN tiles per unit) in
// grouped order: kGroupM unit rows are walked column by column (L2 reuse of A rows and B
// columns among the CTAs running at the same time); with kGroupN > 0, kGroupN unit columns row
// by row instead. `g` counts along the grouped axis (`along` units), `o` along the other.
__device__ __forceinline__ void grouped_walk(int t, int along, int across, int group_size, int& g, int& o) {
    const int per_group = group_size * across;
    const int group = t / per_group;
    const int first = group * group_size;
    const int size = min(along - first, group_size);
    const int r = t - group * per_group;
    g = first + r % size;
    o = r / size;
}

__device__ __forceinline__ void unit_coords(int t, int units_m, int units_n, int& um, int& un) {
    if (kGroupN > 0)
        grouped_walk(t, units_n, units_m, kGroupN, un, um);
    else
        grouped_walk(t, units_m, units_n, kGroupM, um, un);
}

// A consumer warpgroup hands a stage back to the producers: one arrival on the stage's empty
// barrier of each CTA of the cluster, from thread `rank` of the warpgroup. Why one and not one
// per warp: a wgmma is one warpgroup-wide operation, so the wait that retires it in one warp
// retires it for the warpgroup; four remote arrivals per warpgroup and stage were four times
// the cluster traffic the release needs.
__device__ __forceinline__ void release_stage(uint32_t bar, int tid) {
    if (kCluster > 1) {
        if (tid < kCluster) mbar_arrive_cluster(bar, static_cast<uint32_t>(tid));
    } else if (tid == 0) {
        mbar_arrive(bar);
    }
}

// The work of one CTA, item by item: its whole units (first + i * stride), then (PG_STREAMK)
// its run [sk_begin, sk_end) of the stream-K region's k-tiles (the units from sk_unit0 on,
// KT k-tiles each, in unit order), one item per unit the run touches. Item i is k-tiles
// [kb, ke) of unit `unit`. Producer and consumers walk the same items.
struct Work {
    int first, stride, count;
    int KT;
#if PG_STREAMK
    int sk_unit0;
    long long sk_begin, sk_end, sk_run;  // sk_run: k-tiles per CTA (the last run may be shorter)
#endif
    __device__ __forceinline__ bool item(int i, int& unit, int& kb, int& ke) const {
        if (i < count) {
            unit = first + i * stride;
            kb = 0;
            ke = KT;
            return true;
        }
#if PG_STREAMK
        const long long t = sk_begin / KT + (i - count);
        const long long a = max(sk_begin, t * KT), e = min(sk_end, (t + 1) * KT);
        if (a >= e) return false;
        unit = sk_unit0 + static_cast<int>(t);
        kb = static_cast<int>(a - t * KT);
        ke = static_cast<int>(e - t * KT);
        return true;
#else
        return false;
#endif
    }
};

}  // namespace hgemm_v2

// HG2_TRACE=1 (measurement aid, tools/trace_items.py): thread 128 (the first consumer's first
// lane) writes %clock64 and %globaltimer at fixed points of each block's walk into the module's
// hg2_trace (block b < 1024: 128 words, SM clocks [0, 64), global timer [64, 128)), and each
// item's unit and k-tile range into hg2_trace_items (16 a block). Marks: 0 start; item j < 14:
// 1+4j it begins, 2+4j its first stage arrived, 3+4j its last wgmma retired, 4+4j stream-K done
// (its slot stored and flagged, or the later runs added); 57-59 a stream-K slot's stores issued,
// fenced, met at the barrier; 60 a later run's flag seen; 62 the consumers' walk done; and in
// the SM-clock half's word 63, the block's %smid.
#ifndef HG2_RING_UNROLL  // 0: the consumers' k-tile loop not unrolled over the ring (kept for comparison)
#define HG2_RING_UNROLL 1
#endif
#ifndef HG2_TRACE
#define HG2_TRACE 0
#endif
#if HG2_TRACE
extern "C" __device__ unsigned long long hg2_trace[1024 * 128];
extern "C" __device__ unsigned long long hg2_trace_items[1024 * 16];
#define HG2_MARK(slot)                                                                             \
    do {                                                                                           \
        if (threadIdx.x == 128 && bid < 1024) {                                                    \
            unsigned long long c_, g_;                                                             \
            asm volatile("mov.u64 %0, %%clock64;" : "=l"(c_));                                     \
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g_));                                 \
            hg2_trace[bid * 128 + (slot)] = c_;                                                    \
            hg2_trace[bid * 128 + 64 + (slot)] = g_;                                               \
        }                                                                                          \
    } while (0)
#else
#define HG2_MARK(slot) do {} while (0)
#endif

extern "C" __global__ void
#if HG2_CLUSTER * HG2_CLUSTER_N > 1
__cluster_dims__(HG2_CLUSTER * HG2_CLUSTER_N, 1, 1)
#endif
__launch_bounds__(hgemm_v2::kThreads, 1)
HG2_ENTRY(const __grid_constant__ CUtensorMap tmap_a,
                   const __grid_constant__ CUtensorMap tmap_b, HG2_TMAP_C_PARAM int M, int N, int K, float alpha,
                   float beta, void* C, int ldc HG2_BATCH_PARAMS PG_SPLIT_PARAMS PG_STREAMK_PARAMS)
{
    using namespace hgemm_v2;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const uint32_t full_bar = base + kStages * kStageBytes;  // kStages x 8 bytes
    const uint32_t empty_bar = full_bar + kStages * 8;       // kStages x 8 bytes
    const uint32_t turn_bar = empty_bar + kStages * 8;       // 2 x 8 bytes (ping-pong)
    const uint32_t epi_buf = full_bar + kBarBytes;           // kEpiBytes (staged epilogue)

    // The warpgroup index through a shuffle: ptxas then knows it is warp-uniform and keeps the
    // consumers' descriptors and barrier addresses in uniform registers.
    const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
    const int tid = threadIdx.x % 128;
    const uint32_t rank = (kCluster > 1) ? cluster_rank() : 0u;
    const int rank_m = static_cast<int>(rank) % kClusterM, rank_n = static_cast<int>(rank) / kClusterM;

    const int units_m = CEIL_DIV(CEIL_DIV(M, kBM), kClusterM);
    const int units_n = CEIL_DIV(CEIL_DIV(N, kBN), kClusterN);
    const int per_matrix = units_m * units_n;
#if PG_BATCH
    const int num_units = per_matrix * pg_batch_count;  // the tiles of every matrix of the batch
#else
    const int num_units = per_matrix;
#endif
    const int KT = CEIL_DIV(K, kBK);
    // Work unit of this CTA: its cluster's index among all clusters (a cluster = kCluster
    // consecutive CTAs along x; both walk the same units).
    const int nblocks = gridDim.x * gridDim.y;
    const int bid = blockIdx.x + blockIdx.y * gridDim.x;
    const int first_unit = bid / kCluster;
    const int unit_stride = nblocks / kCluster;
    Work work;
    work.KT = KT;
#if PG_STREAMK
    {
        // whole units for all but the last one or two waves, whose k-tiles are shared out
        const int dp = num_units % nblocks == 0 ? num_units : max(num_units / nblocks - 1, 0) * nblocks;
        const long long region = static_cast<long long>(num_units - dp) * KT;
        work.first = bid;
        work.stride = nblocks;
        work.count = dp > bid ? (dp - bid + nblocks - 1) / nblocks : 0;
        work.sk_unit0 = dp;
        work.sk_run = (region + nblocks - 1) / nblocks;
        work.sk_begin = min(static_cast<long long>(bid) * work.sk_run, region);
        work.sk_end = min(work.sk_begin + work.sk_run, region);
    }
#else
    work.first = first_unit;
    work.stride = unit_stride;
    work.count = first_unit < num_units ? (num_units - first_unit + unit_stride - 1) / unit_stride : 0;
#endif

    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; ++s) {
            mbar_init(full_bar + 8 * s, 1);
            // one arrival per consumer warpgroup reading the stage, from each CTA of the cluster
            mbar_init(empty_bar + 8 * s, (kPingpong ? 1 : kConsumers) * kCluster);
        }
        mbar_init(turn_bar, 4);      // ping-pong: consumer 0 may start its next main loop
        mbar_init(turn_bar + 8, 4);  // ... consumer 1 may start
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&tmap_a)) : "memory");
        asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&tmap_b)) : "memory");
#if HG2_EPILOGUE == 3
        if (kTmaStore)
            asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&tmap_c)) : "memory");
#endif
    }
    if (kCluster > 1) cluster_sync();  // peers' barriers initialised before any multicast
    else __syncthreads();
    HG2_MARK(0);
#if HG2_TRACE
    if (threadIdx.x == 128 && bid < 1024) {  // the SM it runs on, in the clock half's last word
        unsigned int sm_;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm_));
        hg2_trace[bid * 128 + 63] = sm_;
    }
#endif

    if (wg == 0) {
        // ---------------------------------------------------------------- producer
#if HG2_CONSUMERS == 2
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
#endif
        if (tid == 0) {
            int s = 0;
            uint32_t ph = 0;
            // multicast masks: the CTAs of this CTA's column of the cluster (same N position:
            // they share its B tile) and of its row (same M position: they share its A tile)
            const uint16_t mask_b = static_cast<uint16_t>(((1u << kClusterM) - 1u) << (rank_n * kClusterM));
            uint16_t mask_a = 0;
#pragma unroll
            for (int j = 0; j < kClusterN; ++j) mask_a |= static_cast<uint16_t>(1u << (rank_m + kClusterM * j));
            (void)mask_a;
            (void)mask_b;
            for (int i = 0;; ++i) {
                int u, kb, ke;
                if (!work.item(i, u, kb, ke)) break;
                int um, un;
#if PG_BATCH
                const int z = u / per_matrix;
                const int za = z * pg_batch_a, zb = z * pg_batch_b;  // batch coordinates in the maps
                unit_coords(u - z * per_matrix, units_m, units_n, um, un);
#else
                unit_coords(u, units_m, units_n, um, un);
#endif
                const int m0 = (um * kClusterM + rank_m) * kBM;
                const int n0 = (un * kClusterN + rank_n) * kBN;
                for (int kt = kb; kt < ke; ++kt) {
                    const uint32_t fb = full_bar + 8 * s;
                    mbar_wait(empty_bar + 8 * s, ph ^ 1);  // fresh barrier: passes at once
                    mbar_arrive_expect_tx(fb, kStageBytes);
                    const uint32_t sa = base + s * kStageBytes;
                    const uint32_t sb = sa + kATileBytes;
                    const int k0 = kt * kBK;
#if PG_TRANS_A
#pragma unroll
                    for (int i = 0; i < kBM / 64; ++i) {
                        if (kClusterN == 1)
                            HG2_LOAD(sa + i * kBoxBytes, &tmap_a, m0 + 64 * i, k0, za, fb);
                        else if (i % kClusterN == rank_n)  // this CTA's share of the M-major A tile's boxes
                            HG2_LOAD_MC(sa + i * kBoxBytes, &tmap_a, m0 + 64 * i, k0, za, fb, mask_a);
                    }
#else
                    if (kClusterN == 1)
                        HG2_LOAD(sa, &tmap_a, k0, m0, za, fb);
                    else  // rows [rank_n*BM/2, +BM/2) of the K-major A tile
                        HG2_LOAD_MC(sa + rank_n * (kATileBytes / kClusterN), &tmap_a, k0,
                                    m0 + rank_n * (kBM / kClusterN), za, fb, mask_a);
#endif
#if PG_TRANS_B
                    if (kClusterM > 1) {  // rows [rank_m*BN/2, +BN/2) of the K-major B tile
                        HG2_LOAD_MC(sb + rank_m * (kBTileBytes / kClusterM), &tmap_b, k0,
                                    n0 + rank_m * (kBN / kClusterM), zb, fb, mask_b);
                    } else {
                        HG2_LOAD(sb, &tmap_b, k0, n0, zb, fb);
                    }
#else
                    if (kClusterM > 1) {  // the N-major B tile's boxes jj with jj % 2 == rank_m
#pragma unroll
                        for (int jj = 0; jj < kBN / 64; ++jj)
                            if (jj % kClusterM == rank_m)
                                HG2_LOAD_MC(sb + jj * kBoxBytes, &tmap_b, n0 + 64 * jj, k0, zb, fb, mask_b);
                    } else {
#pragma unroll
                        for (int j = 0; j < kBN / 64; ++j)
                            HG2_LOAD(sb + j * kBoxBytes, &tmap_b, n0 + 64 * j, k0, zb, fb);
                    }
#endif
                    if (++s == kStages) {
                        s = 0;
                        ph ^= 1;
                    }
                }
            }
        }
        __syncwarp();
    } else {
        // ---------------------------------------------------------------- consumers
#if HG2_CONSUMERS == 2
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
#endif
        const int cw = wg - 1;               // consumer index (cooperative: its 64-row slice)
        const int warp = tid / 32, lane = tid % 32;
        OutT* const Cp = static_cast<OutT*>(C);
        // Per-stage descriptor offsets (bytes) of this consumer's A slice and of B.
        constexpr uint32_t kAStep = PG_TRANS_A ? 2048u : 32u;  // per k16 step
        constexpr uint32_t kBStep = PG_TRANS_B ? 32u : 2048u;
        const uint32_t da0 = desc_lo(base, PG_TRANS_A ? 8192 : 16);
        const uint32_t db0 = desc_lo(base + kATileBytes, PG_TRANS_B ? 16 : 8192);
        // This warpgroup's first m64 block inside the A tile (cooperative: its own slice).
        const uint32_t da_wg = da0 + (kPingpong ? 0u : static_cast<uint32_t>(cw * kBoxBytes) >> 4);
        // Tiles of this consumer: every tile of the CTA (cooperative) or every other one
        // (ping-pong; the ring iterations of the partner's tiles are skipped).
        const int my_first = kPingpong ? cw : 0;
        const int my_step = kPingpong ? 2 : 1;
        uint32_t turn_ph = 0;
        float acc[kMW][kAcc];
#if PG_STREAMK
        long long ring = 0;  // ring iteration of the next item's first k-tile
#endif
        for (int j = my_first;; j += my_step) {
            int u, kb, ke;
            if (!work.item(j, u, kb, ke)) break;
#if HG2_TRACE
            if (j < 14) {
                HG2_MARK(1 + 4 * j);
                if (threadIdx.x == 128 && bid < 1024)
                    hg2_trace_items[bid * 16 + j] = (static_cast<unsigned long long>(u) << 32) |
                                                 (static_cast<unsigned long long>(kb & 0xFFFF) << 16) | (ke & 0xFFFF);
            }
#endif
            int um, un;
#if PG_BATCH
            const int z = u / per_matrix;
            OutT* const Cz = Cp + static_cast<long long>(z) * pg_batch_c;  // this matrix's C
            unit_coords(u - z * per_matrix, units_m, units_n, um, un);
#else
            OutT* const Cz = Cp;
            unit_coords(u, units_m, units_n, um, un);
#endif
            const int m0 = (um * kClusterM + rank_m) * kBM;
            const int n0 = (un * kClusterN + rank_n) * kBN;
#if PG_STREAMK
            const long long it0 = ring;  // ring iteration of this item's first k-tile
            ring += ke - kb;
#else
            const int it0 = j * KT;  // ring iteration of this tile's first k-tile (every item is whole)
#endif
            int s = static_cast<int>(it0 % kStages);
            uint32_t ph = static_cast<uint32_t>(it0 / kStages) & 1;
            if (kPingpong && j > 0) {
                // Wait for the partner to have passed all of its (earlier) tile's full-barrier
                // waits: keeps every waiter within one phase of each barrier, and alternates
                // the two main loops on the tensor cores (one's epilogue hides under the
                // other's main loop).
                mbar_wait(turn_bar + 8 * cw, turn_ph);
                turn_ph ^= 1;
            }
#pragma unroll
            for (int h = 0; h < kMW; ++h)
#pragma unroll
                for (int i = 0; i < kAcc; ++i) acc[h][i] = 0.f;
            int prev = -1;  // ring stage of the k-tile whose wgmma may still run
            // One k-tile from ring stage `st` (phase ph): its wgmma issued, the previous
            // k-tile's retired and that stage handed back (to every CTA's producer).
            auto k_tile = [&](const int st, const bool first) {
                mbar_wait(full_bar + 8 * st, ph);
#if HG2_TRACE
                if (first && j < 14) HG2_MARK(2 + 4 * j);
#endif
                (void)first;
                __syncwarp();  // wgmma is .sync.aligned: the warp must be converged
                const uint32_t so = static_cast<uint32_t>(st * kStageBytes) >> 4;
                wgmma_fence();
#pragma unroll
                for (int ks = 0; ks < kBK / 16; ++ks)
#pragma unroll
                    for (int h = 0; h < kMW; ++h)
                        wgmma_tile<kTransA, kTransB>(
                            acc[h], da_wg + so + ((h * kBoxBytes + ks * kAStep) >> 4),
                            db0 + so + ((ks * kBStep) >> 4));
                wgmma_commit();
                if (prev >= 0) {
                    wgmma_wait<1>();
                    release_stage(empty_bar + 8 * prev, tid);
                }
                prev = st;
            };
#if HG2_RING_UNROLL
            // Passes over the whole ring, unrolled over its stages: each copy's stage is a
            // constant, so its descriptors and barrier addresses are uniform-register adds
            // (no per-wgmma R2UR moves). Pass positions before kb (a tile need not start on
            // stage 0) or from ke on are skipped.
            for (int kt0 = kb - s; kt0 < ke; kt0 += kStages, ph ^= 1) {
#pragma unroll
                for (int st = 0; st < kStages; ++st)
                    if (kt0 + st >= kb && kt0 + st < ke) k_tile(st, kt0 + st == kb);
            }
#else
            for (int kt = kb; kt < ke; ++kt) {
                k_tile(s, kt == kb);
                if (++s == kStages) {
                    s = 0;
                    ph ^= 1;
                }
            }
#endif
            if (kPingpong && lane == 0) mbar_arrive(turn_bar + 8 * (1 - cw));  // partner's turn
            wgmma_wait<0>();
            if (prev >= 0) release_stage(empty_bar + 8 * prev, tid);
#if HG2_TRACE
            if (j < 14) HG2_MARK(3 + 4 * j);
#endif
#if PG_STREAMK
            {
                // slot layout: [consumer][accumulator][thread], so each warp moves 128-byte rows
                const int rank_c = static_cast<int>(threadIdx.x) - 128;
                constexpr long long kSlot = static_cast<long long>(kConsumers) * kAcc * 128;
                if (kb > 0) {  // a later part of a tile another block finishes: out to this block's slot
                    float* slot = pg_sk_ws + bid * kSlot + cw * kAcc * 128 + tid;
#pragma unroll
                    for (int i = 0; i < kAcc; ++i) slot[i * 128] = acc[0][i];
#if HG2_TRACE  // the signal's parts timed apart (the fence and barrier repeat inside it)
                    HG2_MARK(57);
                    __threadfence();
                    HG2_MARK(58);
                    pg_bar_sync(4, 128 * kConsumers);
                    HG2_MARK(59);
#endif
                    pg_sk_signal(4, 128 * kConsumers, rank_c, pg_sk_flag + bid);
#if HG2_TRACE
                    if (j < 14) HG2_MARK(4 + 4 * j);
#endif
                    continue;
                }
                if (ke < KT) {  // this block began the tile: add the runs of the blocks after it, in order
                    const long long tile_end = static_cast<long long>(u - work.sk_unit0 + 1) * KT;
                    int c = bid + 1;
                    for (; c < nblocks && static_cast<long long>(c) * work.sk_run < tile_end; ++c) {
                        pg_sk_wait(4, 128 * kConsumers, rank_c, pg_sk_flag + c);
#if HG2_TRACE
                        HG2_MARK(60);
#endif
                        const float* slot = pg_sk_ws + c * kSlot + cw * kAcc * 128 + tid;
#pragma unroll
                        for (int i = 0; i < kAcc; ++i) acc[0][i] += slot[i * 128];
                    }
                    pg_bar_sync(4, 128 * kConsumers);  // every slot read: the flags go back down
                    if (rank_c == 0)
                        for (int f = bid + 1; f < c; ++f) pg_sk_flag[f] = 0u;
                }
            }
#endif
#if HG2_TRACE
            if (j < 14) HG2_MARK(4 + 4 * j);
#endif

#if HG2_EPILOGUE == 1 || HG2_EPILOGUE == 3
#if HG2_EPILOGUE == 3
            if (kTmaStore && beta == 0.f) {
                // Staged in this warp's two buffers, each chunk then stored by TMA.
#pragma unroll
                for (int h = 0; h < kMW; ++h)
                    epilogue_tma(acc[h], epi_buf + (cw * 4 + warp) * kEpiBuffers * kEpiWarpBytes, &tmap_c,
                                 m0 + (kPingpong ? h : cw) * 64 + warp * 16, n0, M, N, alpha, lane);
                continue;  // (nothing follows the store in these builds: no K-slices)
            }
#endif
            // Epilogue staged through this warp's shared buffer (coalesced 16-byte stores).
#pragma unroll
            for (int h = 0; h < kMW; ++h)
                epilogue_staged(acc[h], epi_buf + (cw * 4 + warp) * kEpiBuffers * kEpiWarpBytes, Cz, ldc,
                                m0 + (kPingpong ? h : cw) * 64 + warp * 16, n0, M, N, alpha, beta,
                                lane);
#elif HG2_EPILOGUE == 2
            // Measurement aid: a store the launch never takes (ldc >= 0), so the accumulators
            // stay live and the main loop is compiled as in the real builds.
            if (ldc < 0) {
#pragma unroll
                for (int h = 0; h < kMW; ++h)
                    epilogue_staged(acc[h], epi_buf, Cz, ldc, m0 + 64 * h, n0, M, N, alpha, beta, lane);
            }
#elif HG2_EPILOGUE == 0
            // Epilogue straight from the accumulator fragments.
#pragma unroll
            for (int h = 0; h < kMW; ++h) {
                const int row0 = m0 + (kPingpong ? h : cw) * 64 + warp * 16 + lane / 4;
                const int colq = n0 + 2 * (lane % 4);
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    const int row = row0 + 8 * r;
                    if (row < M) {
#pragma unroll
                        for (int jn = 0; jn < kBN / 8; ++jn)
                            store_pair(Cz, ldc, row, colq + 8 * jn, N, acc[h][4 * jn + 2 * r],
                                       acc[h][4 * jn + 2 * r + 1], alpha, beta);
                    }
                }
            }
#endif
#if PG_SPLIT
            // K-slice z of this tile is in the workspace: count it (the threads that stored
            // the tile meet on their own named barrier; ping-pong: one per consumer).
            // The counter is the tile's (row-major over the tile grid, as the reduction counts
            // them); a cluster's CTA whose tile lies past the result's edge stored nothing.
            if (m0 < M && n0 < N)
                pg_split_arrive(kPingpong ? 1 + cw : 1, kPingpong ? 128 : 128 * kConsumers,
                                kPingpong ? tid : static_cast<int>(threadIdx.x) - 128,
                                pg_split_count + (m0 / kBM) * CEIL_DIV(N, kBN) + n0 / kBN, pg_batch_count);
#endif
        }
        HG2_MARK(62);
#if HG2_EPILOGUE == 3
        // the copies read this CTA's shared memory: done before it leaves
        if (kTmaStore && tid % 32 == 0) bulk_wait_all();
#endif
#if PG_SPLIT
        // Every block of this persistent grid is resident (one per SM; a cluster row's grid is
        // as many clusters as the device holds at once): once its own tiles are stored, the
        // consumers of all blocks reduce the output together, band by band, each band as soon
        // as its tile's slices are all in (common.cuh, PG_SPLIT).
        pg_split_reduce_all(3, 128 * kConsumers, static_cast<int>(threadIdx.x) - 128, bid, nblocks,
                            pg_split_count, M, N, kBM, kBN, pg_batch_count,
                            reinterpret_cast<const float*>(Cp), HG2_COL_C ? 1 : ldc, HG2_COL_C ? ldc : 1, pg_batch_c, pg_split_d,
                            pg_split_d_rs, pg_split_d_cs, pg_split_alpha, pg_split_beta,
                            pg_split_d_half);
#endif
    }
    // No CTA of a cluster may leave while its peer can still multicast into it or arrive on
    // its barriers.
    if (kCluster > 1) cluster_sync();
}
