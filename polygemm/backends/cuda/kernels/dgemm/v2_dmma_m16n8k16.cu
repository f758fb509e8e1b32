// dgemm v2: v1 on sm_90's FP64 shape mma.sync.aligned.m16n8k16.row.col.f64 (one instruction per
// 16 x 8 x 16 = 2048 FMAs where m8n8k4 takes eight). Why: an m8n8k4 warp tile of 64 x 32 issues
// 128 DMMA per k16 step beside its 24 shared loads; the 16-row, 16-deep shape issues 16 for the
// same work, leaving the issue slots to the loads and copies. The fragments are v1's, in the
// 16-row shape's order (dgemm/dmma_config.cuh: its rows g and g + 8 stand for a lane's
// consecutive rows 2 mt and 2 mt + 1; its k = t + 4j for 4t + j, as v1's k4 steps).
// Everything else is v1 (one implementation, the instruction a macro).
#define DG_INST 16816
#define DG_ENTRY dgemm_v2_dmma_m16n8k16
#include "dgemm/v1_dmma.cu"
