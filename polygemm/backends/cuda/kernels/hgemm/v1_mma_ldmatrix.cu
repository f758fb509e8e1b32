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
// Revision (PG_VEC=1 main loop). ncu at 4096^3 (H200, 1.76 GHz) before: tensor pipe (HMMA)
// active 64% of peak, issue active 38%, 119 M warp instructions, stalls per issue: wait 2.06,
// math-pipe throttle 0.66, barrier 0.52; SASS showed ~200 address/predicate instructions
// per K-tile (64-bit address + zero-fill size per cp.async) issued in one burst between the
// HMMAs of step 0. Change: tiles fully inside the matrix (the block's M x N tile inside and
// the K-tile inside) take an unpredicated cp.async path whose per-thread source pointer and
// swizzled shared offset are computed once (one 64-bit add per copy), its 12 copies spread
// over k16 steps 0..kSteps-2 and committed before the step kSteps-1 wait; edge tiles keep
// the predicated issue at step 0. After: HMMA active 74%, issue active 27%, 73 M
// instructions; stalls wait 2.82, math-pipe throttle 1.89 (the tensor pipe is now the
// limiter at ~70% of its mma.sync peak; shared-memory wavefronts (ldmatrix + fills) take
// ~0.9 of the smem bandwidth the HMMA rate needs at the mma.sync ceiling). Own harness,
// TFLOP/s (cuBLAS in the same process): 4096^3 391 -> 428..445 (cuBLAS 755),
// 8192^3 376 -> 415..422 (650..667), 2048^3 280 -> 314..317 (545),
// 1000x3000x2000 241 -> 224 (554; one partial wave, slightly less prefetch lead),
// 4095x4097x4093 (PG_VEC=0, unchanged path) 134 (150). Tried and not kept: 128x256 tiles,
// BK=32 with 4 or 6 stages (better at 2048^3 / 1000x3000x2000, worse at 4096^3 / 8192^3),
// spreading the PG_VEC=0 register staging over k16 steps (84 TFLOP/s: long-scoreboard stalls).
//
// Revision (PG_VEC=0). Before: 4-byte loads + shuffles staged in registers, 134 TFLOP/s at
// 4095x4097x4093 (0.89x cuBLAS). Now (RawTile): aligned 16-byte windows by cp.async, realigned
// in shared memory. 2 raw + 2 swizzled stages: 183; 4 padded stages realigned in place (copy
// lead 2 K-tiles, interior copies spread over the k16 steps): 210; a realign call's loads
// first: 214 (1.43x cuBLAS; `polygemm bench`, docs/benchmarks/h200_fp16.md). Own harness at
// that shape: without the copies 287, without the realign 276, without both 431 (the
// ldmatrix + mma.sync loop of this tile shape alone); ncu: tensor pipe 38% active, shared
// loads conflict-free, the cp.async of windows that straddle 128-byte lines costing ~2.5x
// the ideal shared-store wavefronts. Tried and not kept: realign items beside the mma rows
// of warp_step (191), one warp per row phase with the shift compiled per phase (193: two
// 16-byte loads per chunk; ALU was not the limit), sm_90 bulk copies (cp.async.bulk) of each
// row's window on an mbarrier (159: 320 small bulk copies per K-tile).
//
// Revision (PG_ROW_SPLIT, the unaligned build for row-major A and B). Splitting A's rows into
// sets of one 16-byte phase makes A an aligned operand (K extended by the phase), so only B
// is realigned: 214 -> 261 TFLOP/s at 4095x4097x4093 (own harness). B's realign walking each
// lane's 4 chunks downwards (5 shared loads instead of 8): 269. Edge threadblock tiles moved
// inside the matrix (storing only their own rows and columns), so no tile takes the
// predicated copies: 300; `polygemm bench` 295.9 = 2.03x cuBLAS (docs/benchmarks/README.md).
// Diagnostics (own harness): B's realign off 317, B's copies off 281, both off 328. Tried
// and not kept: skipping the copies of rows past the edge with a predicate (283), loading
// the realign's next chunk one k16 step ahead (258, a register spilled).

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
#if PG_ROW_SPLIT && (PG_VEC || PG_TRANS_A || PG_TRANS_B)
#error "PG_ROW_SPLIT=1 is a PG_VEC=0 build for row-major A and B (PG_TRANS_A=0, PG_TRANS_B=0)"
#endif

// Tuning knobs (the shipped configuration is the default; variants.json describes it).
#ifndef HG_BM
#define HG_BM 256
#endif
#ifndef HG_BN
#define HG_BN 128
#endif
#ifndef HG_BK
#define HG_BK 64
#endif
#ifndef HG_WARPS_M
#define HG_WARPS_M 4
#endif
#ifndef HG_WARPS_N
#define HG_WARPS_N 2
#endif
#ifndef HG_STAGES
#define HG_STAGES 3
#endif
#ifndef HG_GROUP_M
#define HG_GROUP_M 8
#endif
#ifndef HG_MIN_BLOCKS
#define HG_MIN_BLOCKS 1
#endif

