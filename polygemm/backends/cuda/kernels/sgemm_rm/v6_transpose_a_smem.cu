// Rung v6 (row-major ladder): adds a transposed A tile in shared memory over v5. The
// float4 loaded from a row of A (4 consecutive k) is scattered into As[k][m], so a
// thread's 8 A values for one k become contiguous and are fetched with two float4 reads,
// like B's: 4 shared-memory loads per k instead of 10.
// Realizes 002 sgemm_v6_transpose_A_smem.
// Padded: M, N multiples of 128, K a multiple of 8; A, B, C 16-byte aligned and lda, ldb,
// ldc multiples of 4.
//
// Launch: blockDim (256, 1); gridDim.x tiles N, gridDim.y tiles M.
// Threadblock tile 128 x 128 x 8, thread tile 8 x 8 (threads arranged 16 x 16 over C).

namespace {

constexpr int kThreadblockM = 128;
constexpr int kThreadblockN = 128;
constexpr int kThreadblockK = 8;
constexpr int kThreadTileM = 8;
constexpr int kThreadTileN = 8;
constexpr int kThreadsN = kThreadblockN / kThreadTileN;  // 16
constexpr int kThreadsM = kThreadblockM / kThreadTileM;  // 16
constexpr int kThreads = kThreadsM * kThreadsN;          // 256
// Load mappings: one float4 of each operand tile per thread.
constexpr int kAVecPerRow = kThreadblockK / 4;  // float4s per row of the 128 x 8 A tile (2)
constexpr int kBVecPerRow = kThreadblockN / 4;  // float4s per row of the 8 x 128 B tile (32)
static_assert(kThreadblockM * kThreadblockK / 4 == kThreads, "one A float4 per thread");
static_assert(kThreadblockK * kThreadblockN / 4 == kThreads, "one B float4 per thread");
static_assert(kThreadTileM % 4 == 0 && kThreadTileN % 4 == 0, "fragments are read as float4s");

__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }

// Epilogue for 4 consecutive elements: c = alpha * acc + beta * c, C not read if beta == 0.
__device__ __forceinline__ void epilogue4(float* c, const float* acc, float alpha, float beta) {
    float4 out = make_float4(alpha * acc[0], alpha * acc[1], alpha * acc[2], alpha * acc[3]);
    if (beta != 0.f) {
        const float4 old = load4(c);
        out.x = fmaf(beta, old.x, out.x);
        out.y = fmaf(beta, old.y, out.y);
        out.z = fmaf(beta, old.z, out.z);
        out.w = fmaf(beta, old.w, out.w);
    }
    store4(c, out);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 2)
sgemm_rm_v6_transpose_a_smem(int M, int N, int K, float alpha,
                             const float* __restrict__ A, int lda,
                             const float* __restrict__ B, int ldb,
                             float beta, float* __restrict__ C, int ldc)
{
    __shared__ __align__(16) float As[kThreadblockK][kThreadblockM];  // As[k][m]: A transposed
    __shared__ __align__(16) float Bs[kThreadblockK][kThreadblockN];  // Bs[k][n]

    const int tid = threadIdx.x;
    const int a_r = tid / kAVecPerRow;         // A tile row (m)
    const int a_c = (tid % kAVecPerRow) * 4;   // A tile float4 column (k)
    const int b_r = tid / kBVecPerRow;         // B tile row (k)
    const int b_c = (tid % kBVecPerRow) * 4;   // B tile float4 column (n)
    const int ct_m = (tid / kThreadsN) * kThreadTileM;  // thread tile origin in the tile
    const int ct_n = (tid % kThreadsN) * kThreadTileN;

    const int m0 = blockIdx.y * kThreadblockM;
    const int n0 = blockIdx.x * kThreadblockN;
    const float* A_tile = A + m0 * lda;
    const float* B_tile = B + n0;

    float acc[kThreadTileM][kThreadTileN] = {};
    float a_frag[kThreadTileM];
    float b_frag[kThreadTileN];

    for (int k0 = 0; k0 < K; k0 += kThreadblockK) {
        {   // Transpose on the way in: 4 consecutive k of row a_r go to 4 rows of As.
            const float4 v = load4(A_tile + a_r * lda + k0 + a_c);
            As[a_c + 0][a_r] = v.x;
            As[a_c + 1][a_r] = v.y;
            As[a_c + 2][a_r] = v.z;
            As[a_c + 3][a_r] = v.w;
        }
        store4(&Bs[b_r][b_c], load4(B_tile + (k0 + b_r) * ldb + b_c));
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kThreadblockK; ++k) {
#pragma unroll
            for (int i = 0; i < kThreadTileM; i += 4) {                          // 2 float4 reads
                const float4 v = load4(&As[k][ct_m + i]);
                a_frag[i + 0] = v.x; a_frag[i + 1] = v.y; a_frag[i + 2] = v.z; a_frag[i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < kThreadTileN; j += 4) {                          // 2 float4 reads
                const float4 v = load4(&Bs[k][ct_n + j]);
                b_frag[j + 0] = v.x; b_frag[j + 1] = v.y; b_frag[j + 2] = v.z; b_frag[j + 3] = v.w;
            }
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
        for (int j = 0; j < kThreadTileN; j += 4) epilogue4(c + j, &acc[i][j], alpha, beta);
    }
}
