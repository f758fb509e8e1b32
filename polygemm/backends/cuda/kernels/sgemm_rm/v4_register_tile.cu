// Rung v4 (row-major ladder): adds a register tile over v3. Each thread computes a
// kThreadTileM x kThreadTileN (2 x 2) thread tile as an outer product: per k it copies 2
// values of A and 2 of B from shared memory into registers and does 4 FMAs, so no shared
// value is re-read for each output. Thread indices are derived from the flat thread id,
// independent of the launch shape, with one mapping for loading tiles and another for
// computing C. Realizes 002 sgemm_v4_reg.
// Padded: M, N, K multiples of 32; A, B, C 16-byte aligned and lda, ldb, ldc multiples of 4.
//
// Launch: blockDim (256, 1); gridDim.x tiles N, gridDim.y tiles M.
// Threadblock tile 32 x 32 x 32, thread tile 2 x 2 (threads arranged 16 x 16 over C).

namespace {

constexpr int kThreadblockM = 32;
constexpr int kThreadblockN = 32;
constexpr int kThreadblockK = 32;
constexpr int kThreadTileM = 2;
constexpr int kThreadTileN = 2;
constexpr int kThreadsN = kThreadblockN / kThreadTileN;  // 16 compute threads across N
constexpr int kThreadsM = kThreadblockM / kThreadTileM;  // 16 compute threads down M
constexpr int kThreads = kThreadsM * kThreadsN;          // 256
// Loading: one float4 of each operand tile per thread.
constexpr int kVecPerRow = kThreadblockK / 4;            // float4s per A tile row (8)
static_assert(kThreadblockM * kThreadblockK / 4 == kThreads, "one A float4 per thread");
static_assert(kThreadblockK * kThreadblockN / 4 == kThreads, "one B float4 per thread");
static_assert(kThreadblockN == kThreadblockK, "A and B tiles share the load mapping");

__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
sgemm_rm_v4_register_tile(int M, int N, int K, float alpha,
                          const float* __restrict__ A, int lda,
                          const float* __restrict__ B, int ldb,
                          float beta, float* __restrict__ C, int ldc)
{
    __shared__ __align__(16) float As[kThreadblockM][kThreadblockK];  // As[m][k]
    __shared__ __align__(16) float Bs[kThreadblockK][kThreadblockN];  // Bs[k][n]

    const int tid = threadIdx.x;
    // Load mapping: row ld_r, float4 column ld_c of each 32 x 32 tile.
    const int ld_r = tid / kVecPerRow;
    const int ld_c = (tid % kVecPerRow) * 4;
    // Compute mapping: this thread's 2 x 2 thread tile starts at (ct_m, ct_n) of the tile.
    const int ct_m = (tid / kThreadsN) * kThreadTileM;
    const int ct_n = (tid % kThreadsN) * kThreadTileN;

    const int m0 = blockIdx.y * kThreadblockM;
    const int n0 = blockIdx.x * kThreadblockN;
    const float* A_tile = A + m0 * lda;
    const float* B_tile = B + n0;

    float acc[kThreadTileM][kThreadTileN] = {};
    float a_frag[kThreadTileM];
    float b_frag[kThreadTileN];

    for (int k0 = 0; k0 < K; k0 += kThreadblockK) {
        store4(&As[ld_r][ld_c], load4(A_tile + ld_r * lda + k0 + ld_c));
        store4(&Bs[ld_r][ld_c], load4(B_tile + (k0 + ld_r) * ldb + ld_c));
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kThreadblockK; ++k) {
#pragma unroll
            for (int i = 0; i < kThreadTileM; ++i) a_frag[i] = As[ct_m + i][k];
#pragma unroll
            for (int j = 0; j < kThreadTileN; ++j) b_frag[j] = Bs[k][ct_n + j];
#pragma unroll
            for (int i = 0; i < kThreadTileM; ++i) {
#pragma unroll
                for (int j = 0; j < kThreadTileN; ++j)
                    acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
            }
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < kThreadTileM; ++i) {
        float* c = C + (m0 + ct_m + i) * ldc + n0 + ct_n;
#pragma unroll
        for (int j = 0; j < kThreadTileN; ++j)
            c[j] = (beta == 0.f) ? alpha * acc[i][j] : fmaf(beta, c[j], alpha * acc[i][j]);
    }
}