namespace hgemm_v1 {

constexpr int kTbM = HG_BM;  // threadblock tile
constexpr int kTbN = HG_BN;
constexpr int kTbK = HG_BK;
constexpr int kWarpsM = HG_WARPS_M;
constexpr int kWarpsN = HG_WARPS_N;
constexpr int kThreads = 32 * kWarpsM * kWarpsN;
constexpr int kWarpM = kTbM / kWarpsM;  // warp tile
constexpr int kWarpN = kTbN / kWarpsN;
constexpr int kInstM = 16, kInstN = 8, kInstK = 16;  // instruction shape m16n8k16
constexpr int kMmaM = kWarpM / kInstM;                // mma tiles per warp tile along M
constexpr int kMmaN = kWarpN / kInstN;                // ... along N
constexpr int kSteps = kTbK / kInstK;                 // k16 steps per threadblock K-tile
constexpr int kStages = HG_STAGES;
constexpr int kGroupM = HG_GROUP_M;

static_assert(kWarpM % kInstM == 0 && kWarpN % 16 == 0, "warp tile: M % 16, N % 16 (x4 B loads)");
static_assert(kSteps >= 2 && kSteps <= 8, "BK must be 32 .. 128");
static_assert(kStages >= 2, "at least two stages");

// Shared tile shapes: rows x cols, cols contiguous (the global contiguous dimension).
constexpr int kARows = PG_TRANS_A ? kTbK : kTbM;
constexpr int kACols = PG_TRANS_A ? kTbM : kTbK;
constexpr int kBRows = PG_TRANS_B ? kTbN : kTbK;
constexpr int kBCols = PG_TRANS_B ? kTbK : kTbN;
constexpr int kAStage = kTbM * kTbK;  // halves per stage
constexpr int kBStage = kTbK * kTbN;
constexpr int kSmemBytes = kStages * (kAStage + kBStage) * 2;
static_assert(kSmemBytes <= 227 * 1024, "dynamic shared memory above the sm_90 per-block limit");

// ------------------------------------------------------------------------------------------
// PTX wrappers
// ------------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte cp.async, L2 only (.cg); bytes in [0, 16]: the rest of the 16 shared bytes is zeroed.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
                 "l"(__cvta_generic_to_global(src)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void lds128(uint32_t* r, uint32_t addr) {
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void sts128(uint32_t addr, const uint32_t* r) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]), "r"(r[1]),
                 "r"(r[2]), "r"(r[3])
                 : "memory");
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// d += a * b on one m16n8k16 tile (fp16 or bf16 in, fp32 accumulate).
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4],
                                          const uint32_t (&b)[2]) {
    asm volatile(  // volatile: keeps the ldmatrix / mma interleaving as written
        "mma.sync.aligned.m16n8k16.row.col.f32" PG_MMA_AB PG_MMA_AB ".f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ------------------------------------------------------------------------------------------
// Swizzled shared tile of kRows x kCols halves: element offset of 16-byte chunk `chunk` of
// row `row` (see the header for why this is conflict-free).
// ------------------------------------------------------------------------------------------
template <int kCols>
__device__ __forceinline__ int swizzle(int row, int chunk) {
    constexpr int kCpr = kCols / 8;  // chunks per row
    static_assert(kCpr == 4 || kCpr % 8 == 0, "tile rows must be 64 B or a multiple of 128 B");
    const int phys = (kCpr >= 8) ? (chunk ^ (row & 7)) : (chunk ^ ((row >> 1) & 3));
    return row * kCols + phys * 8;
}

// The layout the fragments are loaded from: the swizzled tile (PG_VEC=1) or, for PG_VEC=0,
// a padded one (row pitch kCols + 8 halves, one 16-byte chunk more than a row: RawTile).
// Padded rows are conflict-free for ldmatrix too: the pitch is 1 chunk mod 8, so the 8 rows
// of an 8x8 tile fall into 8 distinct 16-byte bank groups.
// Under PG_ROW_SPLIT, A's tile is aligned and swizzled while B's is padded.
constexpr bool kASwizzled = PG_VEC || PG_ROW_SPLIT;
constexpr bool kBSwizzled = PG_VEC;
template <int kCols, bool kSwizzled>
__device__ __forceinline__ int tile_offset(int row, int chunk) {
    if constexpr (kSwizzled)
        return swizzle<kCols>(row, chunk);
    else
        return row * (kCols + 8) + chunk * 8;
}
constexpr int kAPitch = kASwizzled ? kACols : kACols + 8;  // halves from one tile row to the next
constexpr int kBPitch = kBSwizzled ? kBCols : kBCols + 8;

// Global -> shared mover for one operand tile (kRows x kCols, cols contiguous in global
// memory with leading dimension ld). rows_left / cols_left: how many rows / cols of the tile
// lie inside the matrix (may exceed the tile; elements outside read as 0).
template <int kRows, int kCols>
struct TileMover {
    static constexpr int kCpr = kCols / 8;
    static constexpr int kChunks = kRows * kCpr;
    static constexpr int kVecIters = kChunks / kThreads;      // 16-byte chunks per thread
    static_assert(kChunks % kThreads == 0, "tile must split into whole chunks per thread");

    // Thread t owns chunks t, t + kThreads, ...: chunk column fixed, rows kRowStep apart.
    // kRowStep % 8 == 0 keeps row & 7 and hence the swizzled chunk the same for all of them.
    static constexpr int kRowStep = kThreads / kCpr;
    static_assert(kThreads % kCpr == 0 && (kVecIters == 1 || kRowStep % 8 == 0),
                  "thread -> chunk mapping must keep the swizzle phase");

    // PG_VEC=1: cp.async.cg 16 B per chunk.
    __device__ static __forceinline__ void issue_async(pg_half* s, const pg_half* g, int ld,
                                                       int rows_left, int cols_left, int tid) {
        const int row = tid / kCpr;
        const int ch = tid % kCpr;
        int n = cols_left - ch * 8;
        n = n > 8 ? 8 : n;
        const uint32_t dst = smem_addr(s + swizzle<kCols>(row, ch));
        const pg_half* src = g + row * ld + ch * 8;
#pragma unroll
        for (int i = 0; i < kVecIters; ++i) {
            const bool ok = row + i * kRowStep < rows_left && n > 0;
            // Chunks outside the matrix copy 0 bytes (zero fill) from g, an element inside it.
            cp_async16(dst + i * kRowStep * kCols * 2, ok ? src + i * kRowStep * ld : g,
                       ok ? 2 * n : 0);
        }
    }

    // PG_VEC=1 interior fast path: the whole tile lies inside the matrix, so every chunk is a
    // full unpredicated 16-byte copy. The per-thread source (first chunk) and shared offset are
    // computed once per kernel; chunk i is at src + i * kRowStep * ld and dst + i * kDstStep
    // (an immediate), so a copy costs one 64-bit add and the cp.async itself.
    // part(): chunks [kLo, kHi) only, so the copies of one K-tile can be spread over k16 steps.
    static constexpr int kDstStep = kRowStep * kCols * 2;  // bytes
    __device__ static __forceinline__ const pg_half* thread_src(const pg_half* g, int ld, int tid) {
        return g + (tid / kCpr) * ld + (tid % kCpr) * 8;
    }
    __device__ static __forceinline__ uint32_t thread_dst(int tid) {
        return 2 * swizzle<kCols>(tid / kCpr, tid % kCpr);
    }
    template <int kLo, int kHi>
    __device__ static __forceinline__ void issue_full(uint32_t dst, const pg_half* src,
                                                      int row_step) {
#pragma unroll
        for (int i = kLo; i < kHi; ++i)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst + i * kDstStep),
                         "l"(__cvta_generic_to_global(src + i * row_step))
                         : "memory");
    }
};

