// Rung v3 (row-major ladder): adds float4 (128-bit) global accesses over v2. A thread now
// owns 4 *consecutive* columns of one row of C (thread tile 1 x 4) and moves its share of
// each operand tile with a single float4 load and store instead of 4 scalar ones.
// (Each A value in shared memory is still read once per output column: v4 fixes that.)
// Realizes 002 sgemm_v3_float4.
// Padded: M, N, K multiples of 32; A, B, C 16-byte aligned and lda, ldb, ldc multiples of 4.
//
// Launch: blockDim (8, 32) = (kThreadblockN / kThreadTileN, kThreadblockM); gridDim.x tiles
// N, gridDim.y tiles M. Threadblock tile 32 x 32 x 32, thread tile 1 x 4.

namespace {

constexpr int kThreadblockM = 32;
constexpr int kThreadblockN = 32;
constexpr int kThreadblockK = 32;
constexpr int kThreadTileN = 4;                            // one float4 of C per thread
constexpr int kThreadsN = kThreadblockN / kThreadTileN;    // blockDim.x = 8
constexpr int kThreadsM = kThreadblockM;                   // blockDim.y = 32
constexpr int kThreads = kThreadsN * kThreadsM;
// One float4 per thread covers each operand tile exactly because the tile is square.
static_assert(kThreadblockK == kThreadblockM && kThreadblockK == kThreadblockN,
              "v3 loads row ty / float4 column tx of both tiles");

__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
sgemm_rm_v3_float4(int M, int N, int K, float alpha,
                   const float* __restrict__ A, int lda,
                   const float* __restrict__ B, int ldb,
                   float beta, float* __restrict__ C, int ldc)
{
    __shared__ __align__(16) float As[kThreadblockM][kThreadblockK];  // As[m][k]
    __shared__ __align__(16) float Bs[kThreadblockK][kThreadblockN];  // Bs[k][n]

    const int ty = threadIdx.y;                  // row of the tiles
    const int tn = threadIdx.x * kThreadTileN;   // first of this thread's 4 columns
    const int m0 = blockIdx.y * kThreadblockM;
    const int n0 = blockIdx.x * kThreadblockN;

    float acc[kThreadTileN] = {};

    for (int k0 = 0; k0 < K; k0 += kThreadblockK) {
        store4(&As[ty][tn], load4(A + (m0 + ty) * lda + k0 + tn));
        store4(&Bs[ty][tn], load4(B + (k0 + ty) * ldb + n0 + tn));
        __syncthreads();
#pragma unroll
        for (int j = 0; j < kThreadTileN; ++j) {
#pragma unroll
            for (int k = 0; k < kThreadblockK; ++k)
                acc[j] = fmaf(As[ty][k], Bs[k][tn + j], acc[j]);
        }
        __syncthreads();
    }

    float* c = C + (m0 + ty) * ldc + n0 + tn;
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
