// dgemm v1 (FP64 tensor-core ladder, first rung): C = alpha * op(A) @ op(B) + beta * C in
// double precision on the warp-level FP64 tensor-core instruction
// mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 (DMMA, sm_80+), fp64 accumulation.
// Beyond the seeds: the hgemm v1 pipeline (shared-memory tiles filled by a multi-stage
// cp.async ring, one __syncthreads per K-tile) with the fp64 instruction, whose fragments
// are single doubles that ldmatrix (16-bit elements) cannot hand out.
//
// The idea of this rung: every fragment load is a 16-byte shared load (two doubles), with no
// transposing copy for either layout. The instruction's k, row and column indices are
// relabelled (dgemm/dmma_config.cuh): a lane's A values are k = 4t .. 4t+3 of rows
// kRA*g .. kRA*g + kRA - 1 of its warp tile, its B values the same k of columns kRB*g .. +kRB,
// so they are runs of consecutive doubles along K (K-contiguous operand) or along M / N
// (MN-contiguous operand) in the tile as copied. A lane's accumulators are then a kRA x 2 kRB
// block of C (8 x 8 for the default warp tile), stored row by row in 16-byte pieces. The shared
// tiles are XOR-swizzled by 16-byte chunk so that the loads are free of bank conflicts.
//
// Hierarchy (defaults, dgemm/dmma_config.cuh): threadblock tile 128 x 128 x 16, 8 warps as
// 2 (M) x 4 (N), warp tile 64 x 32, PG_STAGES = 4. Launch: blockDim (256, 1, 1); gridDim
// (ceil(N/128), ceil(M/128)) (grid ["n", "m"]), remapped in groups of 8 threadblock rows for L2
// reuse; PG_BATCH=1: gridDim.z matrices of a strided batch (PG_BATCH_PARAMS).
// DYNAMIC SHARED MEMORY: 4 stages x (128 x 16 + 16 x 128) doubles = 131072 bytes (fits sm_80's
// 163 KB and sm_90's 227 KB); the launcher raises the kernel's limit to it.
//
// Layouts (row-major in the kernel's own terms):
//   A: (i, k) at A[i*lda + k]; PG_TRANS_A=1: A[i + k*lda]. B: (k, j) at B[k*ldb + j];
//   PG_TRANS_B=1: B[k + j*ldb]. C: (i, j) at C[i*ldc + j]. Any M, N, K >= 1 (predicated edges:
//   cp.async zero-fills what lies outside the matrix). beta == 0 never reads C.
// PG_VEC=1: A, B, C 16-byte aligned, lda/ldb/ldc even: 16-byte cp.async of two doubles, 16-byte
// C stores. PG_VEC=0 (an odd leading dimension or a pointer 8 bytes off): the same tiles filled
// one double per cp.async (8 bytes), scalar C stores; nothing else changes.
//
// DG_INST selects the instruction (884 here; v2 builds this source with 1688, sm_90), DG_ENTRY
// the entry point's name. Rows built from this file: dgemm_v1_dmma and dgemm_v1_dmma_128x64
// (PG_BN=64, PG_WM=32: 8 warps of 32 x 32, for mid-size results).
#include "dgemm/dmma_config.cuh"
#include "dgemm/dmma_ptx.cuh"
#include "dgemm/dmma_copy.cuh"

#ifndef DG_ENTRY
#define DG_ENTRY dgemm_v1_dmma
#endif

namespace dgemm {

// A lane's fragment addresses in one operand's tile, worked out once: every load of the main
// loop is then a lane constant plus an immediate. The lane's values of half h of k16 step
// `step` are at run positions kL*g + pp (pp < kL: rows of A's warp tile, columns of B's) and
// k = 4t + 2h + j (j < 2).
//   K-contiguous tile: rows kL*g + pp carry swz = g & 1 (w0 / kL is even), so the pair (k, k+1)
//   of row pp is at off[h] + pp * kBK * 8 + step * 128 (off[h]: chunk 2t + (h ^ swz)).
//   MN-contiguous tile: rows k = 4t + ... carry swz(t) (T::swz), a lane constant; the pair of
//   positions (pp, pp+1) of row k is at off[pp / 2] + (k - 4t) * kCols * 8.
template <class T, bool kKContig, int kL, int kCols>
struct FragAddr {
    uint32_t off[kKContig ? 2 : kL / 2];
    __device__ __forceinline__ void init(int w0, int g, int t) {
        const int p1 = w0 + kL * g;
        if (kKContig) {
#pragma unroll
            for (int h = 0; h < 2; ++h) off[h] = 8 * T::at(p1, 4 * t + 2 * h);
        } else {
#pragma unroll
            for (int u = 0; u < kL / 2; ++u) off[u] = 8 * T::at(4 * t, p1 + 2 * u);
        }
    }
    // The 16-byte load of (position pp, pp+1 at k) or (position pp at k, k+1), from stage s.
    __device__ __forceinline__ uint32_t at(uint32_t s, int step, int h, int pp, int j) const {
        if (kKContig) return s + off[h] + (pp * kBK + 16 * step) * 8;
        return s + off[pp / 2] + ((16 * step + 2 * h + j) * kCols) * 8;
    }
};

// Fragments of half h of k16 step `step`: f[p][j] is the value at run position p0 + p and
// k = 4t + 2h + j, for kP consecutive positions (kP even).
template <bool kKContig, int kP, class FA>
__device__ __forceinline__ void load_frags(double (&f)[kP][2], const FA& fa, uint32_t s, int step, int h, int p0) {
    if (kKContig) {  // per position, one k pair
#pragma unroll
        for (int p = 0; p < kP; ++p) lds_f64x2(f[p][0], f[p][1], fa.at(s, step, h, p0 + p, 0));
    } else {  // per k, position pairs
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int u = 0; u < kP / 2; ++u) lds_f64x2(f[2 * u][j], f[2 * u + 1][j], fa.at(s, step, h, p0 + 2 * u, j));
    }
}