// PG_VEC=0 (any alignment): realigning mover. A tile row of kCols halves starts e = (address
// / 2) % 8 halves past a 16-byte boundary. Its aligned window of kCpr + 1 chunks (from the
// row start rounded down to 16 bytes) moves with full-width cp.async into a padded tile row
// (pitch kCols + 8 halves); later, while an earlier stage is multiplied, a realign pass
// shifts every row left by e halves in place (16-byte shared loads of chunks c and c+1, a
// word select and a funnel shift, a 16-byte store to chunk c), leaving the row's elements
// at its start, where the fragments are loaded from. The shift is the same for every row a
// thread touches, in every K-tile: rows kRowStep apart, and K-tile steps, move the address
// by multiples of 16 bytes. Bytes past the matrix edge are zero-filled by cp.async's
// src-size; bytes before a row's first element (in the same aligned 16-byte segment, hence
// inside the allocation) are read and shifted out.
// Output chunk o of a realigned row from its input chunks lo (same index) and hi (next): the
// 8 words lo:hi shifted down by e halves (q = e / 2 whole words, then a half word).
__device__ __forceinline__ void shift_chunk(const uint32_t (&lo)[4], const uint32_t (&hi)[4], int e,
                                            uint32_t (&o)[4]) {
    const int q = e >> 1;
    const uint32_t sh = (e & 1) * 16;
    const uint32_t r[8] = {lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]};
    uint32_t x[6], y[5];
#pragma unroll
    for (int i = 0; i < 6; ++i) x[i] = (q & 2) ? r[i + 2] : r[i];
#pragma unroll
    for (int i = 0; i < 5; ++i) y[i] = (q & 1) ? x[i + 1] : x[i];
#pragma unroll
    for (int i = 0; i < 4; ++i) o[i] = __funnelshift_r(y[i], y[i + 1], sh);
}

// kDown: the realign walks each lane's kRun contiguous chunks downwards, one per k16 step
// (realign_down), instead of the lanes of a row striding through it together (realign).
template <int kRows, int kCols, bool kDown = false>
struct RawTile {
    static constexpr int kCpr = kCols / 8;                   // output chunks per row
    static constexpr int kPitch = kCols + 8;                 // kCpr + 1 chunks
    static constexpr int kHalves = kRows * kPitch;
    static constexpr int kRowStep = kThreads / kCpr;         // copy mapping (as TileMover)
    static constexpr int kIters = kRows * kCpr / kThreads;   // main chunks per thread
    static constexpr int kRunsPerRow = kThreads / kRows;     // realign: lanes per row ...
    static constexpr int kRun = kCpr / kRunsPerRow;          // ... each realigning kRun chunks
    static constexpr int kRowsPerWarp = kRows / (kThreads / 32);
    static_assert(kThreads % kRows == 0 && kCpr % kRunsPerRow == 0, "realign mapping");
    static_assert(kRowsPerWarp >= 8 && kRowsPerWarp * kRunsPerRow == 32, "a warp realigns whole rows");
    static_assert(kRowStep % 8 == 0 || kIters == 1, "copy rows must share the 16-byte phase");
    // Bank groups: the pitch is 1 chunk mod 8, so 8 consecutive chunks of a row (main
    // copies), or one chunk of 8 consecutive rows (extra copies; realign: lanes l..l+7 take
    // rows l..l+7 of the same run), hit 8 distinct 16-byte bank groups.
    static_assert((kPitch / 8) % 8 == 1, "pitch must be 1 chunk mod 8");

