// Rung v1 (row-major ladder): adds shared memory over v0. The threadblock stages a
// kTile x kTile tile of A and of B in shared memory per K step, so each global element is
// read once per threadblock instead of once per thread; every thread still computes one
// element of C. Realizes 002 sgemm_v1_shared_mem.
// Padded: M, N, K are multiples of kTile (32); operands in row-major ladder layout.
//
// Launch: blockDim (32, 32); gridDim.x tiles N, gridDim.y tiles M.
// Threadblock tile 32 x 32 x 32 (M x N x K), thread tile 1 x 1.

namespace {

constexpr int kTile = 32;  // threadblock tile: kTile x kTile of C, K step kTile
constexpr int kThreads = kTile * kTile;

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
sgemm_rm_v1_shared_mem(int M, int N, int K, float alpha,
                       const float* __restrict__ A, int lda,
                       const float* __restrict__ B, int ldb,
                       float beta, float* __restrict__ C, int ldc)
{
    __shared__ float As[kTile][kTile];  // As[m][k]: A threadblock tile
    __shared__ float Bs[kTile][kTile];  // Bs[k][n]: B threadblock tile

    const int tx = threadIdx.x;  // column inside the tile (n for B and C, k for A)
    const int ty = threadIdx.y;  // row inside the tile (m for A and C, k for B)
    const int m0 = blockIdx.y * kTile;
    const int n0 = blockIdx.x * kTile;

    // This thread's element of the A tile (row m0+ty) and of the B tile (column n0+tx).
    const float* a = A + (m0 + ty) * lda + tx;
    const float* b = B + ty * ldb + n0 + tx;

    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += kTile) {
        As[ty][tx] = a[k0];        // a warp reads 32 consecutive floats of one A row
        Bs[ty][tx] = b[k0 * ldb];  // ... and of one B row
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kTile; ++k)
            acc = fmaf(As[ty][k], Bs[k][tx], acc);  // As: broadcast, Bs: conflict-free
        __syncthreads();  // the tile is overwritten next iteration
    }

    float* c = C + (m0 + ty) * ldc + n0 + tx;
    *c = (beta == 0.f) ? alpha * acc : fmaf(beta, *c, alpha * acc);
}
