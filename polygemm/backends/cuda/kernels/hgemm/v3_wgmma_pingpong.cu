// hgemm v3: v2 with ping-pong consumers. Each of the two consumer warpgroups owns whole
// 128 x 128 threadblock tiles (two m64n128k16 wgmma per k16 step) and the two alternate on the
// tensor cores (a `turn` mbarrier pair orders their main loops), so one warpgroup's epilogue
// runs under the other's main loop instead of stalling the tensor cores. Why: v2's cooperative
// consumers store their tile while the tensor cores idle, which costs most where tiles are
// few or K is short -- strided batches of 512^3 ran at 0.62x cuBLAS's batched GEMM with v2.
// Everything else (TMA ring, producer warpgroup, persistent tile loop, PG_BATCH) is v2's
// source with this configuration (one implementation, two rungs), as v13 is v12's.
//
// Shared memory: 4 stages x (128 + 128) x 64 halves + 1280 = 132352 bytes.
#define HG2_BN 128
#define HG2_PINGPONG 1
#define HG2_ENTRY hgemm_v3_wgmma_pingpong
#include "hgemm/v2_wgmma_tma.cu"
