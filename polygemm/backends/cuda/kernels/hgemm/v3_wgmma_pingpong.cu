// hgemm v3: v2 with ping-pong consumers. Each of the two consumer warpgroups owns whole
// 128 x 128 threadblock tiles (two m64n128k16 wgmma per k16 step) and the two alternate on the
// tensor cores (a `turn` mbarrier pair orders their main loops), so one warpgroup's epilogue
// runs under the other's main loop instead of stalling the tensor cores. Why: v2's cooperative
// consumers store their tile while the tensor cores idle, which costs most where tiles are
// few or K is short (strided batches of 512^3: v2 at 0.62x cuBLAS's batched GEMM).
// Everything else (TMA ring, producer warpgroup, persistent tile loop, PG_BATCH) is v2's
// source with this configuration (one implementation, two rungs), as v13 is v12's.
//
// Shared memory: 6 stages x (128 + 128) x 64 halves + 1280 + 16384 (v2's staged epilogue, one
// 2 KB buffer per consumer warp) = 214272 bytes. Six stages rather than v2's four: the
// 128 x 128 stage is 32 KB, and a deeper ring keeps both consumers' loads ahead. Tile order in
// groups of 4 tile rows (v2: 8): v3 serves the smaller, odd and batched shapes, where 4 measured
// faster (docs/benchmarks/h200_epilogue.md).
#define PG_BN 128
#define HG2_PINGPONG 1
#ifndef PG_STAGES
#define PG_STAGES 6
#endif
#ifndef HG2_GROUP_M
#define HG2_GROUP_M 4
#endif
#define HG2_ENTRY hgemm_v3_wgmma_pingpong
#include "hgemm/wgmma_kernel.cuh"
