// hgemm v1 (FP16 tensor-core ladder, first rung): C = alpha * A @ B + beta * C with fp16
// operands, fp32 accumulation, on the warp-level tensor-core instruction
// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32, its A and B fragments loaded from
// shared memory with ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16.
// PG_BF16=1 builds the same kernel for bf16 operands (and a bf16 or fp32 C):
// mma.sync...f32.bf16.bf16.f32, the element type and conversions from common.cuh (pg_half).
// Realizes seed 003 (ldmatrix): each lane supplies the shared-memory address of one 8-element
// (16-byte) row of one of the four 8x8 tiles (lanes 0-7 tile 0, 8-15 tile 1, 16-23 tile 2,
// 24-31 tile 3); lane t receives elements (t/4, 2*(t%4) .. +1) of each tile in register
// r[tile], which is exactly the m16n8k16 fragment layout; .trans hands out the transposed
// tile, so an operand stored MN-contiguous in shared memory needs no transposing copy. The
// seed's bank-conflict observation (row offsets decide the wavefront count) is why the shared
// tiles are XOR-swizzled: the 8 rows of every 8x8 tile fall into 8 distinct 16-byte bank
// groups.
//
// Hierarchy (CUTLASS vocabulary; defaults, overridable with -DHG_* for tuning only):
//   threadblock tile 256 x 128 x 64 (BM x BN x BK), 8 warps as 4 (M) x 2 (N),
//   warp tile 64 x 64, instruction shape 16 x 8 x 16 (m16n8k16),
//   PG_VEC=1: 3-stage shared-memory pipeline, cp.async.cg 16 B straight into swizzled tiles;
//   PG_VEC=0: 4-stage pipeline of padded tiles: cp.async.cg 16 B of aligned windows, realigned
//   in place one K-tile ahead of the mma.
// Launch: blockDim (256, 1, 1); gridDim (ceil(N/128), ceil(M/256)) (grid ["n", "m"]); the
// kernel remaps block ids in groups of 8 threadblock rows for L2 reuse. PG_ROW_SPLIT=1 (see
// below): gridDim (ceil(N/128), ceil(ceil(M/p)/256), p), one z slice per row set.
// DYNAMIC SHARED MEMORY: PG_VEC=1 147456 bytes (3 stages x (256x64 + 64x128) halves x 2 B);
// PG_VEC=0 221184 bytes (4 stages of padded tiles, rows one 16-byte chunk longer; the most
// over the four layouts, A row-major with B column-major). The launcher must raise
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES to that size and launch with it (the PG_VEC=0
// build needs sm_90's 227 KB; PG_VEC=1 fits sm_80's 163 KB too).
//
// Layouts (row-major in the kernel's own terms):
//   A: (i, k) at A[i*lda + k]; PG_TRANS_A=1: A[i + k*lda] (column-major).
//   B: (k, j) at B[k*ldb + j]; PG_TRANS_B=1: B[k + j*ldb] (column-major, K-contiguous).
//   C: (i, j) at C[i*ldc + j], pg_half (pg_half; __nv_bfloat16 with PG_BF16=1), or float when
//   PG_OUT_F32=1.
// Each operand's shared tile keeps the global contiguous dimension contiguous:
//   K-contiguous operand (A row-major, B column-major): tile [MN][BK], ldmatrix without .trans;
//   MN-contiguous operand (A column-major, B row-major): tile [BK][MN], ldmatrix .trans.
// Swizzle: a tile row of C halves holds C/8 16-byte chunks; chunk c of row r is stored at
// chunk c ^ (r & 7) when rows are >= 128 B (C >= 64), c ^ ((r >> 1) & 3) for 64-byte rows
// (C = 32). An ldmatrix 8x8 tile reads one fixed logical chunk of 8 consecutive rows
// r0..r0+7 (r0 % 8 == 0); the XOR sends them to 8 distinct 16-byte bank groups (for 64-byte
// rows: bank group = 4*(r&1) + (c ^ (r>>1 & 3)), again 8 distinct), so each of the 4 phases of
// an .x4 is one wavefront. cp.async's 16-byte writes (8 consecutive threads fill 128
// contiguous bytes of the logical tile) are permuted within 128-byte lines and stay
// conflict-free too.
//
// PG_VEC=1: A, B, C 16-byte aligned, lda/ldb/ldc % 8 == 0: operand tiles move with
// cp.async.cg 16 B (src-size < 16 zero-fills partial chunks, 0 for chunks outside the matrix);
// the epilogue stores half2 / float2. PG_VEC=0 (any alignment, e.g. odd leading dimensions):
// each tile row's 16-byte-aligned window (one chunk wider than the row) is copied with the
// same 16-byte cp.async into a padded tile row, and a realign pass shifts it in place (16-byte
// shared loads, a word select and a funnel shift per chunk); see RawTile. Scalar epilogue.
// Any M, N, K >= 1. beta == 0 never
// reads C.
//
// Why the PG_VEC=1 main loop splits interior and edge tiles: a predicated cp.async carries a
// 64-bit address and a zero-fill size per copy, about 200 address/predicate instructions per
// K-tile issued in one burst between the HMMAs of step 0 (ncu at 4096^3 on an H200: tensor
// pipe 64% active, issue 38%). Tiles fully inside the matrix (the block's M x N tile and the
// K-tile) therefore take an unpredicated path whose per-thread source pointer and swizzled
// shared offset are computed once (one 64-bit add per copy), its 12 copies spread over k16
// steps 0..kSteps-2 and committed before the step kSteps-1 wait; edge tiles keep the
// predicated issue at step 0. With it the tensor pipe is the limiter (HMMA 74% active, ~70%
// of the mma.sync peak; ldmatrix + fills take ~0.9 of the shared bandwidth that rate needs):
// 4096^3 428..445 TFLOP/s (cuBLAS 755), 8192^3 415..422, 2048^3 314..317, 1000x3000x2000 224.
// Not kept (measured slower at the large shapes): 128x256 tiles, BK=32 with 4 or 6 stages.
//
// Why PG_VEC=0 copies aligned 16-byte windows and realigns them in shared memory (RawTile):
// 4-byte loads + shuffles staged in registers reach 134 TFLOP/s at 4095x4097x4093 (0.89x
// cuBLAS); windows by cp.async into 4 padded stages realigned in place (copy lead 2 K-tiles,
// interior copies spread over the k16 steps, a realign call's loads first) reach 214 (1.43x
// cuBLAS; docs/benchmarks/h200_fp16.md). The limit is then the cp.async of windows that
// straddle 128-byte lines (~2.5x the ideal shared-store wavefronts). Not kept (slower): realign
// items beside the mma rows of warp_step (191), one warp per row phase (193), sm_90 bulk
// copies of each row's window on an mbarrier (159: 320 small copies per K-tile), register
// staging spread over the k16 steps (84: long-scoreboard stalls).
//
// Why PG_ROW_SPLIT: splitting A's rows into sets of one 16-byte phase makes A an aligned
// operand (K extended by the phase), so only B is realigned (214 -> 261 TFLOP/s at
// 4095x4097x4093); B's realign walks each lane's 4 chunks downwards (5 shared loads instead
// of 8: 269); edge threadblock tiles move inside the matrix (storing only their own rows and
// columns), so no tile takes the predicated copies: 300, `polygemm bench` 295.9 = 2.03x
// cuBLAS (docs/benchmarks/README.md). Not kept: skipping the copies of rows past the edge
// with a predicate (283), loading the realign's next chunk one k16 step ahead (258: a spill).
//
// The parts: hgemm/mma_config.cuh (macros, tile sizes), mma_ptx.cuh (PTX wrappers),
// mma_smem.cuh (shared tiles and their movers), mma_fragments.cuh (ldmatrix + mma of one k16
// step), mma_epilogue.cuh (C stores); this file holds the kernel: tile order, the two main
// loops (aligned cp.async pipeline, PG_VEC=1; realigning pipeline, PG_VEC=0) and the epilogue.
#include "hgemm/mma_config.cuh"
#include "hgemm/mma_ptx.cuh"
#include "hgemm/mma_smem.cuh"
#include "hgemm/mma_fragments.cuh"
#include "hgemm/mma_epilogue.cuh"

extern "C" __global__ void __launch_bounds__(hgemm_v1::kThreads, HG_MIN_BLOCKS)
hgemm_v1_mma_ldmatrix(int M, int N, int K, float alpha, const pg_half* __restrict__ A, int lda,
                      const pg_half* __restrict__ B, int ldb, float beta, void* __restrict__ Cv,
                      int ldc PG_BATCH_PARAMS PG_SPLIT_PARAMS)
{
    using namespace hgemm_v1;
#if PG_BATCH  // blockIdx.z is the batch here (never with PG_ROW_SPLIT); A and B move at each use (gA, gB)
    Cv = reinterpret_cast<OutT*>(Cv) + blockIdx.z * pg_batch_c;
#endif
    extern __shared__ __align__(128) unsigned char smem_raw[];
    pg_half* const sA = reinterpret_cast<pg_half*>(smem_raw);  // kStages x kAStage
#if PG_VEC
    pg_half* const sB = sA + kStages * kAStage;                // kStages x kBStage
#else
    pg_half* const sB = sA + kRawStages * kRawAHalves;          // kRawStages x BRaw::kHalves
#endif
#if PG_ROW_SPLIT
    // Row set r = blockIdx.z of p = gridDim.z (see PG_ROW_SPLIT): from here on the kernel
    // computes the product of that set as an M' x N x K' problem, K' = K + e.
    const int k_head = static_cast<int>((reinterpret_cast<uintptr_t>(A + blockIdx.z * lda) >> 1) & 7);
    {
        const int p = gridDim.z, r = blockIdx.z;
        if (((p * lda) & 7) != 0) __trap();  // the planner's contract (row_split_sets)
        if (r >= M) return;
        A += r * lda - k_head;  // aligned start of row r, e columns early
        lda *= p;
        B -= k_head * ldb;      // row k' of this B is row k' - e (rows k' < e read as zero)
        Cv = reinterpret_cast<OutT*>(Cv) + r * ldc;
        ldc *= p;
        M = (M - r + p - 1) / p;
        K += k_head;
    }
#endif
    OutT* const C = reinterpret_cast<OutT*>(Cv);

    // Grouped block order: consecutive block ids walk down kGroupM threadblock rows before
    // moving right, so blocks resident together share A rows and B columns in L2.
#if PG_ROW_SPLIT
    auto tile_origin = [&](int& tm0, int& tn0) {
        pg_grouped_tile(kGroupM, tm0, tn0);
        tm0 *= kBM;
        tn0 *= kBN;
    };
    int tm0, tn0;
    tile_origin(tm0, tn0);
    // A threadblock tile that crosses the bottom or right edge moves back inside the matrix
    // (when the matrix is at least a tile high / wide), overlapping its neighbour: every tile
    // then takes the unpredicated copies of the interior, and the epilogue stores only the
    // rows and columns from the unmoved origin on (tile_origin again), which no other block
    // stores.
    const int m0 = min(tm0, max(M - kBM, 0));
    const int n0 = min(tn0, max(N - kBN, 0));
#else
    int tm, tn;
    pg_grouped_tile(kGroupM, tm, tn);
    const int m0 = tm * kBM, n0 = tn * kBN;
#endif

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int wm0 = (warp / kWarpsN) * kWM;  // warp tile origin inside the threadblock tile
    const int wn0 = (warp % kWarpsN) * kWN;

    // Per-K-tile operand tile origins: tile kt starts at g + kt * step. A's tile is rows k x
    // cols m (PG_TRANS_A) or rows m x cols k; B's rows n x cols k (PG_TRANS_B) or rows k x cols n.
    // (Functions: under PG_BATCH each use moves them to the batch's matrix anew, PG_BATCH_AT.)
    const pg_half* const gA0 = PG_TRANS_A ? A + m0 : A + m0 * lda;
    auto gA = [&]() { return PG_BATCH_AT(gA0, pg_batch_a); };
    const int a_step = PG_TRANS_A ? kBK * lda : kBK;
    const int a_m_left = M - m0;
    const pg_half* const gB0 = PG_TRANS_B ? B + n0 * ldb : B + n0;
    auto gB = [&]() { return PG_BATCH_AT(gB0, pg_batch_b); };
    const int b_step = PG_TRANS_B ? kBK : kBK * ldb;
    const int b_n_left = N - n0;
    // Rows / cols of K-tile kt inside the matrix.
    auto a_extent = [&](int kt, int& rows_left, int& cols_left) {
        const int k_left = K - kt * kBK;
        rows_left = PG_TRANS_A ? k_left : a_m_left;
        cols_left = PG_TRANS_A ? a_m_left : k_left;
    };
    auto b_extent = [&](int kt, int& rows_left, int& cols_left) {
        const int k_left = K - kt * kBK;
        rows_left = PG_TRANS_B ? b_n_left : k_left;
        cols_left = PG_TRANS_B ? k_left : b_n_left;
    };

    const int KT = CEIL_DIV(K, kBK);

    float acc[kMmaM][kMmaN][4];
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi)
#pragma unroll
        for (int ni = 0; ni < kMmaN; ++ni)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.f;

    FragOffsets fo;
    fo.init(wm0, wn0, lane);
    const uint32_t sA0 = smem_addr(sA), sB0 = smem_addr(sB);

#if PG_VEC
    auto issue_tile = [&](int kt, int stage) {
        int r, c;
        a_extent(kt, r, c);
        AMover::issue_async(sA + stage * kAStage, gA() + kt * a_step, lda, r, c, tid);
        b_extent(kt, r, c);
        BMover::issue_async(sB + stage * kBStage, gB() + kt * b_step, ldb, r, c, tid);
    };
    // Prologue: K-tiles 0 .. kStages-2 in flight.
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < KT) issue_tile(s, s);
        cp_async_commit();
    }
    cp_async_wait<kStages - 2>();
    __syncthreads();

    // Fragments double-buffered across k16 steps: step ks+1's ldmatrix overlap step ks's mma.
    uint32_t af[2][kMmaM][4];
    uint32_t bf[2][kMmaN][2];
    int rd = 0;             // stage holding K-tile kt
    int wr = kStages - 1;   // stage receiving K-tile kt + kStages - 1
    uint32_t rdA = sA0, rdB = sB0;
    load_fragments(af[0], bf[0], fo, rdA, rdB, 0);

    // Interior fast path (see TileMover::issue_full): the copies of K-tile kt + kStages - 1
    // are spread over k16 steps 0 .. kSteps-2 and committed at step kSteps-2, before the
    // wait of step kSteps-1 (the group count per iteration stays one). Edge tiles take the
    // predicated issue_tile at step 0.
    constexpr int kAChunks = AMover::kVecIters, kBChunks = BMover::kVecIters;
    constexpr int kParts = kSteps - 1;
    const bool mn_inside = (m0 + kBM <= M) && (n0 + kBN <= N);
    const pg_half* a_src = AMover::thread_src(gA(), lda, tid);
    const pg_half* b_src = BMover::thread_src(gB(), ldb, tid);
    const int a_row_step = AMover::kRowStep * lda;
    const int b_row_step = BMover::kRowStep * ldb;
    const uint32_t a_dst = sA0 + AMover::thread_dst(tid);
    const uint32_t b_dst = sB0 + BMover::thread_dst(tid);
    // Source of K-tile kt + kStages - 1, advanced by one K-tile per iteration.
    a_src += (kStages - 1) * a_step;
    b_src += (kStages - 1) * b_step;

    for (int kt = 0; kt < KT; ++kt) {
        const bool fast = mn_inside && (kt + kStages) * kBK <= K;
#pragma unroll
        for (int ks = 0; ks < kSteps; ++ks) {
            if (ks < kParts) {
                if (fast) {
                    // chunks [lo, hi) of the A then B chunk list in part ks
                    constexpr int kTot = kAChunks + kBChunks;
                    const uint32_t da = a_dst + wr * (kAStage * 2);
                    const uint32_t db = b_dst + wr * (kBStage * 2);
#define HG_PART(P)                                                                               \
    if (ks == P) {                                                                              \
        constexpr int lo = (P) < kParts ? (P) * kTot / kParts : kTot;                            \
        constexpr int hi = (P) < kParts ? ((P) + 1) * kTot / kParts : kTot;                      \
        AMover::template issue_full<(lo < kAChunks ? lo : kAChunks),                              \
                                    (hi < kAChunks ? hi : kAChunks)>(da, a_src, a_row_step);      \
        BMover::template issue_full<(lo > kAChunks ? lo - kAChunks : 0),                          \
                                    (hi > kAChunks ? hi - kAChunks : 0)>(db, b_src, b_row_step);  \
    }
                    HG_PART(0)
                    HG_PART(1)
                    HG_PART(2)
                    HG_PART(3)
                    HG_PART(4)
                    HG_PART(5)
                    HG_PART(6)
#undef HG_PART
                } else if (ks == 0 && kt + kStages - 1 < KT) {
                    issue_tile(kt + kStages - 1, wr);
                }
            }
            if (ks == kParts - 1) {
                cp_async_commit();  // possibly empty: keeps the group count uniform
                a_src += a_step;
                b_src += b_step;
            }
            if (ks == kSteps - 1) {
                // Before reading the next stage: it must have landed (wait_group), and every
                // warp must be done with the stage the next prefetch overwrites (barrier).
                cp_async_wait<kStages - 2>();
                __syncthreads();
                rd = (rd + 1 == kStages) ? 0 : rd + 1;
                wr = (wr + 1 == kStages) ? 0 : wr + 1;
                rdA = sA0 + rd * (kAStage * 2);
                rdB = sB0 + rd * (kBStage * 2);
            }
            // mma of step ks; fragments of step ks+1 (the next stage's step 0 at the end).
            warp_step(acc, af[ks & 1], bf[ks & 1], af[(ks + 1) & 1], bf[(ks + 1) & 1], fo, rdA,
                      rdB, (ks + 1) % kSteps);
        }
    }
    cp_async_wait<0>();  // no cp.async may be outstanding at exit
