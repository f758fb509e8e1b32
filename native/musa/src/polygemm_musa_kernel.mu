// polygemm_musa_kernel.mu -- FP16 GEMM for the Moore Threads MTT S4000 (mp_22).
//
// Design (seed 004, kept): B is transposed once into a K-major buffer (transpose kernel);
// the GEMM kernel runs 512 threads = 4 hardware warps of 128 threads ("waves") on
// 128x128x32 threadblock tiles; each wave computes a 64x64 sub-tile as 2x2 fragments of the
// native 32x32x16 tensor op; A and B tiles are staged in K-major shared memory padded by +8
// halves, double-buffered with __pipeline_memcpy_async (16-byte copies); blocks are remapped
// by a CTA swizzle of width 4 for L2 reuse; shared memory runs in 8-byte bank mode; the fp32
// accumulators go back to global memory through shared memory with 16-byte stores.
//
// Fixed relative to the seed:
//   - M and N edges are predicated (A rows, C rows/columns); the transposed B is zero-padded
//     to whole tiles, so its loads never need a predicate;
//   - any K: the K loop runs ceil(K/32) steps with a zero-filled tail (the seed required K to
//     be a multiple of 64 and computed a stale buffer otherwise); K == 0 gives C = beta*C;
//   - 16-byte copies/stores are used only where pointer and leading dimension allow them;
//     otherwise A takes a scalar-copy path (template kAVec=false) and C scalar stores;
//   - leading dimensions lda/ldb/ldc are honoured (the seed assumed lda=M, ldb=K, ldc=M);
//   - alpha/beta epilogue, beta == 0 never reads C;
//   - the CTA swizzle covered every tile only when the grid's N extent was a multiple of 4:
//     the last, narrower super-column now uses its true width;
//   - the write-back scratch is reused per fragment: barriers around each reuse;
//   - 1-D grid (the swizzle needs only the linear block id): no 65535 limit on M;
//   - 64-bit offsets everywhere a pointer is formed.
//
// Fragment ops go through the pgm_wave_frag_* layer: below, the native mtmusa::wmma 32x32x16
// fragments of one 128-thread wave; under nvcc, musa_compat_cuda.h provides the same calls as
// 4 warps x 16x16x16 nvcuda::wmma.
//
// Fallback if a toolkit rejects the fragment<matrix_a, 32, 32, 16, half, col_major> spelling
// (no public code uses it; the seed measured it) [unverified on hardware]:
// the MP22 tensor instruction is exposed as
//     __musa_fmma_m32n32k16_mma(d, a, b, c, 0, 0, 0, 0, 1, layout)
// with layout 0..3 = TT/TN/NT/NN, executed by all 128 threads of a wave, 8 fp32 accumulators
// per thread (MooreThreads/mutlass : include/mute/arch/mma_mp22.hpp and
// include/mute/atom/mma_traits_mp22.hpp). Replacing the four pgm_wave_frag_* functions of the
// MUSA branch with that intrinsic (fragment registers laid out as in mma_traits_mp22.hpp,
// loads from the same K-major shared tiles, accumulator written to the scratch col-major)
// leaves the rest of this kernel unchanged.
#include "pgm_device.h"
#include "pgm_common.h"

#include <climits>
#include <cstdint>
#include <cstring>

// ---- the wave fragment layer (native MUSA) --------------------------------------------------
#if defined(POLYGEMM_MUSA_FLAVOR_MUSA)
#define PGM_WAVE_THREADS 128
typedef mtmusa::wmma::fragment<mtmusa::wmma::matrix_a, 32, 32, 16, half, mtmusa::wmma::col_major>
    pgm_wave_frag_a;
typedef mtmusa::wmma::fragment<mtmusa::wmma::matrix_b, 32, 32, 16, half, mtmusa::wmma::row_major>
    pgm_wave_frag_b;
typedef mtmusa::wmma::fragment<mtmusa::wmma::accumulator, 32, 32, 16, float> pgm_wave_frag_acc;