// Rows 2 mt and 2 mt + 1 of the lane's C block over half h of a k16 step (a: those rows' A values
// at k = 4t + 2h, 4t + 2h + 1; b: the lane's B columns' at the same k): acc[q][c] is C's row
// kRA*g + q, column 2 kRB t + c of the warp tile; column c = kRB e + p is the instruction's column
// 2t + e of n-tile p.
__device__ __forceinline__ void mma_rows(double (&acc)[kRA][2 * kRB], int mt, const double (&a)[2][2],
                                         const double (&b)[kRB][2]) {
#if DG_INST == 884
    // k4 step 2h + j: the instruction's k = t stands for 4t + 2h + j; m-tile q's row g for kRA*g + q
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
            for (int p = 0; p < kRB; ++p) mma_884(acc[2 * mt + r][p], acc[2 * mt + r][kRB + p], a[r][j], b[p][j]);
#else
    // the 16-row m-tile mt: its rows g and g + 8 stand for kRA*g + 2 mt and kRA*g + 2 mt + 1;
    // its k = t + 4j for 4t + 2h + j
#pragma unroll
    for (int p = 0; p < kRB; ++p) {
        double d[4] = {acc[2 * mt][p], acc[2 * mt][kRB + p], acc[2 * mt + 1][p], acc[2 * mt + 1][kRB + p]};
        const double af[4] = {a[0][0], a[1][0], a[0][1], a[1][1]};
        const double bf[2] = {b[p][0], b[p][1]};
        mma_1688(d, af, bf);
        acc[2 * mt][p] = d[0];
        acc[2 * mt][kRB + p] = d[1];
        acc[2 * mt + 1][p] = d[2];
        acc[2 * mt + 1][kRB + p] = d[3];
    }
#endif
}

#if PG_TRANS_A
using AFrag = FragAddr<ATile, false, kRA, kBM>;
#else
using AFrag = FragAddr<ATile, true, kRA, kBK>;
#endif
#if PG_TRANS_B
using BFrag = FragAddr<BTile, true, kRB, kBK>;
#else
using BFrag = FragAddr<BTile, false, kRB, kBN>;
#endif

// The warp tile's product over one k16 step, in two k8 halves. The shared loads and mma are
// volatile asm, issued in this order: the half's B values, then A's two rows at a time, the next
// pair loaded before the current pair's mma (B's values and two pairs of A's live beside the
// 64 accumulators: loading a whole k16 step at once spilled).
__device__ __forceinline__ void warp_step(double (&acc)[kRA][2 * kRB], const AFrag& fa, const BFrag& fb,
                                          uint32_t sa, uint32_t sb, int step) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        double b[kRB][2], a[2][2][2];
        load_frags<PG_TRANS_B != 0, kRB>(b, fb, sb, step, h, 0);
        load_frags<!PG_TRANS_A, 2>(a[0], fa, sa, step, h, 0);
#pragma unroll
        for (int mt = 0; mt < kRA / 2; ++mt) {
            if (mt + 1 < kRA / 2) load_frags<!PG_TRANS_A, 2>(a[(mt + 1) & 1], fa, sa, step, h, 2 * mt + 2);
            mma_rows(acc, mt, a[mt & 1], b);
        }
    }
}

}  // namespace dgemm

