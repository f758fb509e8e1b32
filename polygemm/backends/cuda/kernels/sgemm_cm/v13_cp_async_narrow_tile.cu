// v13_cp_async_narrow_tile: v12 with a threadblock tile half as wide (128 x 64 x 16,
// 4 warps, 4 threadblocks per SM). Why: mid-size problems leave SMs idle with 128 x 128
// tiles -- 1000 x 3000 x 2000 gives 192 tiles for 264 slots (132 SMs x 2), so every
// 128 x 128 version sat at 0.83-0.85x cuBLAS there -- while 128 x 64 tiles give 384 tiles
// over 528 slots and measured 1.07-1.10x (and 0.89-0.90x at 4096^3 and 8192^3, where v12's
// wider tile wins). Auto picks between the two from measurements. Beyond the seeds.
//
// Everything else is v12: cp.async global -> shared ring (3 stages), 16-byte chunks for the
// MN-contiguous operand (PG_VEC=1) or 4-byte elements, 4-byte elements landing K-major for
// the K-contiguous operand, zero-fill at edges, fragment double-buffering, grouped block
// order.
//
// Geometry: threadblock tile 128 x 64 x 16, 128 threads = 4 warps arranged 2 (M) x 2 (N),
// warp tile 64 x 32, lanes 8 (M) x 4 (N), thread tile 8 x 8 as 2 x 2 blocks of 4 x 4.
// Shared memory is dynamic: 3 stages x 16 x (132 + 68) floats = 38400 bytes.
//
// The kernel is v12's source with this tile configuration (one implementation, three tiles).
#define PG_BN 64
#define PG_BK 16
#define CM_CPASYNC_MIN_BLOCKS 4
#define CM_CPASYNC_SMEM_BYTES 38400
#define CM_CPASYNC_ENTRY sgemm_cm_v13_cp_async_narrow_tile
#include "sgemm_cm/v12_cp_async.cu"