#else
    // Realigning path (RawTile), kRawStages = 4 padded stages. K-tile kt is copied during
    // iteration kt - 3 (into stage kt % 4; its copies spread over the k16 steps like the
    // PG_VEC=1 interior path), lands by the end of iteration kt - 2, is realigned in place
    // during iteration kt - 1 (spread over the k16 steps), and multiplied in iteration kt.
    // One barrier per iteration, after the wait for the copy realigned next.
    static_assert(kSteps >= 2, "copies are spread over kSteps - 1 steps");
    constexpr int R = kRawStages;
    constexpr int kAB = kRawAHalves * 2, kBB = BRaw::kHalves * 2;  // stage bytes
#if !PG_ROW_SPLIT
    const typename ARaw::Thread ta = ARaw::init(gA(), lda, tid);
    constexpr int k_head = 0;
#endif
    const typename BRaw::Thread tb = BRaw::init(gB(), ldb, tid);
    auto issue_edge = [&](int kt, int st) {
        int r, c;
        a_extent(kt, r, c);
#if PG_ROW_SPLIT
        AMover::issue_async(sA + st * kAStage, gA() + kt * a_step, lda, r, c, tid);
#else
        ARaw::issue(ta, gA(), sA0 + st * kAB, kt * a_step, lda, r, c, tid);
#endif
        b_extent(kt, r, c);
        BRaw::issue(tb, gB(), sB0 + st * kBB, kt * b_step, ldb, r, c, tid, kt == 0 ? k_head : 0);
    };
    // Whether K-tile kt's main chunks are all whole (see RawTile::issue_full).
    auto interior = [&](int kt) {
        int ar, ac, br, bc;
        a_extent(kt, ar, ac);
        b_extent(kt, br, bc);
        return ar >= kARows && ac >= kACols && br >= kBRows && bc >= kBCols;
    };
    // Realign part P (of kSteps) of stage st. PG_ROW_SPLIT: B's chunk P of each lane's run;
    // otherwise the A runs, then the B runs, split evenly.