__device__ inline void pgm_wave_frag_fill(pgm_wave_frag_acc& c, float v) {
    mtmusa::wmma::fill_fragment(c, v);
}
// p -> element (0, 0) of a 32 x 16 col-major A fragment: (m, k) at p[m + k*ld].
__device__ inline void pgm_wave_frag_load_a(pgm_wave_frag_a& a, const half* p, unsigned ld) {
    mtmusa::wmma::load_matrix_sync(a, p, ld);
}
// p -> element (0, 0) of a 16 x 32 row-major B fragment: (k, n) at p[k*ld + n].
__device__ inline void pgm_wave_frag_load_b(pgm_wave_frag_b& b, const half* p, unsigned ld) {
    mtmusa::wmma::load_matrix_sync(b, p, ld);
}
__device__ inline void pgm_wave_frag_mma(pgm_wave_frag_acc& c, const pgm_wave_frag_a& a,
                                         const pgm_wave_frag_b& b) {
    mtmusa::wmma::mma_sync(c, a, b, c);
}
// Stores the 32x32 accumulator col-major: (m, n) at p[m + n*ld].
__device__ inline void pgm_wave_frag_store_acc(float* p, const pgm_wave_frag_acc& c, unsigned ld) {
    mtmusa::wmma::store_matrix_sync(p, c, ld, mtmusa::wmma::mem_col_major);
}
#endif

namespace pgm {
namespace dev {

constexpr int BM = 128, BN = 128, BK = 32;   // threadblock tile
constexpr int WM = 32, WN = 32, WK = 16;     // wave fragment (native S4000 tensor op)
constexpr int NTILES_M = 2, NTILES_N = 2;    // fragments per wave: 64x64 per wave
constexpr int NTHREADS = 512;                // 4 waves of 128
constexpr int NWAVES = NTHREADS / PGM_WAVE_THREADS;
constexpr int LDA_S = BM + 8;                // +8 halves of padding against bank conflicts
constexpr int LDB_S = BN + 8;
constexpr int SWIZZLE_W = 4;
constexpr int A_BUF = BK * LDA_S;            // halves per A stage
constexpr int B_BUF = BK * LDB_S;
constexpr int SMEM_AB_BYTES = 2 * (A_BUF + B_BUF) * 2;
constexpr int SMEM_SCRATCH_BYTES = NWAVES * WM * WN * 4;
constexpr int SMEM_BYTES = SMEM_AB_BYTES > SMEM_SCRATCH_BYTES ? SMEM_AB_BYTES : SMEM_SCRATCH_BYTES;

static_assert(BM == kTileM && BN == kTileN && BK == kTileK, "tile constants out of sync");
static_assert(NWAVES == 4, "the block is 4 waves in a 2x2 arrangement");
static_assert(BM * BK == NTHREADS * 8 && BN * BK == NTHREADS * 8, "one 16-byte copy per thread");
static_assert((LDA_S * 2) % 16 == 0 && (LDB_S * 2) % 16 == 0, "16-byte aligned shared rows");

// 8 halves packed into 16 bytes (raw binary16 bits).
struct Half8 {
    uint4 v;
};

__device__ inline unsigned int& half8_word(Half8& h, int w) {
    return w == 0 ? h.v.x : w == 1 ? h.v.y : w == 2 ? h.v.z : h.v.w;
}
__device__ inline unsigned int half8_word(const Half8& h, int w) {
    return w == 0 ? h.v.x : w == 1 ? h.v.y : w == 2 ? h.v.z : h.v.w;
}
__device__ inline void half8_set(Half8& h, int i, unsigned short x) {
    unsigned int& w = half8_word(h, i >> 1);
    const int s = (i & 1) * 16;
    w = (w & ~(0xffffu << s)) | ((unsigned int)x << s);
}
__device__ inline unsigned short half8_get(const Half8& h, int i) {
    return (unsigned short)(half8_word(h, i >> 1) >> ((i & 1) * 16));
}
__device__ inline unsigned short half_bits(half x) {
    unsigned short b;
    memcpy(&b, &x, sizeof b);
    return b;
}
__device__ inline half bits_half(unsigned short b) {
    half x;
    memcpy(&x, &b, sizeof b);
    return x;
}

// ---- transpose: B (k x n, col-major, ldb) -> BT (kp x np, row-major), zero-padded --------
// 32x32 tiles through shared memory, block (32, 8). Reads run along k, writes along n.
// grid.x covers kp; grid.y loops over np (no 65535 limit).
__global__ void transpose_b_kernel(const unsigned short* __restrict__ B, long long ldb, int K,
                                   int N, unsigned short* __restrict__ BT, int Kp, int Np) {
    __shared__ unsigned short tile[32][33];
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int bk = blockIdx.x * 32;
    for (long long bn = (long long)blockIdx.y * 32; bn < Np; bn += (long long)gridDim.y * 32) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int gk = bk + tx;
            const long long gn = bn + ty + i * 8;
            tile[ty + i * 8][tx] = (gk < K && gn < N) ? B[gn * ldb + gk] : (unsigned short)0;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int gk = bk + ty + i * 8;
            const long long gn = bn + tx;
            if (gk < Kp && gn < Np) BT[(long long)gk * Np + gn] = tile[tx][ty + i * 8];
        }
        __syncthreads();
    }
}

