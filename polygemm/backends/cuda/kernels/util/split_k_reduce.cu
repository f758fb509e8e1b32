// Utility kernel of the CUDA backend (not a ladder rung): the reduction of a split-K product.
//
//   D(i, j) = alpha * sum_{s = 0 .. splits-1} W_s(i, j)  +  beta * D(i, j)
//
// W holds the fp32 partial products of the `splits` K-slices (one compact matrix each, in the
// rung's layout, `w_split` elements apart), written by the rung's PG_BATCH build with alpha = 1,
// beta = 0. D is the caller's destination (already holding c's values when beta != 0, as the
// launch contract says); beta == 0 never reads it. The sum runs over s in order, in fp32, for
// every element: the same bits on every run (no atomics), which is why split-K here is
// deterministic. One thread per element, threads along W's contiguous dimension (coalesced);
// 64-bit indexing, so any destination the planner accepts fits.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

template <typename T>
__device__ __forceinline__ T pg_from_float(float v);
template <>
__device__ __forceinline__ float pg_from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half pg_from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 pg_from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T>
__device__ __forceinline__ void split_k_reduce(long long rows, long long cols, int splits,
                                               const float* __restrict__ W, long long w_rs,
                                               long long w_cs, long long w_split, float alpha,
                                               float beta, T* __restrict__ D, long long d_rs,
                                               long long d_cs) {
    const bool along_cols = w_cs == 1;
    const long long inner = along_cols ? cols : rows;
    const long long total = rows * cols;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const long long o = t / inner, in = t % inner;
        const long long i = along_cols ? o : in, j = along_cols ? in : o;
        const float* w = W + i * w_rs + j * w_cs;
        float acc = 0.f;
        for (int s = 0; s < splits; ++s) acc += __ldcs(w + s * w_split);  // read once: stream
        T* d = D + i * d_rs + j * d_cs;
        float v = alpha * acc;
        if (beta != 0.f) v += beta * static_cast<float>(*d);
        *d = pg_from_float<T>(v);
    }
}

extern "C" __global__ void __launch_bounds__(256)
pg_split_k_reduce_f32(long long rows, long long cols, int splits, const float* W, long long w_rs,
                      long long w_cs, long long w_split, float alpha, float beta, float* D,
                      long long d_rs, long long d_cs) {
    split_k_reduce<float>(rows, cols, splits, W, w_rs, w_cs, w_split, alpha, beta, D, d_rs, d_cs);
}

extern "C" __global__ void __launch_bounds__(256)
pg_split_k_reduce_f16(long long rows, long long cols, int splits, const float* W, long long w_rs,
                      long long w_cs, long long w_split, float alpha, float beta, __half* D,
                      long long d_rs, long long d_cs) {
    split_k_reduce<__half>(rows, cols, splits, W, w_rs, w_cs, w_split, alpha, beta, D, d_rs, d_cs);
}

extern "C" __global__ void __launch_bounds__(256)
pg_split_k_reduce_bf16(long long rows, long long cols, int splits, const float* W, long long w_rs,
                       long long w_cs, long long w_split, float alpha, float beta, __nv_bfloat16* D,
                       long long d_rs, long long d_cs) {
    split_k_reduce<__nv_bfloat16>(rows, cols, splits, W, w_rs, w_cs, w_split, alpha, beta, D, d_rs, d_cs);
}
