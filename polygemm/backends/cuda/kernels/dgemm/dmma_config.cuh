// dgemm/dmma_config.cuh: tile sizes, the instruction choice and the shared-memory layout of the
// FP64 tensor-core rungs (dgemm/v1_dmma.cu and the rows built from it).
//
// Hierarchy (CUTLASS vocabulary; defaults, overridable with -D for tuning):
//   threadblock tile 128 x 128 x 16 (PG_BM x PG_BN x PG_BK), 8 warps as 2 (M) x 4 (N),
//   warp tile 64 x 32 (PG_WM x PG_WN), PG_STAGES = 4 cp.async stages.
//   Instruction (DG_INST): 884 = mma.sync.aligned.m8n8k4.row.col.f64 (sm_80+),
//   1688 = m16n8k8 (sm_90+: 4x the FMAs per instruction), 16816 = m16n8k16 (sm_90+: 8x; dgemm/v3).
//
// The permutations that let every fragment load be a 16-byte shared load: a lane's values are
// made contiguous by relabelling, not by moving data. Inside a k16 step the instruction's
// k index kk = t + 4j (t = lane % 4, the instruction's "thread in group") stands for the tile's
// k = 4t + j (the same relabelling for A and B, so the sum is the same sum); inside a warp tile
// the instruction's row of lane group g = lane / 4 stands for row kRA*g + q (q: the m-tile, and
// for 16-row shapes the upper half) and its column of group g for column kRB*g + p. A lane thus
// multiplies rows [kRA g, kRA g + kRA) by columns [kRB g, kRB g + kRB) over k in [4t, 4t + 4),
// and accumulates the C block rows [kRA g, +kRA) x columns [2 kRB t, +2 kRB): each a run of
// consecutive doubles in whichever dimension of the operand is contiguous.
#pragma once
#include <stdint.h>
#define PG_SPLIT_F64 1  // split_k.cuh's workspace, sums and scalars in double (PG_SPLIT builds)
#include "common.cuh"

#ifndef PG_BM
#define PG_BM 128
#endif
#ifndef PG_BN
#define PG_BN 128
#endif
#ifndef PG_BK
#define PG_BK 16
#endif
#ifndef PG_WM
#define PG_WM 64
#endif
#ifndef PG_WN
#define PG_WN 32
#endif
#ifndef PG_STAGES
#define PG_STAGES 4
#endif
#ifndef DG_INST
#define DG_INST 884
#endif
#ifndef DG_MIN_BLOCKS
#define DG_MIN_BLOCKS 1
#endif

