// Utility kernel of the CUDA backend (not a ladder rung): a strided, scaled copy.
//
//   dst[i*dst_rs + j*dst_cs] = (src ? scale * src[i*src_rs + j*src_cs] : 0)
//
// for 0 <= i < rows, 0 <= j < cols. Strides are in elements and 64-bit, so one kernel
// packs an operand into a zero-padded scratch buffer in a ladder's layout (transposing
// when the layouts differ), unpacks a padded result into the caller's C, copies c into
// the output, and computes C = beta * C for K = 0. With scale == 0 the source is not read
// (BLAS: beta == 0 means C is not read, so NaN poison does not propagate).
// One entry per element type: pg_copy_scale_f32, _f16, _bf16 (16-bit values are scaled
// in float32 and rounded once) and _f64 (scaled in float64, its scale a double).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float pg_to_float(float v) { return v; }
__device__ __forceinline__ float pg_to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float pg_to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T>
__device__ __forceinline__ T pg_round(float v);
template <>
__device__ __forceinline__ float pg_round<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half pg_round<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 pg_round<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T>
__device__ __forceinline__ void copy_scale(long long rows, long long cols, float scale,
                                           const T* __restrict__ src, long long src_rs,
                                           long long src_cs, T* __restrict__ dst,
                                           long long dst_rs, long long dst_cs) {
    // Threads run along whichever destination dimension is contiguous, for coalescing.
    const bool along_cols = dst_cs == 1;
    const long long inner = along_cols ? cols : rows;
    const long long outer = along_cols ? rows : cols;
    const long long total = inner * outer;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const long long o = t / inner, in = t % inner;
        const long long i = along_cols ? o : in, j = along_cols ? in : o;
        float v = 0.f;
        if (src != nullptr && scale != 0.f) v = scale * pg_to_float(src[i * src_rs + j * src_cs]);
        dst[i * dst_rs + j * dst_cs] = pg_round<T>(v);
    }
}

extern "C" __global__ void __launch_bounds__(256)
pg_copy_scale_f32(long long rows, long long cols, float scale,
                  const float* __restrict__ src, long long src_rs, long long src_cs,
                  float* __restrict__ dst, long long dst_rs, long long dst_cs) {
    copy_scale<float>(rows, cols, scale, src, src_rs, src_cs, dst, dst_rs, dst_cs);
}

extern "C" __global__ void __launch_bounds__(256)
pg_copy_scale_f16(long long rows, long long cols, float scale,
                  const __half* __restrict__ src, long long src_rs, long long src_cs,
                  __half* __restrict__ dst, long long dst_rs, long long dst_cs) {
    copy_scale<__half>(rows, cols, scale, src, src_rs, src_cs, dst, dst_rs, dst_cs);
}

extern "C" __global__ void __launch_bounds__(256)
pg_copy_scale_bf16(long long rows, long long cols, float scale,
                   const __nv_bfloat16* __restrict__ src, long long src_rs, long long src_cs,
                   __nv_bfloat16* __restrict__ dst, long long dst_rs, long long dst_cs) {
    copy_scale<__nv_bfloat16>(rows, cols, scale, src, src_rs, src_cs, dst, dst_rs, dst_cs);
}

// float64: its own loop (scale and values in double; the float path above would round them).
extern "C" __global__ void __launch_bounds__(256)
pg_copy_scale_f64(long long rows, long long cols, double scale,
                  const double* __restrict__ src, long long src_rs, long long src_cs,
                  double* __restrict__ dst, long long dst_rs, long long dst_cs) {
    const bool along_cols = dst_cs == 1;
    const long long inner = along_cols ? cols : rows;
    const long long total = inner * (along_cols ? rows : cols);
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const long long o = t / inner, in = t % inner;
        const long long i = along_cols ? o : in, j = along_cols ? in : o;
        double v = 0.0;
        if (src != nullptr && scale != 0.0) v = scale * src[i * src_rs + j * src_cs];
        dst[i * dst_rs + j * dst_cs] = v;
    }
}