#if PG_ROW_SPLIT
    static_assert(BRaw::kRun == kSteps, "realign_down: one chunk per k16 step");
    uint32_t ra_hi[4];  // realign_down's carried input chunk
    auto realign_part = [&](int st, auto part) {
        BRaw::template realign_down<decltype(part)::value>(tb, sB0 + st * kBB, ra_hi);
    };
#else
    constexpr int kARuns = ARaw::kRun;
    constexpr int kRunTot = kARuns + BRaw::kRun;
    auto realign_part = [&](int st, auto part) {
        constexpr int P = decltype(part)::value;
        constexpr int lo = P * kRunTot / kSteps, hi = (P + 1) * kRunTot / kSteps;
        constexpr int blo = lo > kARuns ? lo - kARuns : 0, bhi = hi > kARuns ? hi - kARuns : 0;
        constexpr int alo = lo < kARuns ? lo : kARuns, ahi = hi < kARuns ? hi : kARuns;
        ARaw::template realign<alo, ahi>(ta, sA0 + st * kAB);
        BRaw::template realign<blo, bhi>(tb, sB0 + st * kBB);
    };
#endif
#define HG_REALIGN_ALL(ST)                                                                     \
    do {                                                                                      \
        realign_part(ST, std::integral_constant<int, 0>());                                   \
        realign_part(ST, std::integral_constant<int, 1>());                                   \
        if constexpr (kSteps > 2) realign_part(ST, std::integral_constant<int, (kSteps > 2 ? 2 : 0)>()); \
        if constexpr (kSteps > 3) realign_part(ST, std::integral_constant<int, (kSteps > 3 ? 3 : 0)>()); \
    } while (0)
    static_assert(kSteps <= 4, "the PG_VEC=0 path realigns in at most 4 parts");

    // Prologue: K-tiles 0 .. R-2 in flight; K-tile 0 realigned; K-tile 1 landed.