    __device__ static __forceinline__ int shift(const pg_half* p) {
        return static_cast<int>((reinterpret_cast<uintptr_t>(p) >> 1) & 7);
    }

    // Per-thread constants of one operand, from the tile origin g of K-tile 0 (offsets in
    // elements from g; every function below takes the same g). Kept small (registers are
    // scarce); what the edge path needs besides is recomputed from tid.
    struct Thread {
        int src;        // main copies: window chunk tid % kCpr of row tid / kCpr
        int xsrc;       // extra chunk kCpr of row tid (tid < kRows)
        uint32_t run;   // realign: byte offset of this thread's first chunk in a stage
        int e_run;      // realign: the run row's phase (halves past a 16-byte boundary)
    };
    __device__ static __forceinline__ uint32_t main_dst(int tid) {
        return 2 * ((tid / kCpr) * kPitch + (tid % kCpr) * 8);
    }
    __device__ static __forceinline__ uint32_t extra_dst(int tid) {
        return 2 * ((tid < kRows ? tid : 0) * kPitch + kCpr * 8);
    }
    __device__ static __forceinline__ Thread init(const pg_half* g, int ld, int tid) {
        Thread t;
        const int row = tid / kCpr, ch = tid % kCpr;
        t.src = row * ld - shift(g + row * ld) + ch * 8;
        const int xr = tid < kRows ? tid : 0;
        t.xsrc = xr * ld - shift(g + xr * ld) + kCpr * 8;
        const int lane = tid & 31, warp = tid >> 5;
        const int run_row = warp * kRowsPerWarp + lane % kRowsPerWarp;
        const int j0 = lane / kRowsPerWarp;  // this lane's first chunk (see realign)
        t.e_run = shift(g + run_row * ld);
        t.run = 2 * (run_row * kPitch + (kDown ? j0 * kRun : j0) * 8);
        return t;
    }

    // Bytes of a chunk inside the matrix: chunk c of a row covers row elements
    // [8c - e, 8c + 8 - e); those at or past cols_left read as zero.
    __device__ static __forceinline__ int chunk_bytes(int cols_left, int e, int c) {
        const int n = 2 * (cols_left + e - 8 * c);
        return n < 0 ? 0 : (n > 16 ? 16 : n);
    }

