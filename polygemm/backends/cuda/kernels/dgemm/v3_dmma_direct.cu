// dgemm v3 (FP64 tensor cores, sm_90): v2's tiles on mma.sync.aligned.m16n8k16.row.col.f64, with
// every shared load landing in the registers the instruction reads, so that no move stands
// between the loads and the DMMAs.
//
// Why: the instruction reads its A values as register pairs (a0, a1), (a2, a3), ... that differ
// in the ROW (rows g and g + 8 at one k) and its B values as pairs (b0, b1), (b2, b3) that differ
// in K (k = t and t + 4 at one column); a 16-byte shared load fills one such pair only where the
// two values are neighbours in memory: along M for A, along K for B. v1/v2 read both operands
// along whichever dimension they are contiguous and the compiler assembled each DMMA's operand
// registers with moves (about 11 per m16n8k8 in v2's main loop, 243 registers), which also kept
// v2 off m16n8k16 (it spilled). Here:
//   - the row-major product (PG_TRANS_A=0, PG_TRANS_B=0, what NumPy's C-ordered arrays give) is
//     computed as C^T = B^T A^T: the instruction's A operand ("P" below) is B, contiguous along
//     N, its B operand ("Q") is A, contiguous along K: every fragment pair is one 16-byte load;
//   - PG_TRANS_A=1, PG_TRANS_B=1 is the same without the exchange (P = A along M, Q = B along K);
//   - the two mixed layouts have one operand the wrong way round whichever role it takes: that
//     operand is read by 8-byte loads straight into the instruction's registers (no moves; twice
//     the load instructions for that operand, 2-way bank conflicts when it is P).
// With the moves gone the k16 shape fits: 16 DMMAs of 2048 FMAs a warp per k16 step beside 24
// shared loads (v2: 32 DMMAs, 24 loads and ~350 moves), 64 accumulators, Q's fragments of a step
// and P's of two m-tiles in registers. DG_INST=1688 (row dgemm_v3_dmma_direct_k8) issues the same
// fragments' halves as m16n8k8: the k16 shape measured against the k8 one on one kernel.
// Pipelining: the next step's fragments are loaded during the last m-tile's DMMAs (each Q
// fragment as soon as its last DMMA of the step has issued), and the wait for the next K-tile and
// the block's barrier sit there too, before the last m-tile's DMMAs, so that the tensor pipe has
// queued work while the warps meet; the copies of the K-tile entering the ring are issued under
// m-tiles 0 and 1's DMMAs (P's, then Q's), their address work hidden the same way. The ring is 6 K-tiles of 16 deep (192 KB of the 227 KB an
// sm_90 block may have: five K-tiles in flight). 32-deep K-tiles (3 stages, half the barriers)
// spilled in the PG_VEC=0 builds: their 32 eight-byte copies a thread and K-tile need more
// addresses than the 64 accumulators and the fragments leave.
//
// Relabelling (within a k16 step and a warp tile; the same for both operands, so the sums are
// the same sums): the instruction's k = t + 4j stands for the tile's k = 4t + j; row g (g + 8)
// of m-tile i for P position 16 i + 2 g (+1); column g of n-tile jn for Q position 8 jn + g. A
// lane thus holds D = P Q^T at P positions 16 i + 2 g + {0, 1} and Q positions 8 jn + 2 t + {0, 1}:
// 16-byte stores of C along whichever of the two C is contiguous in.
// Shared tiles: dgemm/dmma_config.cuh's Tile (16-byte chunks XOR-swizzled by row), the copies
// dgemm/dmma_copy.cuh's; the fragment loads are free of bank conflicts for the two matched
// layouts (worked out beside PFrag and QFrag).
//
// Hierarchy (defaults here, the names of dgemm/dmma_config.cuh): threadblock tile 128 x 128 x 16
// (PG_BM x PG_BN x PG_BK), 8 warps, warp tile 64 x 32 (PG_WM positions of P along
// the instruction's M x PG_WN of Q), PG_STAGES = 6. Launch: blockDim (256, 1, 1), gridDim
// (ceil(N/128), ceil(M/128)) (grid ["n", "m"]) in v1's grouped order; PG_BATCH=1: gridDim.z
// matrices of a strided batch. DYNAMIC SHARED MEMORY: 6 x (128 x 16 + 16 x 128) doubles = 196608
// bytes. Layouts, any M, N, K >= 1 (cp.async zero-fills outside the matrix), PG_VEC, beta == 0
// never reading C: as dgemm/v1_dmma.cu.
#ifndef PG_BK
#define PG_BK 16
#endif
#ifndef PG_STAGES
#define PG_STAGES 6
#endif
#ifndef DG_INST
#define DG_INST 16816
#endif
#include "dgemm/dmma_config.cuh"
#include "dgemm/dmma_ptx.cuh"
#include "dgemm/dmma_copy.cuh"