extern "C" __global__ void __launch_bounds__(dgemm::kThreads, DG_MIN_BLOCKS)
DG_ENTRY(int M, int N, int K, double alpha, const double* __restrict__ A, int lda,
         const double* __restrict__ B, int ldb, double beta, double* __restrict__ C,
         int ldc PG_BATCH_PARAMS PG_SPLIT_PARAMS)
{
    using namespace dgemm;
    PG_BATCH_SEEK(A, B, C);  // blockIdx.z: a matrix of the batch, or (PG_SPLIT) a K-slice
    DG_SPLIT_K(K);
    extern __shared__ __align__(128) double smem[];
    const uint32_t s0 = smem_addr(smem);

    // Grouped block order: consecutive block ids walk down kGroupM threadblock rows before
    // moving right, so blocks resident together share A rows and B columns in L2.
    int tm, tn;
    pg_grouped_tile(kGroupM, tm, tn);
    const int m0 = tm * kBM, n0 = tn * kBN;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wm0 = (warp / kWarpsN) * kWM, wn0 = (warp % kWarpsN) * kWN;

    // K-tile kt of each operand starts at its origin + kt * step.
    const double* const gA = PG_TRANS_A ? A + m0 : A + m0 * lda;
    const int a_step = PG_TRANS_A ? kBK * lda : kBK;
    const double* const gB = PG_TRANS_B ? B + n0 * ldb : B + n0;
    const int b_step = PG_TRANS_B ? kBK : kBK * ldb;
    auto issue = [&](int kt, int stage) {
        const int k_left = K - kt * kBK;
        const uint32_t sa = s0 + stage * kStageElems * 8, sb = sa + ATile::kElems * 8;
        if (PG_TRANS_A) issue_tile<ATile, kBK, kBM>(sa, gA + kt * a_step, lda, k_left, M - m0, tid);
        else            issue_tile<ATile, kBM, kBK>(sa, gA + kt * a_step, lda, M - m0, k_left, tid);
        if (PG_TRANS_B) issue_tile<BTile, kBN, kBK>(sb, gB + kt * b_step, ldb, N - n0, k_left, tid);
        else            issue_tile<BTile, kBK, kBN>(sb, gB + kt * b_step, ldb, k_left, N - n0, tid);
    };

    AFrag fa;
    BFrag fb;
    fa.init(wm0, g, t);
    fb.init(wn0, g, t);
    double acc[kRA][2 * kRB];
#pragma unroll
    for (int q = 0; q < kRA; ++q)
#pragma unroll
        for (int c = 0; c < 2 * kRB; ++c) acc[q][c] = 0.0;

    const int KT = CEIL_DIV(K, kBK);
    // Prologue: K-tiles 0 .. kStages-2 in flight (empty groups past the last keep the count).
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < KT) issue(s, s);
        pg_cp_async_commit();
    }
    for (int kt = 0; kt < KT; ++kt) {
        pg_cp_async_wait<kStages - 2>();  // K-tile kt has landed (this thread's copies) ...
        __syncthreads();               // ... everyone's, and stage (kt - 1) % kStages is free
        const int next = kt + kStages - 1;
        if (next < KT) issue(next, next % kStages);
        pg_cp_async_commit();
        const uint32_t sa = s0 + (kt % kStages) * kStageElems * 8, sb = sa + ATile::kElems * 8;
#pragma unroll
        for (int step = 0; step < kSteps; ++step) warp_step(acc, fa, fb, sa, sb, step);
    }
    pg_cp_async_wait<0>();

    // Epilogue: the lane's kRA x 2 kRB block of C, row by row.
    const int r0 = m0 + wm0 + kRA * g, c0 = n0 + wn0 + 2 * kRB * t;
    const bool whole = r0 + kRA <= M && c0 + 2 * kRB <= N;
#pragma unroll
    for (int q = 0; q < kRA; ++q) {
        const int r = r0 + q;
        if (r >= M) break;
        double* const row = C + static_cast<long long>(r) * ldc + c0;
        if (PG_VEC && whole) {
#pragma unroll
            for (int c = 0; c < 2 * kRB; c += 2) {
                double2 v = make_double2(alpha * acc[q][c], alpha * acc[q][c + 1]);
                if (beta != 0.0) {
                    const double2 old = *reinterpret_cast<const double2*>(row + c);
                    v.x += beta * old.x;
                    v.y += beta * old.y;
                }
                *reinterpret_cast<double2*>(row + c) = v;
            }
        } else {
#pragma unroll
            for (int c = 0; c < 2 * kRB; ++c) {
                if (c0 + c >= N) break;
                double v = alpha * acc[q][c];
                if (beta != 0.0) v += beta * row[c];
                row[c] = v;
            }
        }
    }
    DG_SPLIT_FINISH(C, ldc, M, N, tm, tn);  // PG_SPLIT: this slice's tile is in the workspace
}