#pragma unroll
    for (int s = 0; s < R - 1; ++s) {
        if (s < KT) issue_edge(s, s);
        cp_async_commit();
    }
    cp_async_wait<R - 2>();
#if PG_ROW_SPLIT
    // K-tile 0's first e columns of A hold the elements before each row (any value, NaN
    // included): zero them. The thread that copied chunk 0 of a row does it (its own
    // cp.async has landed), before the barrier publishes the stage.
    if (k_head != 0 && tid % AMover::kCpr == 0) {
#pragma unroll
        for (int i = 0; i < AMover::kVecIters; ++i) {
            const uint32_t addr = sA0 + 2 * swizzle<kACols>(tid / AMover::kCpr + i * AMover::kRowStep, 0);
            uint32_t w[4];
            lds128(w, addr);
#pragma unroll
            for (int j = 0; j < 4; ++j) {  // word j holds halves 2j (low) and 2j+1 (high)
                if (2 * j + 2 <= k_head) w[j] = 0u;
                else if (2 * j + 1 == k_head) w[j] &= 0xffff0000u;
            }
            sts128(addr, w);
        }
    }
#endif
    __syncthreads();
    HG_REALIGN_ALL(0);
    cp_async_wait<R - 3>();
    __syncthreads();

    uint32_t af[2][kMmaM][4];
    uint32_t bf[2][kMmaN][2];
    uint32_t rdA = sA0, rdB = sB0;
    load_fragments(af[0], bf[0], fo, rdA, rdB, 0);

    // Interior copies: per-thread source pointers of K-tile kt + R - 1, advanced per iteration.
