// v14_cp_async_short_tile: v13's threadblock tile turned on its side (64 x 128 x 16: short in
// M, 4 warps, 4 threadblocks per SM). Why: a row-major product runs on these column-major
// rungs as C^T = B^T A^T, so a result with few columns (N = 64, e.g. 4096 x 64 x K) is a
// kernel M of 64, and v13's 128-row tile computes as many zero rows as real ones there. A
// 64-row tile wastes none of them; a short kernel N (a result with few rows) stays v13's.
// Auto weighs the two from measurements. Beyond the seeds.
//
// Everything else is v12: cp.async global -> shared ring (3 stages), zero-fill at edges,
// fragment double-buffering, grouped block order, split-K in the same launch.
//
// Geometry: threadblock tile 64 x 128 x 16, 128 threads = 4 warps arranged 1 (M) x 4 (N),
// warp tile 64 x 32, lanes 8 (M) x 4 (N), thread tile 8 x 8 as 2 x 2 blocks of 4 x 4.
// Shared memory is dynamic: 3 stages x 16 x (68 + 132) floats = 38400 bytes.
//
// The kernel is v12's source with this tile configuration (one implementation, three tiles).
#define PG_BM 64
#define PG_BN 128
#define PG_BK 16
#define CM_CPASYNC_MIN_BLOCKS 4
#define CM_CPASYNC_SMEM_BYTES 38400
#define CM_CPASYNC_ENTRY sgemm_cm_v14_cp_async_short_tile
#include "sgemm_cm/v12_cp_async.cu"
