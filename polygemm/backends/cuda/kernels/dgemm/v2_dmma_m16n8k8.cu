// dgemm v2: v1 on sm_90's FP64 shape mma.sync.aligned.m16n8k8.row.col.f64 (one instruction per
// 16 x 8 x 8 = 1024 FMAs where m8n8k4 takes four). Why: a 64 x 32 warp tile issues 128 m8n8k4
// per k16 step beside its 24 shared loads; the 16-row, 8-deep shape issues 32 for the same
// work, leaving issue slots to the loads and copies. The fragments are v1's, in the 16-row
// shape's order (dgemm/dmma_config.cuh: its rows g and g + 8 stand for a lane's consecutive rows
// 2 mt and 2 mt + 1, its k = t + 4j for 4t + 2h + j in half h of a k16 step). m16n8k16 (DG_INST
// 16816) needs a k16 step's four k values of every row at once: with the 64 accumulators that
// spilled (84 bytes at 255 registers), so the rung stays on k8.
// Everything else is v1 (one implementation, the instruction a macro). Rows built from it:
// dgemm_v2_dmma_m16n8k8 (128 x 128 x 16, warp tile 64 x 32) and dgemm_v2_dmma_m16n8k8_128x64
// (PG_BN=64, PG_WM=32: 8 warps of 32 x 32; twice the tiles, for mid-size results).
#define DG_INST 1688
#define DG_ENTRY dgemm_v2_dmma_m16n8k8
#include "dgemm/v1_dmma.cu"