// ---- the GEMM kernel --------------------------------------------------------------------------
// Two resident blocks per MP on S4000 (seed). The CUDA emulation keeps more state per
// thread (4 warps x 16x16 fragments), so it asks for one block per SM to stay spill-free;
// its speed is meaningless for S4000 anyway.
#if defined(POLYGEMM_MUSA_FLAVOR_MUSA)
#define PGM_GEMM_MIN_BLOCKS 2
#else
#define PGM_GEMM_MIN_BLOCKS 1
#endif

// kAVec: A's base is 16-byte aligned and lda % 8 == 0, so any 8-run of rows starting at a
// multiple of 8 may be fetched with one 16-byte async copy. Otherwise every A element is
// read with a scalar load (the scalar-copy path).
template <bool kAVec>
__global__ __launch_bounds__(NTHREADS, PGM_GEMM_MIN_BLOCKS) void gemm_f16_kernel(
    const half* __restrict__ A, long long lda, const half* __restrict__ BT, long long ldt,
    half* __restrict__ C, long long ldc, int c_vec, int M, int N, int K, float alpha,
    float beta, int grid_m, int grid_n) {
    __shared__ unsigned char smem_raw[SMEM_BYTES] __attribute__((aligned(128)));
    half* const sA = reinterpret_cast<half*>(smem_raw);   // [2][BK][LDA_S], K-major
    half* const sB = sA + 2 * A_BUF;                        // [2][BK][LDB_S], K-major
    float* const scratch = reinterpret_cast<float*>(smem_raw);  // write-back, after the loop

    const int tid = threadIdx.x;
    const int wave = tid / PGM_WAVE_THREADS;
    const int lane = tid % PGM_WAVE_THREADS;

    // CTA swizzle: super-columns of SWIZZLE_W tiles along N, walked down M.
    const int block_id = blockIdx.x;
    const int super_n = grid_n < SWIZZLE_W ? grid_n : SWIZZLE_W;
    const int per_super = grid_m * super_n;
    const int super_id = block_id / per_super;
    const int in_super = block_id - super_id * per_super;
    const int n_first = super_id * super_n;
    const int width = (grid_n - n_first) < super_n ? (grid_n - n_first) : super_n;
    const int tile_m = in_super / width;
    const int tile_n = n_first + in_super % width;
    const int am = tile_m * BM;
    const int bn = tile_n * BN;

    // 2x2 waves, each 64x64.
    const int warp_m = (wave / 2) * (NTILES_M * WM);
    const int warp_n = (wave % 2) * (NTILES_N * WN);

    // Loader mapping: thread -> one 8-run (16 bytes) of row ld_k of the K-major A and B tiles.
    const int ld_k = tid / 16;          // 0..31
    const int ld_x8 = (tid % 16) * 8;   // 0..120
    const int sA_off = ld_k * LDA_S + ld_x8;
    const int sB_off = ld_k * LDB_S + ld_x8;
    const int a_rows = M - (am + ld_x8);    // rows of this 8-run inside A (>= 8: all)
    const half* gA_ptr = A + (long long)ld_k * lda + am + ld_x8;
    const long long gA_step = (long long)BK * lda;
    const half* gB_ptr = BT + (long long)ld_k * ldt + bn + ld_x8;
    const long long gB_step = (long long)BK * ldt;

    const int nk = (K + BK - 1) / BK;

    // Issues the loads of K-tile kt into stage buf. Returns true when the A part was read
    // into `stage` (edge or scalar path) and must be stored to shared memory by the caller.
    auto issue_tile = [&](int buf, int kt, Half8& stage) -> bool {
        __pipeline_memcpy_async(&sB[buf * B_BUF + sB_off], gB_ptr, 16);
        const bool k_ok = kt * BK + ld_k < K;
        if (kAVec && k_ok && a_rows >= 8) {
            __pipeline_memcpy_async(&sA[buf * A_BUF + sA_off], gA_ptr, 16);
            return false;
        }
        stage.v = make_uint4(0u, 0u, 0u, 0u);
        if (k_ok) {
            const unsigned short* src = reinterpret_cast<const unsigned short*>(gA_ptr);
#pragma unroll
            for (int x = 0; x < 8; x++)
                if (x < a_rows) half8_set(stage, x, src[x]);
        }
        return true;
    };
    auto store_stage = [&](int buf, const Half8& stage) {
        *reinterpret_cast<uint4*>(&sA[buf * A_BUF + sA_off]) = stage.v;
    };

    pgm_wave_frag_acc acc[NTILES_M][NTILES_N];
#pragma unroll
    for (int i = 0; i < NTILES_M; i++)
#pragma unroll
        for (int j = 0; j < NTILES_N; j++) pgm_wave_frag_fill(acc[i][j], 0.0f);

    // Prologue: tile 0 -> stage 0.
    if (nk > 0) {
        Half8 stage;
        const bool staged = issue_tile(0, 0, stage);
        __pipeline_commit();
        if (staged) store_stage(0, stage);
        gA_ptr += gA_step;
        gB_ptr += gB_step;
        __pipeline_wait_prior(0);
        __syncthreads();
    }

    // Main loop: prefetch tile kt+1 into the other stage while computing tile kt.
    for (int kt = 0; kt < nk; kt++) {
        const int cur = kt & 1;
        Half8 stage;
        bool staged = false;
        if (kt + 1 < nk) {
            staged = issue_tile(cur ^ 1, kt + 1, stage);
            gA_ptr += gA_step;
            gB_ptr += gB_step;
        }
        __pipeline_commit();

        const half* a_base = sA + cur * A_BUF + warp_m;
        const half* b_base = sB + cur * B_BUF + warp_n;
#pragma unroll
        for (int kk = 0; kk < BK / WK; kk++) {
            pgm_wave_frag_a fA[NTILES_M];
            pgm_wave_frag_b fB[NTILES_N];
#pragma unroll
            for (int i = 0; i < NTILES_M; i++)
                pgm_wave_frag_load_a(fA[i], a_base + kk * WK * LDA_S + i * WM, LDA_S);
#pragma unroll
            for (int j = 0; j < NTILES_N; j++)
                pgm_wave_frag_load_b(fB[j], b_base + kk * WK * LDB_S + j * WN, LDB_S);
#pragma unroll
            for (int i = 0; i < NTILES_M; i++)
#pragma unroll
                for (int j = 0; j < NTILES_N; j++) pgm_wave_frag_mma(acc[i][j], fA[i], fB[j]);
        }

        if (staged) store_stage(cur ^ 1, stage);
        __pipeline_wait_prior(0);
        __syncthreads();
    }

    // Write-back through shared memory: each wave stores one 32x32 fragment col-major into its
    // own scratch slot, then every lane converts 8 consecutive rows of one column and writes
    // them with one 16-byte store where legal.
    float* const my_scratch = scratch + wave * (WM * WN);
    const int out_col = lane / 4;              // 0..31
    const int out_row = (lane % 4) * 8;        // 0, 8, 16, 24
#pragma unroll
    for (int i = 0; i < NTILES_M; i++) {
#pragma unroll
        for (int j = 0; j < NTILES_N; j++) {
            if (i | j) __syncthreads();        // previous fragment fully read (loop ended with one)
            pgm_wave_frag_store_acc(my_scratch, acc[i][j], WM);
            __syncthreads();                   // scratch visible to the whole wave

            const int gr = am + warp_m + i * WM + out_row;
            const int gc = bn + warp_n + j * WN + out_col;
            if (gr >= M || gc >= N) continue;
            const float4* src4 = reinterpret_cast<const float4*>(&my_scratch[out_col * WM + out_row]);
            const float4 f0 = src4[0];
            const float4 f1 = src4[1];
            float v[8] = {f0.x, f0.y, f0.z, f0.w, f1.x, f1.y, f1.z, f1.w};
            half* cp = C + (long long)gc * ldc + gr;
            const int rows = (M - gr) < 8 ? (M - gr) : 8;
            if (c_vec && rows == 8) {
                if (beta != 0.0f) {
                    Half8 old;
                    old.v = *reinterpret_cast<const uint4*>(cp);
#pragma unroll
                    for (int x = 0; x < 8; x++)
                        v[x] = alpha * v[x] + beta * __half2float(bits_half(half8_get(old, x)));
                } else {
#pragma unroll
                    for (int x = 0; x < 8; x++) v[x] = alpha * v[x];
                }
                Half8 out;
                out.v = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
                for (int x = 0; x < 8; x++) half8_set(out, x, half_bits(__float2half(v[x])));
                *reinterpret_cast<uint4*>(cp) = out.v;   // one 16-byte store
            } else {
#pragma unroll
                for (int x = 0; x < 8; x++) {
                    if (x < rows) {
                        float r = alpha * v[x];
                        if (beta != 0.0f) r += beta * __half2float(cp[x]);
                        cp[x] = __float2half(r);
                    }
                }
            }
        }
    }
}

}  // namespace dev

