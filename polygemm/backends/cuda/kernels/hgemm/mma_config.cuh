// The mma.sync rung's configuration (hgemm/v1_mma_ldmatrix.cu): the build's macros with their
// defaults, the tile sizes derived from them and the checks on them. Tile sizes use the names
// of kernels/README.md ("Tile vocabulary"): PG_BM x PG_BN x PG_BK threadblock tile, PG_WM x
// PG_WN warp tile, the m16n8k16 instruction shape, PG_STAGES pipeline stages.
#pragma once
#include <stdint.h>
#include <type_traits>
#define PG_HALF_TYPES 1  // pg_half: pg_half, or __nv_bfloat16 with PG_BF16=1 (common.cuh)
#include "common.cuh"  // CEIL_DIV, PG_TRANS_A / PG_TRANS_B / PG_VEC defaults, pg_half

#ifndef PG_OUT_F32
#define PG_OUT_F32 0
#endif
// PG_ROW_SPLIT=1 (a PG_VEC=0 build for A and B stored in the kernel's row-major terms): the
// rows of A and C are split into gridDim.z = p interleaved sets (blockIdx.z = r takes rows
// r, r + p, r + 2p, ...) with p * lda % 8 == 0, so every row of a set starts at the same
// phase e (halves past a 16-byte boundary). The set is then an aligned operand: its K range
// is extended by e leading columns (A read from the aligned row start, those columns zeroed
// in shared memory; B's matching e leading rows zero-filled), and A moves like the PG_VEC=1
// tiles (swizzled, whole 16-byte cp.async, no realign). Only B takes the realigning path.
// Launch condition: gridDim.z * lda % 8 == 0 (the kernel traps otherwise).
#ifndef PG_ROW_SPLIT
#define PG_ROW_SPLIT 0
#endif
#if PG_BATCH && PG_ROW_SPLIT
#error "PG_BATCH and PG_ROW_SPLIT both use blockIdx.z: the planner never combines them"
#endif
#if PG_ROW_SPLIT && (PG_VEC || PG_TRANS_A || PG_TRANS_B)
#error "PG_ROW_SPLIT=1 is a PG_VEC=0 build for row-major A and B (PG_TRANS_A=0, PG_TRANS_B=0)"
#endif

// Tuning knobs (the shipped configuration is the default; variants.json describes it).
#ifndef PG_BM
#define PG_BM 256
#endif
#ifndef PG_BN
#define PG_BN 128
#endif
#ifndef PG_BK
#define PG_BK 64
#endif
#ifndef PG_WM  // warp tile: BM / WM x BN / WN warps
#define PG_WM 64
#endif
#ifndef PG_WN
#define PG_WN 64
#endif
#ifndef PG_STAGES
#define PG_STAGES 3
#endif
#ifndef HG_GROUP_M
#define HG_GROUP_M 8
#endif
#ifndef HG_MIN_BLOCKS
#define HG_MIN_BLOCKS 1
#endif

namespace hgemm_v1 {

constexpr int kBM = PG_BM;  // threadblock tile
constexpr int kBN = PG_BN;
constexpr int kBK = PG_BK;
constexpr int kWM = PG_WM;  // warp tile
constexpr int kWN = PG_WN;
constexpr int kWarpsM = kBM / kWM;
constexpr int kWarpsN = kBN / kWN;
constexpr int kThreads = 32 * kWarpsM * kWarpsN;
constexpr int kInstM = 16, kInstN = 8, kInstK = 16;  // instruction shape m16n8k16
constexpr int kMmaM = kWM / kInstM;                // mma tiles per warp tile along M
constexpr int kMmaN = kWN / kInstN;                // ... along N
constexpr int kSteps = kBK / kInstK;                 // k16 steps per threadblock K-tile
constexpr int kStages = PG_STAGES;
constexpr int kGroupM = HG_GROUP_M;

static_assert(kBM % kWM == 0 && kBN % kWN == 0, "the warp tiles divide the threadblock tile");
static_assert(kWM % kInstM == 0 && kWN % 16 == 0, "warp tile: M % 16, N % 16 (x4 B loads)");
static_assert(kSteps >= 2 && kSteps <= 8, "BK must be 32 .. 128");
static_assert(kStages >= 2, "at least two stages");

// Shared tile shapes: rows x cols, cols contiguous (the global contiguous dimension).
constexpr int kARows = PG_TRANS_A ? kBK : kBM;
constexpr int kACols = PG_TRANS_A ? kBM : kBK;
constexpr int kBRows = PG_TRANS_B ? kBN : kBK;
constexpr int kBCols = PG_TRANS_B ? kBK : kBN;
constexpr int kAStage = kBM * kBK;  // halves per stage
constexpr int kBStage = kBK * kBN;
constexpr int kSmemBytes = kStages * (kAStage + kBStage) * 2;
static_assert(kSmemBytes <= 227 * 1024, "dynamic shared memory above the sm_90 per-block limit");

}  // namespace hgemm_v1