    // Edge tiles: every chunk predicated (rows_left / cols_left as in TileMover). `off` is
    // the K-tile origin's element offset from K-tile 0's, `stage` a shared byte address.
    // Under PG_ROW_SPLIT, rows below row_lo read as zero too (B's leading rows).
    __device__ static __forceinline__ void issue(const Thread& t, const pg_half* g, uint32_t stage,
                                                 int off, int ld, int rows_left, int cols_left,
                                                 int tid, int row_lo = 0) {
        const int row = tid / kCpr, ch = tid % kCpr;
        const int nb = chunk_bytes(cols_left, shift(g + row * ld), ch);
        const uint32_t dst = stage + main_dst(tid);
#pragma unroll
        for (int i = 0; i < kIters; ++i) {
            const int ri = row + i * kRowStep;
            const int b = (ri < rows_left && !(PG_ROW_SPLIT && ri < row_lo)) ? nb : 0;
            // 0 bytes: nothing is read; the address stays 16-byte aligned.
            cp_async16(dst + i * kRowStep * kPitch * 2, g + (b ? t.src + off + i * kRowStep * ld : t.src), b);
        }
        issue_extra(t, g, stage, off, ld, rows_left, cols_left, tid, row_lo);
    }
    __device__ static __forceinline__ void issue_extra(const Thread& t, const pg_half* g,
                                                       uint32_t stage, int off, int ld,
                                                       int rows_left, int cols_left, int tid,
                                                       int row_lo = 0) {
        if (kRows == kThreads || tid < kRows) {
            const int b = (tid < rows_left && !(PG_ROW_SPLIT && tid < row_lo))
                              ? chunk_bytes(cols_left, shift(g + tid * ld), kCpr) : 0;
            cp_async16(stage + extra_dst(tid), g + (b ? t.xsrc + off : t.xsrc), b);
        }
    }
    // Interior tiles (rows_left >= kRows, cols_left >= kCols): main chunks [kLo, kHi) are
    // whole (chunk ch ends at row element 8 ch + 8 - e_main <= kCols).
    template <int kLo, int kHi>
    __device__ static __forceinline__ void issue_full(uint32_t dst, const pg_half* src,
                                                      int row_step) {
#pragma unroll
        for (int i = kLo; i < kHi; ++i)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(
                             dst + i * kRowStep * kPitch * 2),
                         "l"(__cvta_generic_to_global(src + i * row_step))
                         : "memory");
    }

    // Realign, in place, steps [kLo, kHi) of this thread's share of its row in stage `stage`.
    // Output chunk c needs input chunks c and c+1. One thread per row (kRunsPerRow == 1):
    // the thread walks the row upwards, reading chunk c+1 before it overwrites it. Several
    // lanes per row (the same warp): lane j0 of a row does chunks j0, j0 + kRunsPerRow, ...;
    // in step j the row's lanes read chunks [j R, j R + R] and, after a __syncwarp, write
    // [j R, j R + R), so nothing is overwritten before it is read.
    template <int kLo, int kHi>
    __device__ static __forceinline__ void realign(const Thread& t, uint32_t stage) {
        // All loads of the call first (they overlap), then the stores: step j reads
        // [j R, j R + R] and writes [j R, j R + R), so no step writes what a step of the same
        // call reads before it.
        constexpr int kN = kHi > kLo ? kHi - kLo : 1;
        if constexpr (kHi > kLo) {
            const int q = t.e_run >> 1;               // whole words
            const uint32_t sh = (t.e_run & 1) * 16;   // and a half word
            const uint32_t base = stage + t.run;
            uint32_t w[kN + 1][4];                    // one lane per row: chunks kLo .. kHi
            uint32_t v[kRunsPerRow == 1 ? 1 : kN][4]; // several: chunk j R + R of each step
#pragma unroll
            for (int j = 0; j < kN; ++j) {
                lds128(w[j], base + (kLo + j) * kRunsPerRow * 16);
                if (kRunsPerRow > 1) lds128(v[j], base + (kLo + j) * kRunsPerRow * 16 + 16);
            }
            if (kRunsPerRow == 1) lds128(w[kN], base + kHi * 16);
            if (kRunsPerRow > 1) __syncwarp();
#pragma unroll
            for (int j = 0; j < kN; ++j) {
                const uint32_t* hi = kRunsPerRow == 1 ? w[j + 1] : v[kRunsPerRow == 1 ? 0 : j];
                const uint32_t r[8] = {w[j][0], w[j][1], w[j][2], w[j][3], hi[0], hi[1], hi[2], hi[3]};
                uint32_t x[6], y[5], o[4];  // as shift_chunk (kept inline: the measured build)
#pragma unroll
                for (int i = 0; i < 6; ++i) x[i] = (q & 2) ? r[i + 2] : r[i];
#pragma unroll
                for (int i = 0; i < 5; ++i) y[i] = (q & 1) ? x[i + 1] : x[i];
#pragma unroll
                for (int i = 0; i < 4; ++i) o[i] = __funnelshift_r(y[i], y[i + 1], sh);
                sts128(base + (kLo + j) * kRunsPerRow * 16, o);
            }
        }
    }

    // kDown realign, step P of kRun (one chunk per call, P = 0 .. kRun-1 in order): this
    // lane's chunk kRun-1-P, from that input chunk and the one above it, carried in `hi`
    // from the previous step (step 0 loads it: the first chunk of the next lane's run, or
    // the window's extra chunk). 5 shared loads per 4 chunks (the strided walk needs 8).
    // Only the last step overwrites a chunk another lane reads (its step-0 `hi`), so only
    // it waits for the warp.
    template <int P>
    __device__ static __forceinline__ void realign_down(const Thread& t, uint32_t stage,
                                                        uint32_t (&hi)[4]) {
        static_assert(kDown && P >= 0 && P < kRun, "realign_down: steps 0 .. kRun-1");
        constexpr int c = kRun - 1 - P;
        const uint32_t base = stage + t.run;
        uint32_t lo[4], o[4];
        if (P == 0) lds128(hi, base + kRun * 16);
        lds128(lo, base + c * 16);
        shift_chunk(lo, hi, t.e_run, o);
        if (P == kRun - 1) __syncwarp();
        sts128(base + c * 16, o);
#pragma unroll
        for (int i = 0; i < 4; ++i) hi[i] = lo[i];
    }
};

using AMover = TileMover<kARows, kACols>;
using BMover = TileMover<kBRows, kBCols>;
#if !PG_VEC
using ARaw = RawTile<kARows, kACols>;
using BRaw = RawTile<kBRows, kBCols, PG_ROW_SPLIT>;
// PG_VEC=0 shared memory: kRawStages stages (copied into, realigned, multiplied); A's is a
// swizzled unpadded tile under PG_ROW_SPLIT.
constexpr int kRawStages = 4;
constexpr int kRawAHalves = PG_ROW_SPLIT ? kAStage : ARaw::kHalves;
constexpr int kRawSmemBytes = kRawStages * (kRawAHalves + BRaw::kHalves) * 2;
static_assert(kRawSmemBytes <= 227 * 1024, "PG_VEC=0 shared memory above the sm_90 limit");
#endif

// Per-lane ldmatrix byte offsets inside one pipeline stage, split so that every fragment
// address is (stage base + one of these registers + a compile-time immediate). Moving 16 rows
// down a tile never changes the swizzle phase (row & 7, and (row >> 1) & 3), so those moves
// are immediates; what the XOR mixes is precomputed once per thread.
// ldmatrix.x4 lane roles: lane = 8 * tile + r8, the lane addresses row r8 of 8x8 tile `tile`.
//   A K-contiguous [BM][BK]: tiles (m+0,k+0) (m+8,k+0) (m+0,k+8) (m+8,k+8) -> a0 a1 a2 a3.
//   A M-contiguous [BK][BM]: same tiles, stored k-rows x m-cols, loaded with .trans.
//   B K-contiguous [BN][BK]: tiles (n+0,k+0) (n+0,k+8) (n+8,k+0) (n+8,k+8) -> b0 b1 of n8
//     fragment 2*nj, b0 b1 of fragment 2*nj+1.
//   B N-contiguous [BK][BN]: same tiles, stored k-rows x n-cols, loaded with .trans.
struct FragOffsets {
#if PG_TRANS_A
    uint32_t a[kMmaM];       // per m16 fragment; + ks * 16 rows
#else
    uint32_t a[kSteps];      // per k16 step; + mi * 16 rows
#endif
#if PG_TRANS_B
    uint32_t b[kSteps];      // per k16 step; + nj * 16 rows
#else
    uint32_t b[kMmaN / 2];   // per pair of n8 fragments; + ks * 16 rows
#endif

