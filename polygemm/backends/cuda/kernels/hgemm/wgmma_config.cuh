// The wgmma rung's configuration (hgemm/v2_wgmma_tma.cu, v3_wgmma_pingpong.cu): the build's
// macros with their defaults, the tile sizes and shared-memory layout derived from them, and the
// checks that reject a combination the kernel does not implement. Tile sizes use the names of
// kernels/README.md ("Tile vocabulary"): PG_BN, PG_STAGES, PG_CLUSTER_M, PG_CLUSTER_N; BM is
// 64 rows per consumer warpgroup (HG2_CONSUMERS), BK one 128-byte swizzle row.
#pragma once
#include <cuda.h>  // CUtensorMap
#define PG_HALF_TYPES 1  // pg_half: __half, or __nv_bfloat16 with PG_BF16=1 (common.cuh)
#include <stdint.h>
#include "common.cuh"  // CEIL_DIV, PG_TRANS_A / PG_TRANS_B defaults, pg_half

#ifndef PG_OUT_F32
#define PG_OUT_F32 0
#endif

// Tuning knobs (the shipped configuration is the default; variants.json describes it).
#ifndef PG_BN
#define PG_BN 256
#endif
#ifndef HG2_CONSUMERS
#define HG2_CONSUMERS 2
#endif
#ifndef PG_STAGES
#define PG_STAGES 4
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
#ifndef PG_CLUSTER_M  // CTAs of a cluster along M (vertically adjacent tiles sharing one B tile)
#define PG_CLUSTER_M 1
#endif
#ifndef PG_CLUSTER_N  // CTAs of a cluster along N (horizontally adjacent tiles sharing one A tile)
#define PG_CLUSTER_N 1
#endif
#ifndef HG2_COL_C  // 1: C (and a split's partial sums) column-major in the kernel's terms, C[i + j*ldc]
#define HG2_COL_C 0  // (a "col" row: the planner swaps operands for a row-major result)
#endif
#ifndef HG2_EPILOGUE  // 0: C stored straight from the fragments; 1: staged in shared memory;
#define HG2_EPILOGUE 1  // 2: no C store (measurement aid: the main loop alone; C is not written);
#endif                  // 3: staged, then stored by TMA (a third tensor map, tmap_c)
#ifndef HG2_RING_UNROLL  // 0: the consumers' k-tile loop not unrolled over the ring (kept for comparison)
#define HG2_RING_UNROLL 1
#endif

#if PG_CLUSTER_M * PG_CLUSTER_N > 1
#define HG2_CLUSTER_DIMS __cluster_dims__(PG_CLUSTER_M * PG_CLUSTER_N, 1, 1)
#else
#define HG2_CLUSTER_DIMS
#endif

namespace hgemm_v2 {

constexpr int kBK = 64;                  // one 128-byte swizzle row of fp16
constexpr int kConsumers = HG2_CONSUMERS;
constexpr bool kPingpong = HG2_PINGPONG != 0;
// Cooperative: the consumers split a tile, 64 rows each. Ping-pong: each consumer owns whole
// 128-row tiles (two m64 wgmma per k16 step), the two taking turns on the tensor cores.
constexpr int kBM = kPingpong ? 128 : 64 * kConsumers;
constexpr int kMW = kPingpong ? 2 : 1;   // m64 blocks per consumer warpgroup
constexpr int kBN = PG_BN;
constexpr int kStages = PG_STAGES;
constexpr int kGroupM = HG2_GROUP_M;
constexpr int kGroupN = HG2_GROUP_N;
constexpr int kClusterM = PG_CLUSTER_M;    // CTAs sharing one B tile (rank % kClusterM: their M position)
constexpr int kClusterN = PG_CLUSTER_N;  // CTAs sharing one A tile (rank / kClusterM: their N position)
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

}  // namespace hgemm_v2