#if PG_ROW_SPLIT
    using AFast = AMover;
#define HG_A_FULL(LO, HI) AMover::template issue_full<LO, HI>(da, a_src, a_row_step)
    const uint32_t a_dst = AMover::thread_dst(tid);
    const pg_half* a_src = AMover::thread_src(gA(), lda, tid) + (R - 1) * a_step;
    constexpr int kAChunks = AMover::kVecIters;
#else
    using AFast = ARaw;
#define HG_A_FULL(LO, HI) ARaw::template issue_full<LO, HI>(da, a_src, a_row_step)
    const uint32_t a_dst = ARaw::main_dst(tid);
    const pg_half* a_src = gA() + ta.src + (R - 1) * a_step;
    constexpr int kAChunks = ARaw::kIters;
#endif
    constexpr int kBChunks = BRaw::kIters;
    constexpr int kParts = kSteps - 1;
    const int a_row_step = AFast::kRowStep * lda;
    const int b_row_step = BRaw::kRowStep * ldb;
    const uint32_t b_dst = BRaw::main_dst(tid);
    const pg_half* b_src = gB() + tb.src + (R - 1) * b_step;
    // The extra window chunk of A's rows (none under PG_ROW_SPLIT: A's rows are aligned).
#if PG_ROW_SPLIT
#define HG_A_EXTRA(KT, ST) ((void)0)
#else
#define HG_A_EXTRA(KT, ST)                                                                     \
    do {                                                                                      \
        int r_, c_;                                                                           \
        a_extent(KT, r_, c_);                                                                 \
        ARaw::issue_extra(ta, gA(), sA0 + (ST) * kAB, (KT) * a_step, lda, r_, c_, tid);          \
    } while (0)