    __device__ __forceinline__ void init(int wm0, int wn0, int lane) {
        const int r8 = lane & 7;
        const int tile = lane >> 3;
#if PG_TRANS_A
#pragma unroll
        for (int mi = 0; mi < kMmaM; ++mi)
            a[mi] = 2 * tile_offset<kACols, kASwizzled>(r8 + (tile >> 1) * 8, (wm0 + mi * kInstM) / 8 + (tile & 1));
#else
#pragma unroll
        for (int ks = 0; ks < kSteps; ++ks)
            a[ks] = 2 * tile_offset<kACols, kASwizzled>(wm0 + (lane & 15), ks * 2 + (lane >> 4));
#endif
#if PG_TRANS_B
#pragma unroll
        for (int ks = 0; ks < kSteps; ++ks)
            b[ks] = 2 * tile_offset<kBCols, kBSwizzled>(wn0 + r8 + (tile >> 1) * 8, ks * 2 + (tile & 1));
#else
#pragma unroll
        for (int nj = 0; nj < kMmaN / 2; ++nj)
            b[nj] = 2 * tile_offset<kBCols, kBSwizzled>(r8 + (tile & 1) * 8, (wn0 + nj * 16) / 8 + (tile >> 1));
#endif
    }
    __device__ __forceinline__ uint32_t a_addr(uint32_t stage, int mi, int ks) const {
#if PG_TRANS_A
        return stage + a[mi] + ks * kInstK * kAPitch * 2;
#else
        return stage + a[ks] + mi * kInstM * kAPitch * 2;
#endif
    }
    __device__ __forceinline__ uint32_t b_addr(uint32_t stage, int nj, int ks) const {
#if PG_TRANS_B
        return stage + b[ks] + nj * 16 * kBPitch * 2;
#else
        return stage + b[nj] + ks * kInstK * kBPitch * 2;
#endif
    }
};

__device__ __forceinline__ void load_a_frag(uint32_t (&a)[4], uint32_t addr) {
#if PG_TRANS_A
    ldsm_x4_trans(a, addr);
#else
    ldsm_x4(a, addr);
#endif
}
__device__ __forceinline__ void load_b_frags(uint32_t (&b0)[2], uint32_t (&b1)[2], uint32_t addr) {
    uint32_t r[4];
#if PG_TRANS_B
    ldsm_x4(r, addr);
#else
    ldsm_x4_trans(r, addr);
#endif
    b0[0] = r[0]; b0[1] = r[1];
    b1[0] = r[2]; b1[1] = r[3];
}

// All fragments of k16 step ks of the warp tile from one stage.
__device__ __forceinline__ void load_fragments(uint32_t (&af)[kMmaM][4], uint32_t (&bf)[kMmaN][2],
                                               const FragOffsets& fo, uint32_t sa, uint32_t sb,
                                               int ks) {
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi) load_a_frag(af[mi], fo.a_addr(sa, mi, ks));
#pragma unroll
    for (int nj = 0; nj < kMmaN / 2; ++nj)
        load_b_frags(bf[2 * nj], bf[2 * nj + 1], fo.b_addr(sb, nj, ks));
}

// One k16 step of the warp tile: the kMmaM x kMmaN mma on (af, bf), with the ldmatrix of the
// next step's fragments (stage sa/sb, step nks) spread between the mma rows so the shared-
// memory pipe and the tensor cores stay busy together.
__device__ __forceinline__ void warp_step(float (&acc)[kMmaM][kMmaN][4],
                                          const uint32_t (&af)[kMmaM][4],
                                          const uint32_t (&bf)[kMmaN][2],
                                          uint32_t (&an)[kMmaM][4], uint32_t (&bn)[kMmaN][2],
                                          const FragOffsets& fo, uint32_t sa, uint32_t sb,
                                          int nks) {
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi) {
        load_a_frag(an[mi], fo.a_addr(sa, mi, nks));
        if (mi < kMmaN / 2) load_b_frags(bn[2 * mi], bn[2 * mi + 1], fo.b_addr(sb, mi, nks));
#pragma unroll
        for (int ni = 0; ni < kMmaN; ++ni) mma_16816(acc[mi][ni], af[mi], bf[ni]);
    }
#pragma unroll
    for (int nj = kMmaM; nj < kMmaN / 2; ++nj)
        load_b_frags(bn[2 * nj], bn[2 * nj + 1], fo.b_addr(sb, nj, nks));
}

#if PG_OUT_F32
typedef float OutT;
#else
typedef pg_half OutT;
#endif

__device__ __forceinline__ float load_out(const OutT* p) {
#if PG_OUT_F32
    return *p;
#else
    return pg_half2float(*p);
#endif
}
__device__ __forceinline__ void store_out(OutT* p, float v) {
#if PG_OUT_F32
    *p = v;
#else
    *p = pg_float2half_rn(v);
#endif
}