namespace dgemm {
namespace direct {

constexpr bool kSwap = !PG_TRANS_A && !PG_TRANS_B;          // P = B, Q = A: D = C^T
constexpr bool kPK = kSwap ? false : !PG_TRANS_A;           // P's tile K-contiguous (8-byte loads)
constexpr bool kQK = kSwap ? true : PG_TRANS_B != 0;        // Q's tile K-contiguous (16-byte loads)
constexpr int kBP = kSwap ? kBN : kBM, kBQ = kSwap ? kBM : kBN;
constexpr int kWP = kWM, kWQ = kWN;
constexpr int kWarpsQ = kBQ / kWQ;
constexpr int kMP = kWP / 16, kNQ = kWQ / 8;               // m16 tiles of P, n8 tiles of Q a warp
static_assert(kBN % kWM == 0 && kBM % kWN == 0, "P and Q exchange roles with the layout: warps tile the threadblock in either role");
static_assert(kMP >= 2 && kWP % 32 == 0 && kWQ % 32 == 0 && kBK % 16 == 0, "warp tile in 32s (m-tiles in pairs; Q's swizzle period), K-tile in k16 steps");
static_assert((kBP / kWP) * kWarpsQ * 32 == kThreads, "warps cover the tile");

template <bool kIf, class X, class Y> struct Pick { using type = X; };  // no <type_traits> under NVRTC
template <class X, class Y> struct Pick<false, X, Y> { using type = Y; };
using PTile = typename Pick<kPK, Tile<kBP, kBK, true, 2>, Tile<kBK, kBP, false, 2>>::type;
using QTile = typename Pick<kQK, Tile<kBQ, kBK, true, 1>, Tile<kBK, kBQ, false, 2>>::type;

// P's fragment of m-tile i at k16 step base kb: a[2j + h] = P(wp0 + 16 i + 2 g + h, kb + 4 t + j).
//   MN-contiguous tile (rows k): (a[2j], a[2j+1]) is one 16-byte load at row kb + 4t + j, whose
//   swizzle is 2t (Tile<.., false, 2>::swz), chunk (wp0 + 16 i) / 2 + (g ^ 2t): a lane constant
//   plus an immediate. A quarter warp (g < 2, t < 4) reads chunks g ^ 2t: 8 distinct.
//   K-contiguous tile (rows p): 8-byte loads; row p's swizzle is g & 1, so k's chunk is
//   (2t + j/2) ^ (g & 1): two lane constants off[j / 2].
struct PFrag {
    uint32_t off[kPK ? 2 : 1];
    __device__ __forceinline__ void init(int wp0, int g, int t) {
        if (kPK) {
#pragma unroll
            for (int u = 0; u < 2; ++u) off[u] = 8 * PTile::at(wp0 + 2 * g, 4 * t + 2 * u);
        } else {
            off[0] = 8 * PTile::at(4 * t, wp0 + 2 * g);
        }
    }
    __device__ __forceinline__ void load(double (&a)[8], uint32_t s, int kb, int i) const {
        if (kPK) {
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int h = 0; h < 2; ++h) lds_f64(a[2 * j + h], s + off[j >> 1] + ((16 * i + h) * kBK + kb + (j & 1)) * 8);
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) lds_f64x2(a[2 * j], a[2 * j + 1], s + off[0] + ((kb + j) * kBP + 16 * i) * 8);
        }
    }
};

// Q's fragment of n-tile jn at k16 step base kb: b[u] = Q(wq0 + 8 jn + g, kb + 4 t + u).
//   K-contiguous tile (rows q): (b[2v], b[2v+1]) is one 16-byte load; row q's swizzle is g & 1, so
//   chunk (2t + v) ^ (g & 1): lane constants off[v]. A quarter warp: 8 distinct chunks.
//   MN-contiguous tile (rows k, swizzle 2t): 8-byte loads of q's chunk (4 jn + g/2) ^ 2t, whose
//   bit 2 the swizzle may flip: lane constants off[jn & 1], 16 (jn / 2) an immediate. A half warp
//   (g < 4, t < 4) reaches 16 distinct 8-byte slots.
struct QFrag {
    uint32_t off[2];
    __device__ __forceinline__ void init(int wq0, int g, int t) {
#pragma unroll
        for (int u = 0; u < 2; ++u)
            off[u] = kQK ? 8 * QTile::at(wq0 + g, 4 * t + 2 * u) : 8 * QTile::at(4 * t, wq0 + 8 * u + g);
    }
    __device__ __forceinline__ void load(double (&b)[4], uint32_t s, int kb, int jn) const {
        if (kQK) {
#pragma unroll
            for (int v = 0; v < 2; ++v) lds_f64x2(b[2 * v], b[2 * v + 1], s + off[v] + (8 * jn * kBK + kb) * 8);
        } else {
#pragma unroll
            for (int u = 0; u < 4; ++u) lds_f64(b[u], s + off[jn & 1] + ((kb + u) * kBQ + 16 * (jn >> 1)) * 8);
        }
    }
};

