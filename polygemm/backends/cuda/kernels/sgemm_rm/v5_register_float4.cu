// Rung v5 (row-major ladder): adds float4 shared-memory -> register loads and a larger
// thread tile over v4. Each thread now computes an 8 x 8 thread tile (64 accumulators):
// per k it fetches its 8 B values as two float4 reads of a shared-memory row and its 8 A
// values as scalars (A is stored [m][k], so they sit in 8 different rows: v6 fixes that).
// The threadblock tile grows to 128 x 128 x 8, shaped for sm_80/sm_90.
// Realizes 002 sgemm_v5_reg_float4.
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
static_assert(kThreadTileN % 4 == 0, "B fragment is read as float4s");

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
sgemm_rm_v5_register_float4(int M, int N, int K, float alpha,
                            const float* __restrict__ A, int lda,
                            const float* __restrict__ B, int ldb,
                            float beta, float* __restrict__ C, int ldc)
{
    __shared__ __align__(16) float As[kThreadblockM][kThreadblockK];  // As[m][k]
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
        store4(&As[a_r][a_c], load4(A_tile + a_r * lda + k0 + a_c));
        store4(&Bs[b_r][b_c], load4(B_tile + (k0 + b_r) * ldb + b_c));
        __syncthreads();
        // Partial unroll: fully unrolled, ptxas runs the scalar A reads too far ahead and
        // spills on sm_90 under the 128-register cap of __launch_bounds__(256, 2).
#pragma unroll 2
        for (int k = 0; k < kThreadblockK; ++k) {
#pragma unroll
            for (int i = 0; i < kThreadTileM; ++i) a_frag[i] = As[ct_m + i][k];  // 8 scalar reads
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
