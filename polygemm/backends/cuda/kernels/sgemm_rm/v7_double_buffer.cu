// Rung v7 (row-major ladder): adds double buffering over v6. Shared memory holds two
// stages of the A and B threadblock tiles; while the threadblock computes on one stage,
// each thread's global loads for the next K step are already in flight (staged in
// registers) and are written to the other stage afterwards, so global latency hides behind
// the FMAs and one __syncthreads per K step suffices. The seed writes the first "ping"
// and last "pong" by hand; here the prologue loads stage 0 and the main loop simply skips
// the prefetch on its last step.
// Realizes 002 sgemm_v7_double_buffer.
//
// Beyond the seed, as the ladder's last rung:
// * Predicated: any M, N, K >= 1. Loads outside the matrix fill shared memory with zeros;
//   the epilogue guards every store. Honours PG_TRANS_A / PG_TRANS_B (op(A) / op(B)
//   stored transposed) and PG_VEC (1: float4 global accesses along the contiguous
//   dimension where the 4 elements are inside the matrix, scalar at the edges; 0: scalar
//   global accesses only).
// * The 8 x 8 thread tile is a 2 x 2 grid of 4 x 4 fragments set half a threadblock tile
//   apart, so a warp's float4 shared-memory reads are contiguous (conflict-free); the
//   shared tiles get kSmemPad floats of row padding so transposing stores do not conflict.
//
// Launch: blockDim (256, 1); gridDim.x tiles N, gridDim.y tiles M.
// Threadblock tile 128 x 128 x 8, thread tile 8 x 8 (threads arranged 16 x 16 over C).

#ifndef PG_TRANS_A
#define PG_TRANS_A 0
#endif
#ifndef PG_TRANS_B
#define PG_TRANS_B 0
#endif
#ifndef PG_VEC
#define PG_VEC 1
#endif