#endif
    int st_cp = R - 1;  // stage receiving K-tile kt + R - 1
    int st_rd = 0;      // stage holding K-tile kt
    for (int kt = 0; kt < KT; ++kt) {
        const int ktc = kt + R - 1;
        const bool copy = ktc < KT;
        const bool fast = copy && interior(ktc);
        const bool more = kt + 1 < KT;
        const int st_ra = st_rd + 1 == R ? 0 : st_rd + 1;  // stage realigned now (K-tile kt+1)
#pragma unroll
        for (int ks = 0; ks < kSteps; ++ks) {
            if (ks < kParts) {
                if (fast) {
                    constexpr int kTot = kAChunks + kBChunks;
                    const uint32_t da = sA0 + st_cp * kAB + a_dst, db = sB0 + st_cp * kBB + b_dst;
#define HG_RAW_PART(P)                                                                           \
    if (ks == P) {                                                                              \
        constexpr int lo = (P) < kParts ? (P) * kTot / kParts : kTot;                            \
        constexpr int hi = (P) < kParts ? ((P) + 1) * kTot / kParts : kTot;                      \
        HG_A_FULL((lo < kAChunks ? lo : kAChunks), (hi < kAChunks ? hi : kAChunks));              \
        BRaw::template issue_full<(lo > kAChunks ? lo - kAChunks : 0),                            \
                                  (hi > kAChunks ? hi - kAChunks : 0)>(db, b_src, b_row_step);    \
        if (P == 0) {                                                                           \
            int r_, c_;                                                                         \
            HG_A_EXTRA(ktc, st_cp);                                                             \
            b_extent(ktc, r_, c_);                                                              \
            BRaw::issue_extra(tb, gB(), sB0 + st_cp * kBB, ktc * b_step, ldb, r_, c_, tid);                               \
        }                                                                                       \
    }
                    HG_RAW_PART(0)
                    HG_RAW_PART(1)
                    HG_RAW_PART(2)
#undef HG_RAW_PART
#undef HG_A_EXTRA
#undef HG_A_FULL
                } else if (ks == 0 && copy) {
                    issue_edge(ktc, st_cp);
                }
            }
            if (ks == kParts - 1) {
                cp_async_commit();  // possibly empty: one group per iteration
                a_src += a_step;
                b_src += b_step;
            }
            if (more) {
#define HG_REALIGN(P)                                                                            \
    if constexpr ((P) < kSteps) {                                                               \
        if (ks == (P)) realign_part(st_ra, std::integral_constant<int, ((P) < kSteps ? (P) : 0)>()); \
    }
                HG_REALIGN(0)
                HG_REALIGN(1)
                HG_REALIGN(2)
                HG_REALIGN(3)
#undef HG_REALIGN
            }
            if (ks == kSteps - 1) {
                // K-tile kt+2 must have landed before the next iteration realigns it; the
                // barrier publishes K-tile kt+1's realigned stage and frees stage kt for
                // the next iteration's copies.
                cp_async_wait<R - 3>();
                __syncthreads();
                st_rd = st_ra;
                st_cp = st_cp + 1 == R ? 0 : st_cp + 1;
                rdA = sA0 + st_rd * kAB;
                rdB = sB0 + st_rd * kBB;
            }
            warp_step(acc, af[ks & 1], bf[ks & 1], af[(ks + 1) & 1], bf[(ks + 1) & 1], fo, rdA,
                      rdB, (ks + 1) % kSteps);
        }
    }
    cp_async_wait<0>();