// Two horizontally adjacent results (row, col), (row, col+1) of one accumulator fragment.
// Columns below n_lo are left alone (PG_ROW_SPLIT's moved edge tiles).
__device__ __forceinline__ void store_pair(OutT* __restrict__ C, int ldc, int row, int col, int N,
                                           float v0, float v1, float alpha, float beta,
                                           int n_lo = 0) {
    OutT* p = C + row * ldc + col;
    v0 *= alpha;
    v1 *= alpha;
#if PG_VEC
    if (col + 1 < N) {  // col even, ldc % 8 == 0, C 16-byte aligned: the pair is aligned
#if PG_OUT_F32
        float2* q = reinterpret_cast<float2*>(p);
        if (beta != 0.f) {
            const float2 old = *q;
            v0 = fmaf(beta, old.x, v0);
            v1 = fmaf(beta, old.y, v1);
        }
        *q = make_float2(v0, v1);
#else
        pg_half2* q = reinterpret_cast<pg_half2*>(p);
        if (beta != 0.f) {
            const float2 old = pg_half22float2(*q);
            v0 = fmaf(beta, old.x, v0);
            v1 = fmaf(beta, old.y, v1);
        }
        *q = pg_floats2half2_rn(v0, v1);
#endif
        return;
    }
#endif
#if PG_ROW_SPLIT
    if (col < N && col >= n_lo) store_out(p, beta != 0.f ? fmaf(beta, load_out(p), v0) : v0);
    if (col + 1 < N && col + 1 >= n_lo) store_out(p + 1, beta != 0.f ? fmaf(beta, load_out(p + 1), v1) : v1);
#else
    if (col < N) store_out(p, beta != 0.f ? fmaf(beta, load_out(p), v0) : v0);
    if (col + 1 < N) store_out(p + 1, beta != 0.f ? fmaf(beta, load_out(p + 1), v1) : v1);
#endif
}

}  // namespace hgemm_v1

extern "C" __global__ void __launch_bounds__(hgemm_v1::kThreads, HG_MIN_BLOCKS)
hgemm_v1_mma_ldmatrix(int M, int N, int K, float alpha, const pg_half* __restrict__ A, int lda,
                      const pg_half* __restrict__ B, int ldb, float beta, void* __restrict__ Cv,
                      int ldc PG_BATCH_PARAMS PG_SPLIT_PARAMS)
{
    using namespace hgemm_v1;
#if PG_BATCH && PG_ROW_SPLIT
#error "PG_BATCH and PG_ROW_SPLIT both use blockIdx.z: the planner never combines them"
#endif
#if PG_BATCH
    {
        OutT* Cb = reinterpret_cast<OutT*>(Cv);
        PG_BATCH_SEEK(A, B, Cb);  // blockIdx.z is the batch here (never with PG_ROW_SPLIT)
        Cv = Cb;
    }
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
        const int tiles_n = gridDim.x, tiles_m = gridDim.y;
        const int pid = blockIdx.y * tiles_n + blockIdx.x;
        const int per_group = kGroupM * tiles_n;
        const int first_m = (pid / per_group) * kGroupM;
        const int gsz = min(tiles_m - first_m, kGroupM);
        const int in_group = pid % per_group;
        tm0 = (first_m + in_group % gsz) * kTbM;
        tn0 = (in_group / gsz) * kTbN;
    };
    int tm0, tn0;
    tile_origin(tm0, tn0);
    // A threadblock tile that crosses the bottom or right edge moves back inside the matrix
    // (when the matrix is at least a tile high / wide), overlapping its neighbour: every tile
    // then takes the unpredicated copies of the interior, and the epilogue stores only the
    // rows and columns from the unmoved origin on (tile_origin again), which no other block
    // stores.
    const int m0 = min(tm0, max(M - kTbM, 0));
    const int n0 = min(tn0, max(N - kTbN, 0));
#else
    const int tiles_n = gridDim.x, tiles_m = gridDim.y;
    const int pid = blockIdx.y * tiles_n + blockIdx.x;
    const int per_group = kGroupM * tiles_n;
    const int first_m = (pid / per_group) * kGroupM;
    const int gsz = min(tiles_m - first_m, kGroupM);
    const int in_group = pid % per_group;
    const int m0 = (first_m + in_group % gsz) * kTbM;
    const int n0 = (in_group / gsz) * kTbN;
#endif

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int wm0 = (warp / kWarpsN) * kWarpM;  // warp tile origin inside the threadblock tile
    const int wn0 = (warp % kWarpsN) * kWarpN;

    // Per-K-tile operand tile origins: tile kt starts at g + kt * step.
#if PG_TRANS_A
    const pg_half* const gA = A + m0;          // rows k, cols m
    const int a_step = kTbK * lda;
    const int a_cols_left = M - m0;
#else
    const pg_half* const gA = A + m0 * lda;    // rows m, cols k
    const int a_step = kTbK;
    const int a_rows_left = M - m0;
#endif
#if PG_TRANS_B
    const pg_half* const gB = B + n0 * ldb;    // rows n, cols k
    const int b_step = kTbK;
    const int b_rows_left = N - n0;
#else
    const pg_half* const gB = B + n0;          // rows k, cols n
    const int b_step = kTbK * ldb;
    const int b_cols_left = N - n0;