// One operand's K-tile copy: its tile's origin g (row or column mn0 of the matrix), K-contiguous
// or not, mn_left positions inside the matrix.
template <class T, bool kK, int kMN>
__device__ __forceinline__ void issue_operand(uint32_t s, const double* g, int ld, int kt, int mn_left, int k_left, int tid) {
    if (kK) issue_tile<T, kMN, kBK>(s, g + static_cast<long long>(kt) * kBK, ld, mn_left, k_left, tid);
    else    issue_tile<T, kBK, kMN>(s, g + static_cast<long long>(kt) * kBK * ld, ld, k_left, mn_left, tid);
}

}  // namespace direct
}  // namespace dgemm

extern "C" __global__ void __launch_bounds__(dgemm::kThreads, DG_MIN_BLOCKS)
dgemm_v3_dmma_direct(int M, int N, int K, double alpha, const double* __restrict__ A, int lda,
                     const double* __restrict__ B, int ldb, double beta, double* __restrict__ C,
                     int ldc PG_BATCH_PARAMS PG_SPLIT_PARAMS)
{
    using namespace dgemm;
    using namespace dgemm::direct;
    PG_BATCH_SEEK(A, B, C);  // blockIdx.z: a matrix of the batch, or (PG_SPLIT) a K-slice
    DG_SPLIT_K(K);
    extern __shared__ __align__(128) double smem[];
    const uint32_t s0 = smem_addr(smem);

    int tm, tn;
    pg_grouped_tile(kGroupM, tm, tn);
    const int m0 = tm * kBM, n0 = tn * kBN;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wp0 = (warp / kWarpsQ) * kWP, wq0 = (warp % kWarpsQ) * kWQ;

    // P and Q in the matrices: origin (position p0 / q0, k 0), leading dimension, extent.
    // A K-contiguous operand X holds (x, k) at X[x * ld + k], an MN-contiguous one at X[x + k * ld].
    const int p0 = kSwap ? n0 : m0, q0 = kSwap ? m0 : n0;
    // Operand `which` (0: P, 1: Q) of K-tile kt into `stage`.
    auto issue = [&](int which, int kt, int stage) {
        // Worked out here each time from p0 and q0, made opaque to the compiler: the copies'
        // sources and predicates are then not hoisted out of the K loop into registers that the
        // fragments need (the NT build spilled).
        int pk = p0, qk = q0;
        asm volatile("" : "+r"(pk), "+r"(qk));
        const int k_left = K - kt * kBK;
        const uint32_t sp = s0 + stage * kStageElems * 8;
        if (which == 0) {
            const double* const P = kSwap ? B : A;
            const int ldp = kSwap ? ldb : lda;
            const double* const gP = kPK ? P + static_cast<long long>(pk) * ldp : P + pk;
            issue_operand<PTile, kPK, kBP>(sp, gP, ldp, kt, (kSwap ? N : M) - pk, k_left, tid);
        } else {
            const double* const Q = kSwap ? A : B;
            const int ldq = kSwap ? lda : ldb;
            const double* const gQ = kQK ? Q + static_cast<long long>(qk) * ldq : Q + qk;
            issue_operand<QTile, kQK, kBQ>(sp + PTile::kElems * 8, gQ, ldq, kt, (kSwap ? M : N) - qk, k_left, tid);
        }
    };

    PFrag fp;
    QFrag fq;
    fp.init(wp0, g, t);
    fq.init(wq0, g, t);
    double acc[kMP][kNQ][4];
#pragma unroll
    for (int i = 0; i < kMP; ++i)
#pragma unroll
        for (int jn = 0; jn < kNQ; ++jn)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[i][jn][c] = 0.0;

    const int KT = CEIL_DIV(K, kBK);
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < KT) {
            issue(0, s, s);
            issue(1, s, s);
        }
        pg_cp_async_commit();
    }
    pg_cp_async_wait<kStages - 2>();
    __syncthreads();

    // The fragments of the step being multiplied: Q's of every n-tile, P's of two m-tiles.
    double a[2][8], b[kNQ][4];
#pragma unroll
    for (int jn = 0; jn < kNQ; ++jn) fq.load(b[jn], s0 + PTile::kElems * 8, 0, jn);
    fp.load(a[0], s0, 0, 0);

    int stage = 0;