#undef HG_REALIGN_ALL
#endif

    // Epilogue: accumulator fragment (mi, ni) holds rows g, g+8 and cols 2*(lane%4) + {0, 1}
    // of its 16x8 tile, g = lane / 4.
    const int g = lane >> 2;
    const int t2 = (lane & 3) * 2;
#if PG_ROW_SPLIT
    tile_origin(tm0, tn0);  // the rows and columns this block stores start here
#endif
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = m0 + wm0 + mi * kInstM + g + h * 8;
            if (row >= M) continue;
#if PG_ROW_SPLIT
            if (row < tm0) continue;
#endif
#pragma unroll
            for (int ni = 0; ni < kMmaN; ++ni) {
                const int col = n0 + wn0 + ni * kInstN + t2;
#if PG_ROW_SPLIT
                store_pair(C, ldc, row, col, N, acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1],
                           alpha, beta, tn0);
#else
                store_pair(C, ldc, row, col, N, acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1],
                           alpha, beta);
#endif
            }
        }
    }
#if PG_SPLIT
    // K-slice blockIdx.z of this tile is in the workspace: the last slice to finish adds them
    // all into D (common.cuh).
    static_assert(PG_BATCH && PG_OUT_F32, "PG_SPLIT: the K-slices are a batch of fp32 partial tiles");
    const float* const W = reinterpret_cast<const float*>(C) - blockIdx.z * pg_batch_c;
    unsigned int* const count = pg_split_count + (m0 / kBM) * CEIL_DIV(N, kBN) + n0 / kBN;
    if (pg_split_resident) {  // every block resident: all of them reduce, band by band
        pg_split_arrive(0, kThreads, tid, count, gridDim.z);
        const int tiles = gridDim.x * gridDim.y;  // this block: (blockIdx.y, blockIdx.x) of slice blockIdx.z
        pg_split_reduce_all(0, kThreads, tid, blockIdx.y * gridDim.x + blockIdx.x + blockIdx.z * tiles,
                            tiles * gridDim.z, pg_split_count, M, N, kBM, kBN,
                            gridDim.z, W, ldc, 1, pg_batch_c, pg_split_d, pg_split_d_rs,
                            pg_split_d_cs, pg_split_alpha, pg_split_beta, pg_split_d_half);
    } else {
        pg_split_fixup(0, kThreads, tid, count, gridDim.z, W, ldc, 1, pg_batch_c, m0, n0,
                       min(kBM, M - m0), min(kBN, N - n0), pg_split_d, pg_split_d_rs,
                       pg_split_d_cs, pg_split_alpha, pg_split_beta, pg_split_d_half);
    }
#endif
}
