// Rung v2 (row-major ladder): adds more work per thread over v1. Each thread computes a
// kStride x kStride thread tile of C (and loads kStride x kStride elements of each operand
// tile), so a quarter as many threads cover the same threadblock tile and every shared
// memory value loaded into a register feeds more than one FMA.
// Realizes 002 sgemm_v2_increase_workload_of_threads.
// Padded: M, N, K are multiples of the tile (32); operands in row-major ladder layout.
//
// Launch: blockDim (16, 16); gridDim.x tiles N, gridDim.y tiles M.
// Threadblock tile 32 x 32 x 32, thread tile 2 x 2 whose elements are strided by
// kThreadsPerSide (16) rows / columns (so a warp still touches consecutive columns).

namespace {

constexpr int kThreadsPerSide = 16;                  // blockDim.x == blockDim.y
constexpr int kStride = 2;                           // thread tile is kStride x kStride
constexpr int kBM = kThreadsPerSide * kStride;       // threadblock tile BM x BN x BK, square
constexpr int kBN = kBM;
constexpr int kBK = kBM;
constexpr int kThreads = kThreadsPerSide * kThreadsPerSide;

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
sgemm_rm_v2_thread_workload(int M, int N, int K, float alpha,
                            const float* __restrict__ A, int lda,
                            const float* __restrict__ B, int ldb,
                            float beta, float* __restrict__ C, int ldc)
{
    __shared__ float As[kBM][kBK];  // As[m][k]
    __shared__ float Bs[kBK][kBN];  // Bs[k][n]

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int m0 = blockIdx.y * kBM;
    const int n0 = blockIdx.x * kBN;

    const float* A_tile = A + m0 * lda;  // rows m0.. of A
    const float* B_tile = B + n0;        // columns n0.. of B

    float acc[kStride][kStride] = {};

    for (int k0 = 0; k0 < K; k0 += kBK) {
        // Each thread loads the kStride x kStride elements (ty + ii*16, tx + jj*16) of both tiles.
#pragma unroll
        for (int ii = 0; ii < kStride; ++ii) {
#pragma unroll
            for (int jj = 0; jj < kStride; ++jj) {
                const int r = ii * kThreadsPerSide + ty;
                const int c = jj * kThreadsPerSide + tx;
                As[r][c] = A_tile[r * lda + k0 + c];
                Bs[r][c] = B_tile[(k0 + r) * ldb + c];
            }
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kBK; ++k) {
#pragma unroll
            for (int ii = 0; ii < kStride; ++ii) {
#pragma unroll
                for (int jj = 0; jj < kStride; ++jj)
                    acc[ii][jj] = fmaf(As[ii * kThreadsPerSide + ty][k],
                                       Bs[k][jj * kThreadsPerSide + tx], acc[ii][jj]);
            }
        }
        __syncthreads();
    }

#pragma unroll
    for (int ii = 0; ii < kStride; ++ii) {
#pragma unroll
        for (int jj = 0; jj < kStride; ++jj) {
            float* c = C + (m0 + ii * kThreadsPerSide + ty) * ldc + n0 + jj * kThreadsPerSide + tx;
            *c = (beta == 0.f) ? alpha * acc[ii][jj] : fmaf(beta, *c, alpha * acc[ii][jj]);
        }
    }
}