namespace dgemm {

constexpr int kBM = PG_BM, kBN = PG_BN, kBK = PG_BK;
constexpr int kWM = PG_WM, kWN = PG_WN;
constexpr int kStages = PG_STAGES;
constexpr int kWarpsM = kBM / kWM, kWarpsN = kBN / kWN;
constexpr int kThreads = 32 * kWarpsM * kWarpsN;
constexpr int kGroupM = 8;            // threadblock rows walked before moving right (L2 reuse)
constexpr int kRA = kWM / 8;          // A rows a lane multiplies (and C rows it holds)
constexpr int kRB = kWN / 8;          // B columns a lane multiplies (C holds 2 kRB columns)
constexpr int kInstM = DG_INST == 884 ? 8 : 16;
constexpr int kInstN = 8;
constexpr int kInstK = DG_INST == 884 ? 4 : (DG_INST == 1688 ? 8 : 16);
constexpr int kMmaM = kWM / kInstM;   // instructions along M and N per warp tile
constexpr int kMmaN = kWN / kInstN;
constexpr int kSteps = kBK / 16;      // k16 steps of a K-tile

static_assert(DG_INST == 884 || DG_INST == 1688 || DG_INST == 16816, "DG_INST: 884 (m8n8k4), 1688 (m16n8k8) or 16816 (m16n8k16)");
static_assert(kBM % kWM == 0 && kBN % kWN == 0 && kBK % 16 == 0, "tile sizes");
static_assert(kWM % 16 == 0 && kWN % 16 == 0, "a lane's rows and columns come in 16-byte pairs");
static_assert(kMmaN == kRB, "one n8 instruction column per B column of a lane");

// The operand tiles in shared memory keep the global contiguous dimension contiguous:
//   K-contiguous operand (A row-major, B column-major): kMN rows of kBK doubles;
//   MN-contiguous operand (A column-major, B row-major): kBK rows of kMN doubles.
// Element (r, c) of a tile with kCols columns sits at r * kCols + 2 * ((c / 2) ^ swz(r)) + c % 2:
// its 16-byte chunk XOR-ed by a row function, so that the 8 lanes of each quarter warp of a
// 16-byte fragment load reach 8 distinct 16-byte bank groups:
//   K-contiguous, kL rows per lane: a quarter warp reads chunks 2t + v of rows r and r + kL
//     (two lane groups): swz(r) = (r / kL) & 1 puts the second row on the other parity;
//   MN-contiguous: it reads the rows k = 4t + j (t = 0..3) at chunks c and c + kL / 2 (two lane
//     groups): swz(k) spreads t over the two lowest chunk bits other than log2(kL / 2).
// cp.async's 16-byte writes (consecutive threads, consecutive chunks of a row) stay inside
// their 128-byte lines, so they remain conflict-free.
template <int kRows, int kCols, bool kKContig, int kL>
struct Tile {
    static constexpr int kElems = kRows * kCols;
    __device__ static __forceinline__ int swz(int r) {
        if (kKContig) return (r / kL) & 1;
        const int t = (r >> 2) & 3;
        constexpr int low = kL / 2 - 1;  // kL 8: bits 0, 1; kL 4: bits 0, 2
        return (t & low) | ((t & ~low) << 1);
    }
    __device__ static __forceinline__ int at(int r, int c) {
        return r * kCols + 2 * ((c >> 1) ^ swz(r)) + (c & 1);
    }
    // Whether rows r and r + step carry the same swizzle for every r (their offsets then differ
    // by step * kCols: an immediate, not an address register per row).
    __host__ __device__ static constexpr bool same_swz(int step) { return kKContig ? step % (2 * kL) == 0 : step % 16 == 0; }
};

#if PG_TRANS_A
using ATile = Tile<kBK, kBM, false, kRA>;  // A column-major: rows k, columns m
#else
using ATile = Tile<kBM, kBK, true, kRA>;   // A row-major: rows m, columns k
#endif
#if PG_TRANS_B
using BTile = Tile<kBN, kBK, true, kRB>;   // B column-major: rows n, columns k
#else
using BTile = Tile<kBK, kBN, false, kRB>;  // B row-major: rows k, columns n
#endif
constexpr int kStageElems = ATile::kElems + BTile::kElems;
constexpr int kSmemBytes = kStages * kStageElems * 8;
static_assert(kSmemBytes <= 227 * 1024, "shared memory above the sm_90 limit");

#if PG_SPLIT
// PG_SPLIT=1 (with PG_BATCH): blockIdx.z is a K-slice of one product, cut by the kernel in
// whole K-tiles (split_k.cuh's pg_split_slice_k; variants.json "split_step": the launch passes
// the whole K, so any K splits). Each slice has stored its threadblock tile (tm, tn) of float64
// partial sums into the workspace (the kernel's C, alpha 1, beta 0); this adds the slices in
// slice order into D, as every block of a resident grid reducing bands of the output, or else
// the tile's last slice alone. Why: the DMMA tiles are 128 rows deep, so a product with few
// tiles (M of 16 to 128, mid-size results) leaves most SMs idle without splitting K.
__device__ __forceinline__ void split_finish(const double* C, int ldc, int M, int N, int tm, int tn,
                                             long long batch_c, unsigned int* count0, void* d,
                                             long long d_rs, long long d_cs, double alpha, double beta,
                                             int d_half, int resident) {
    const double* const W = C - blockIdx.z * batch_c;
    unsigned int* const count = count0 + tm * CEIL_DIV(N, kBN) + tn;
    if (resident) {
        pg_split_arrive(0, kThreads, threadIdx.x, count, gridDim.z);
        const int tiles = gridDim.x * gridDim.y;
        pg_split_reduce_all(0, kThreads, threadIdx.x, blockIdx.y * gridDim.x + blockIdx.x + blockIdx.z * tiles,
                            tiles * gridDim.z, count0, M, N, kBM, kBN, gridDim.z, W, ldc, 1, batch_c, d, d_rs,
                            d_cs, alpha, beta, d_half);
    } else {
        pg_split_fixup(0, kThreads, threadIdx.x, count, gridDim.z, W, ldc, 1, batch_c, tm * kBM, tn * kBN,
                       min(kBM, M - tm * kBM), min(kBN, N - tn * kBN), d, d_rs, d_cs, alpha, beta, d_half);
    }
}
#define DG_SPLIT_FINISH(C, ldc, M, N, tm, tn)                                                             \
    split_finish(C, ldc, M, N, tm, tn, pg_batch_c, pg_split_count, pg_split_d, pg_split_d_rs, pg_split_d_cs, \
                 pg_split_alpha, pg_split_beta, pg_split_d_half, pg_split_resident)
#define DG_SPLIT_K(K) K = pg_split_slice_k(K, kBK)
#else
#define DG_SPLIT_FINISH(C, ldc, M, N, tm, tn) \
    do {                                      \
    } while (0)
#define DG_SPLIT_K(K) \
    do {              \
    } while (0)
#endif

}  // namespace dgemm