#pragma unroll 1
    for (int kt = 0; kt < KT; ++kt) {
        // K-tile kt + kStages - 1 into the stage K-tile kt - 1 held (free since the last barrier),
        // P's copies after m-tile 0's DMMAs and Q's after m-tile 1's: the copies' address work is
        // done while the tensor pipe has this warp's DMMAs queued, not while it drains
        const int next = kt + kStages - 1, next_stage = stage == 0 ? kStages - 1 : stage - 1;
        const int stage_next = stage + 1 == kStages ? 0 : stage + 1;
        const uint32_t sp = s0 + stage * kStageElems * 8, sq = sp + PTile::kElems * 8;
        const uint32_t np = s0 + stage_next * kStageElems * 8, nq = np + PTile::kElems * 8;
#pragma unroll
        for (int step = 0; step < kSteps; ++step) {
            const bool last = step + 1 == kSteps;
            const int kb = 16 * step, nkb = last ? 0 : kb + 16;  // the next step's k base, and stage:
            const uint32_t nsp = last ? np : sp, nsq = last ? nq : sq;
#pragma unroll
            for (int i = 0; i < kMP; ++i) {
                if (i + 1 < kMP) {
                    fp.load(a[(i + 1) & 1], sp, kb, i + 1);
                } else {
                    if (last) {  // K-tile kt + 1 landed (this thread's copies), everyone's, and kt - 1 read
                        pg_cp_async_wait<kStages - 2>();
                        __syncthreads();
                    }
                    fp.load(a[(i + 1) & 1], nsp, nkb, 0);
                }
#if DG_INST == 16816
#pragma unroll
                for (int jn = 0; jn < kNQ; ++jn) {
                    mma_16816(acc[i][jn], a[i & 1], b[jn]);
                    if (i + 1 == kMP) fq.load(b[jn], nsq, nkb, jn);  // its last use this step has issued
                }
#else
                // m16n8k8: the k16 fragments' first halves (instruction k = t + 4j, j < 2, for the
                // tile's 4t + j) then their second halves (4t + 2 + j); one accumulator's two DMMAs
                // kNQ instructions apart
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int jn = 0; jn < kNQ; ++jn) {
                        const double* const ah = a[i & 1] + 4 * h;
                        const double af[4] = {ah[0], ah[1], ah[2], ah[3]};
                        const double bf[2] = {b[jn][2 * h], b[jn][2 * h + 1]};
                        mma_1688(acc[i][jn], af, bf);
                        if (i + 1 == kMP && h == 1) fq.load(b[jn], nsq, nkb, jn);
                    }
#endif
                if (step == 0 && i < 2) {
                    if (next < KT) issue(i, next, next_stage);
                    if (i == 1) pg_cp_async_commit();
                }
            }
        }
        stage = stage_next;
    }
    pg_cp_async_wait<0>();

    // Epilogue: acc[i][jn] holds D(p, q), D(p, q + 1), D(p + 1, q), D(p + 1, q + 1) with
    // p = p0 + wp0 + 16 i + 2 g, q = q0 + wq0 + 8 jn + 2 t; D = C, or C^T when P is B.
    auto put = [&](int r, int c, double x, double y) {  // C(r, c) and C(r, c + 1)
        if (r >= M || c >= N) return;
        double* const dst = C + static_cast<long long>(r) * ldc + c;
        if (PG_VEC && c + 1 < N) {
            double2 v = make_double2(alpha * x, alpha * y);
            if (beta != 0.0) {
                const double2 old = *reinterpret_cast<const double2*>(dst);
                v.x += beta * old.x;
                v.y += beta * old.y;
            }
            *reinterpret_cast<double2*>(dst) = v;
        } else {
            double v = alpha * x;
            if (beta != 0.0) v += beta * dst[0];
            dst[0] = v;
            if (c + 1 < N) {
                double w = alpha * y;
                if (beta != 0.0) w += beta * dst[1];
                dst[1] = w;
            }
        }
    };
#pragma unroll
    for (int i = 0; i < kMP; ++i) {
        const int p = p0 + wp0 + 16 * i + 2 * g;
#pragma unroll
        for (int jn = 0; jn < kNQ; ++jn) {
            const int q = q0 + wq0 + 8 * jn + 2 * t;
            const double (&d)[4] = acc[i][jn];
            if (kSwap) {
                put(q, p, d[0], d[2]);
                put(q + 1, p, d[1], d[3]);
            } else {
                put(p, q, d[0], d[1]);
                put(p + 1, q, d[2], d[3]);
            }
        }
    }
    DG_SPLIT_FINISH(C, ldc, M, N, tm, tn);  // PG_SPLIT: this slice's tile is in the workspace
}