#endif
    // Rows / cols of K-tile kt inside the matrix.
    auto a_extent = [&](int kt, int& rows_left, int& cols_left) {
        const int k_left = K - kt * kTbK;
#if PG_TRANS_A
        rows_left = k_left; cols_left = a_cols_left;
#else
        rows_left = a_rows_left; cols_left = k_left;
#endif
    };
    auto b_extent = [&](int kt, int& rows_left, int& cols_left) {
        const int k_left = K - kt * kTbK;
#if PG_TRANS_B
        rows_left = b_rows_left; cols_left = k_left;
#else
        rows_left = k_left; cols_left = b_cols_left;
#endif
    };

    const int KT = CEIL_DIV(K, kTbK);

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
        AMover::issue_async(sA + stage * kAStage, gA + kt * a_step, lda, r, c, tid);
        b_extent(kt, r, c);
        BMover::issue_async(sB + stage * kBStage, gB + kt * b_step, ldb, r, c, tid);
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
    const bool mn_inside = (m0 + kTbM <= M) && (n0 + kTbN <= N);
    const pg_half* a_src = AMover::thread_src(gA, lda, tid);
    const pg_half* b_src = BMover::thread_src(gB, ldb, tid);
    const int a_row_step = AMover::kRowStep * lda;
    const int b_row_step = BMover::kRowStep * ldb;
    const uint32_t a_dst = sA0 + AMover::thread_dst(tid);
    const uint32_t b_dst = sB0 + BMover::thread_dst(tid);
    // Source of K-tile kt + kStages - 1, advanced by one K-tile per iteration.
    a_src += (kStages - 1) * a_step;
    b_src += (kStages - 1) * b_step;

    for (int kt = 0; kt < KT; ++kt) {
        const bool fast = mn_inside && (kt + kStages) * kTbK <= K;
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
    const typename ARaw::Thread ta = ARaw::init(gA, lda, tid);
    constexpr int k_head = 0;
#endif
    const typename BRaw::Thread tb = BRaw::init(gB, ldb, tid);
    auto issue_edge = [&](int kt, int st) {
        int r, c;
        a_extent(kt, r, c);
#if PG_ROW_SPLIT
        AMover::issue_async(sA + st * kAStage, gA + kt * a_step, lda, r, c, tid);
#else
        ARaw::issue(ta, gA, sA0 + st * kAB, kt * a_step, lda, r, c, tid);
#endif
        b_extent(kt, r, c);
        BRaw::issue(tb, gB, sB0 + st * kBB, kt * b_step, ldb, r, c, tid, kt == 0 ? k_head : 0);
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
    const pg_half* a_src = AMover::thread_src(gA, lda, tid) + (R - 1) * a_step;
    constexpr int kAChunks = AMover::kVecIters;
#else
    using AFast = ARaw;
#define HG_A_FULL(LO, HI) ARaw::template issue_full<LO, HI>(da, a_src, a_row_step)
    const uint32_t a_dst = ARaw::main_dst(tid);
    const pg_half* a_src = gA + ta.src + (R - 1) * a_step;
    constexpr int kAChunks = ARaw::kIters;
#endif
    constexpr int kBChunks = BRaw::kIters;
    constexpr int kParts = kSteps - 1;
    const int a_row_step = AFast::kRowStep * lda;
    const int b_row_step = BRaw::kRowStep * ldb;
    const uint32_t b_dst = BRaw::main_dst(tid);
    const pg_half* b_src = gB + tb.src + (R - 1) * b_step;
    // The extra window chunk of A's rows (none under PG_ROW_SPLIT: A's rows are aligned).
#if PG_ROW_SPLIT
#define HG_A_EXTRA(KT, ST) ((void)0)
#else
#define HG_A_EXTRA(KT, ST)                                                                     \
    do {                                                                                      \
        int r_, c_;                                                                           \
        a_extent(KT, r_, c_);                                                                 \
        ARaw::issue_extra(ta, gA, sA0 + (ST) * kAB, (KT) * a_step, lda, r_, c_, tid);          \
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
            BRaw::issue_extra(tb, gB, sB0 + st_cp * kBB, ktc * b_step, ldb, r_, c_, tid);                               \
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
    unsigned int* const count = pg_split_count + (m0 / kTbM) * CEIL_DIV(N, kTbN) + n0 / kTbN;
    if (pg_split_resident) {  // every block resident: all of them reduce, band by band
        pg_split_arrive(0, kThreads, tid, count, gridDim.z);
        pg_split_reduce_all(0, kThreads, tid, pid + blockIdx.z * tiles_m * tiles_n,
                            tiles_m * tiles_n * gridDim.z, pg_split_count, M, N, kTbM, kTbN,
                            gridDim.z, W, ldc, 1, pg_batch_c, pg_split_d, pg_split_d_rs,
                            pg_split_d_cs, pg_split_alpha, pg_split_beta, pg_split_d_half);
    } else {
        pg_split_fixup(0, kThreads, tid, count, gridDim.z, W, ldc, 1, pg_batch_c, m0, n0,
                       min(kTbM, M - m0), min(kTbN, N - n0), pg_split_d, pg_split_d_rs,
                       pg_split_d_cs, pg_split_alpha, pg_split_beta, pg_split_d_half);
    }
#endif
}