// ---- launchers ----------------------------------------------------------------------------------
musaError_t configure_kernels() {
    musaError_t e = musaFuncSetSharedMemConfig((const void*)dev::gemm_f16_kernel<true>,
                                               musaSharedMemBankSizeEightByte);
    if (e != musaSuccess) return e;
    return musaFuncSetSharedMemConfig((const void*)dev::gemm_f16_kernel<false>,
                                      musaSharedMemBankSizeEightByte);
}

musaError_t launch_transpose_b(const void* B, long long ldb, int k, int n, void* BT, int kp,
                               int np, musaStream_t stream) {
    if (kp == 0 || np == 0) return musaSuccess;
    const int tiles_n = (np + 31) / 32;
    dim3 block(32, 8);
    dim3 grid((unsigned)((kp + 31) / 32), (unsigned)(tiles_n < 65535 ? tiles_n : 65535));
    dev::transpose_b_kernel<<<grid, block, 0, stream>>>(
        static_cast<const unsigned short*>(B), ldb, k, n, static_cast<unsigned short*>(BT), kp, np);
    return musaGetLastError();
}

musaError_t launch_gemm_f16(int m, int n, int k, float alpha, const void* A, long long lda,
                            const void* BT, long long np, float beta, void* C, long long ldc,
                            musaStream_t stream) {
    if (m == 0 || n == 0) return musaSuccess;
    const int grid_m = (m + dev::BM - 1) / dev::BM;
    const int grid_n = (n + dev::BN - 1) / dev::BN;
    const long long blocks = (long long)grid_m * grid_n;   // <= INT_MAX, checked by the caller
    const bool a_vec = reinterpret_cast<uintptr_t>(A) % 16 == 0 && lda % 8 == 0;
    const int c_vec = (reinterpret_cast<uintptr_t>(C) % 16 == 0 && ldc % 8 == 0) ? 1 : 0;
    const half* a = static_cast<const half*>(A);
    const half* bt = static_cast<const half*>(BT);
    half* c = static_cast<half*>(C);
    dim3 grid((unsigned)blocks);
    dim3 block(dev::NTHREADS);
    if (a_vec)
        dev::gemm_f16_kernel<true><<<grid, block, 0, stream>>>(a, lda, bt, np, c, ldc, c_vec, m, n,
                                                                 k, alpha, beta, grid_m, grid_n);
    else
        dev::gemm_f16_kernel<false><<<grid, block, 0, stream>>>(a, lda, bt, np, c, ldc, c_vec, m,
                                                                  n, k, alpha, beta, grid_m, grid_n);
    return musaGetLastError();
}

}  // namespace pgm