namespace {

constexpr int kThreadblockM = 128;
constexpr int kThreadblockN = 128;
constexpr int kThreadblockK = 8;
constexpr int kThreadTileM = 8;
constexpr int kThreadTileN = 8;
constexpr int kFragment = 4;                              // thread tile = 2 x 2 fragments of 4 x 4
constexpr int kThreadsN = kThreadblockN / kThreadTileN;   // 16
constexpr int kThreadsM = kThreadblockM / kThreadTileM;   // 16
constexpr int kThreads = kThreadsM * kThreadsN;           // 256
constexpr int kFragStrideM = kThreadblockM / 2;           // distance between the fragment rows
constexpr int kFragStrideN = kThreadblockN / 2;           // ... and fragment columns
constexpr int kSmemPad = 4;                               // keeps rows 16-byte aligned
constexpr int kSmemPitchM = kThreadblockM + kSmemPad;     // row pitch of As[k][m]
constexpr int kSmemPitchN = kThreadblockN + kSmemPad;     // row pitch of Bs[k][n]
constexpr int kStages = 2;

static_assert(kThreadblockM * kThreadblockK / 4 == kThreads, "one A vector (4 floats) per thread");
static_assert(kThreadblockK * kThreadblockN / 4 == kThreads, "one B vector (4 floats) per thread");
static_assert(kThreadTileM == 2 * kFragment && kThreadTileN == 2 * kFragment, "2 x 2 fragments");
static_assert(kFragStrideM == kThreadsM * kFragment && kFragStrideN == kThreadsN * kFragment,
              "fragments of all threads tile the threadblock tile");

// Reads 4 consecutive elements p[r*ld + c .. c+3] of a rows x cols row-major array,
// zero outside it. The row offset is formed only for rows inside the array.
__device__ __forceinline__ void load_vec(float (&v)[4], const float* __restrict__ p, int ld,
                                         int r, int rows, int c, int cols)
{
    v[0] = v[1] = v[2] = v[3] = 0.f;
    if (r >= rows) return;
    const float* row = p + r * ld;
#if PG_VEC
    if (c + 3 < cols) {  // aligned: PG_VEC promises base % 16 B == 0 and ld % 4 == 0; c % 4 == 0
        const float4 t = *reinterpret_cast<const float4*>(row + c);
        v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
        return;
    }
#endif
#pragma unroll
    for (int j = 0; j < 4; ++j)
        if (c + j < cols) v[j] = row[c + j];
}

// Global -> registers: this thread's vector of the A tile at (m0, k0).
__device__ __forceinline__ void load_a(float (&v)[4], const float* __restrict__ A, int lda,
                                       int M, int K, int m0, int k0, int tid)
{
#if PG_TRANS_A
    // A stored K x M (element (i, k) at A[k*lda + i]): the vector runs along m.
    load_vec(v, A, lda, k0 + tid / (kThreadblockM / 4), K, m0 + (tid % (kThreadblockM / 4)) * 4, M);
#else
    // A stored M x K (element (i, k) at A[i*lda + k]): the vector runs along k.
    load_vec(v, A, lda, m0 + tid / (kThreadblockK / 4), M, k0 + (tid % (kThreadblockK / 4)) * 4, K);
#endif
}

// Registers -> shared: As[k][m] (A transposed, as in v6).
__device__ __forceinline__ void store_a(float (*As)[kSmemPitchM], const float (&v)[4], int tid)
{
#if PG_TRANS_A
    const int k = tid / (kThreadblockM / 4);
    const int m = (tid % (kThreadblockM / 4)) * 4;
    *reinterpret_cast<float4*>(&As[k][m]) = make_float4(v[0], v[1], v[2], v[3]);
#else
    const int m = tid / (kThreadblockK / 4);
    const int k = (tid % (kThreadblockK / 4)) * 4;
#pragma unroll
    for (int j = 0; j < 4; ++j) As[k + j][m] = v[j];
#endif
}

// Global -> registers: this thread's vector of the B tile at (k0, n0).
__device__ __forceinline__ void load_b(float (&v)[4], const float* __restrict__ B, int ldb,
                                       int N, int K, int k0, int n0, int tid)
{
#if PG_TRANS_B
    // B stored N x K (element (k, j) at B[j*ldb + k]): the vector runs along k.
    load_vec(v, B, ldb, n0 + tid / (kThreadblockK / 4), N, k0 + (tid % (kThreadblockK / 4)) * 4, K);
#else
    // B stored K x N (element (k, j) at B[k*ldb + j]): the vector runs along n.
    load_vec(v, B, ldb, k0 + tid / (kThreadblockN / 4), K, n0 + (tid % (kThreadblockN / 4)) * 4, N);
#endif
}

// Registers -> shared: Bs[k][n].
__device__ __forceinline__ void store_b(float (*Bs)[kSmemPitchN], const float (&v)[4], int tid)
{
#if PG_TRANS_B
    const int n = tid / (kThreadblockK / 4);
    const int k = (tid % (kThreadblockK / 4)) * 4;
#pragma unroll
    for (int j = 0; j < 4; ++j) Bs[k + j][n] = v[j];
#else
    const int k = tid / (kThreadblockN / 4);
    const int n = (tid % (kThreadblockN / 4)) * 4;
    *reinterpret_cast<float4*>(&Bs[k][n]) = make_float4(v[0], v[1], v[2], v[3]);
#endif
}

// Epilogue for the 4 consecutive columns col..col+3 of one row of C (the row is inside C):
// c = alpha * acc + beta * c; C is not read when beta == 0.
__device__ __forceinline__ void store_c(float* __restrict__ c_row, int col, int N,
                                        const float* acc, float alpha, float beta)
{
#if PG_VEC
    if (col + 3 < N) {
        float4* p = reinterpret_cast<float4*>(c_row + col);
        float4 out = make_float4(alpha * acc[0], alpha * acc[1], alpha * acc[2], alpha * acc[3]);
        if (beta != 0.f) {
            const float4 old = *p;
            out.x = fmaf(beta, old.x, out.x);
            out.y = fmaf(beta, old.y, out.y);
            out.z = fmaf(beta, old.z, out.z);
            out.w = fmaf(beta, old.w, out.w);
        }
        *p = out;
        return;
    }
#endif
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        if (col + j < N) {
            float* p = c_row + col + j;
            *p = (beta == 0.f) ? alpha * acc[j] : fmaf(beta, *p, alpha * acc[j]);
        }
    }
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 2)
sgemm_rm_v7_double_buffer(int M, int N, int K, float alpha,
                          const float* __restrict__ A, int lda,
                          const float* __restrict__ B, int ldb,
                          float beta, float* __restrict__ C, int ldc)
{
    __shared__ __align__(16) float As[kStages][kThreadblockK][kSmemPitchM];  // As[s][k][m]
    __shared__ __align__(16) float Bs[kStages][kThreadblockK][kSmemPitchN];  // Bs[s][k][n]

    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * kThreadblockM;
    const int n0 = blockIdx.x * kThreadblockN;
    // Fragment origins of this thread's thread tile inside the threadblock tile:
    // rows ct_m + {0, kFragStrideM} + 0..3, columns ct_n + {0, kFragStrideN} + 0..3.
    const int ct_m = (tid / kThreadsN) * kFragment;
    const int ct_n = (tid % kThreadsN) * kFragment;

    float acc[kThreadTileM][kThreadTileN] = {};
    float a_stage[4], b_stage[4];  // next K step's tile vectors, in flight during compute

    // Prologue ("ping"): stage 0 holds K step 0.
    load_a(a_stage, A, lda, M, K, m0, 0, tid);
    load_b(b_stage, B, ldb, N, K, 0, n0, tid);
    store_a(As[0], a_stage, tid);
    store_b(Bs[0], b_stage, tid);
    __syncthreads();

    int stage = 0;
    for (int k0 = 0; k0 < K; k0 += kThreadblockK) {
        const bool has_next = k0 + kThreadblockK < K;  // uniform across the threadblock
        if (has_next) {  // issue next step's global loads; consumed only after the FMAs
            load_a(a_stage, A, lda, M, K, m0, k0 + kThreadblockK, tid);
            load_b(b_stage, B, ldb, N, K, k0 + kThreadblockK, n0, tid);
        }

#pragma unroll
        for (int k = 0; k < kThreadblockK; ++k) {
            float a_frag[kThreadTileM], b_frag[kThreadTileN];
#pragma unroll
            for (int f = 0; f < 2; ++f) {
                const float4 a =
                    *reinterpret_cast<const float4*>(&As[stage][k][ct_m + f * kFragStrideM]);
                const float4 b =
                    *reinterpret_cast<const float4*>(&Bs[stage][k][ct_n + f * kFragStrideN]);
                float* af = &a_frag[f * kFragment];
                float* bf = &b_frag[f * kFragment];
                af[0] = a.x; af[1] = a.y; af[2] = a.z; af[3] = a.w;
                bf[0] = b.x; bf[1] = b.y; bf[2] = b.z; bf[3] = b.w;
            }
#pragma unroll
            for (int i = 0; i < kThreadTileM; ++i) {
#pragma unroll
                for (int j = 0; j < kThreadTileN; ++j)
                    acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
            }
        }

        if (has_next) {  // "pong": fill the other stage (last read before the previous barrier)
            store_a(As[stage ^ 1], a_stage, tid);
            store_b(Bs[stage ^ 1], b_stage, tid);
        }
        __syncthreads();
        stage ^= 1;
    }

    // Epilogue: acc[fm*4 + i][fn*4 + j] is C(m0 + ct_m + fm*kFragStrideM + i,
    //                                        n0 + ct_n + fn*kFragStrideN + j).
#pragma unroll
    for (int fm = 0; fm < 2; ++fm) {
#pragma unroll
        for (int i = 0; i < kFragment; ++i) {
            const int row = m0 + ct_m + fm * kFragStrideM + i;
            if (row >= M) continue;
            float* c_row = C + row * ldc;
#pragma unroll
            for (int fn = 0; fn < 2; ++fn)
                store_c(c_row, n0 + ct_n + fn * kFragStrideN, N,
                        &acc[fm * kFragment + i][fn * kFragment], alpha, beta);
        }
    }
}
