// musa_compat_cuda.h -- lets the S4000 kernel source (written against MUSA names) compile
// with nvcc, so its logic can be checked on an NVIDIA GPU.
//
// 1. Names: the MUSA runtime maps one-to-one onto the CUDA runtime (musa* -> cuda*,
//    mtmusa -> nvcuda, musa_pipeline_primitives.h -> cuda_pipeline_primitives.h).
// 2. The wave: S4000 (mp_22) executes 128-thread hardware warps and its tensor op is
//    32x32x16. NVIDIA warps have 32 threads and wmma offers 16x16x16 for fp16. Here one
//    128-thread "wave" is 4 NVIDIA warps and a 32x32 fragment is held as four 16x16
//    fragments, one per warp: warp q (0..3) of the wave owns quadrant (q & 1, q >> 1) =
//    (row block, column block) of every 32x32 accumulator, loads its own 16-row slice of the
//    A fragment and its own 16-column slice of the B fragment. Every load, pipeline stage
//    and write-back of the kernel then executes exactly as written for S4000.
//
// The wrapper layer (pgm_wave_frag_*) has the same signatures as the native one in
// polygemm_musa_kernel.mu; the kernel only talks to it.
//
// Include only from code compiled by nvcc (POLYGEMM_MUSA_FLAVOR_CUDA).
#ifndef POLYGEMM_MUSA_COMPAT_CUDA_H
#define POLYGEMM_MUSA_COMPAT_CUDA_H

#if !defined(__CUDACC__)
#error "musa_compat_cuda.h is for nvcc builds (POLYGEMM_MUSA_FLAVOR=cuda) only"
#endif

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_pipeline_primitives.h>
#include <mma.h>

// ---- runtime types and constants --------------------------------------------------------
typedef cudaError_t musaError_t;
typedef cudaStream_t musaStream_t;
typedef cudaEvent_t musaEvent_t;
typedef cudaDeviceProp musaDeviceProp;

#define musaSuccess cudaSuccess
#define musaErrorMemoryAllocation cudaErrorMemoryAllocation
#define musaMemcpyHostToDevice cudaMemcpyHostToDevice
#define musaMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define musaMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define musaSharedMemBankSizeEightByte cudaSharedMemBankSizeEightByte
#define musaFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize

// ---- runtime functions ---------------------------------------------------------------------
#define musaGetLastError cudaGetLastError
#define musaGetErrorString cudaGetErrorString
#define musaGetDeviceCount cudaGetDeviceCount
#define musaGetDevice cudaGetDevice
#define musaSetDevice cudaSetDevice
#define musaGetDeviceProperties cudaGetDeviceProperties
#define musaMalloc cudaMalloc
#define musaFree cudaFree
#define musaMemcpy cudaMemcpy
#define musaMemcpyAsync cudaMemcpyAsync
#define musaStreamSynchronize cudaStreamSynchronize
#define musaDeviceSynchronize cudaDeviceSynchronize
#define musaEventCreate cudaEventCreate
#define musaEventDestroy cudaEventDestroy
#define musaEventRecord cudaEventRecord
#define musaEventSynchronize cudaEventSynchronize
#define musaEventElapsedTime cudaEventElapsedTime
#define musaFuncSetAttribute cudaFuncSetAttribute

// The 8-byte shared-memory bank mode is an S4000 tuning knob. On NVIDIA GPUs since Volta
// the bank width is fixed and cudaFuncSetSharedMemConfig is deprecated (a no-op), so the
// compat layer accepts the request and does nothing.
inline cudaError_t musaFuncSetSharedMemConfig(const void* /*func*/, cudaSharedMemConfig /*cfg*/) {
    return cudaSuccess;
}

namespace mtmusa = nvcuda;

// ---- the 128-thread wave as 4 NVIDIA warps ------------------------------------------------
#define PGM_WAVE_THREADS 128

struct pgm_wave_frag_a {     // A slice of a 32(m) x 16(k) fragment, col-major in memory
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __half, nvcuda::wmma::col_major> f;
};
struct pgm_wave_frag_b {     // B slice of a 16(k) x 32(n) fragment, row-major in memory
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __half, nvcuda::wmma::row_major> f;
};
struct pgm_wave_frag_acc {   // one 16x16 quadrant of a 32x32 fp32 accumulator
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> f;
};

// Warp q of the wave (threads are numbered in a 1-D block).
__device__ inline int pgm_wave_quadrant() { return (int)((threadIdx.x % PGM_WAVE_THREADS) >> 5); }

__device__ inline void pgm_wave_frag_fill(pgm_wave_frag_acc& c, float v) {
    nvcuda::wmma::fill_fragment(c.f, v);
}
// p -> element (0, 0) of a 32 x 16 col-major A fragment: (m, k) at p[m + k*ld].
__device__ inline void pgm_wave_frag_load_a(pgm_wave_frag_a& a, const __half* p, unsigned ld) {
    nvcuda::wmma::load_matrix_sync(a.f, p + (pgm_wave_quadrant() & 1) * 16, ld);
}
// p -> element (0, 0) of a 16 x 32 row-major B fragment: (k, n) at p[k*ld + n].
__device__ inline void pgm_wave_frag_load_b(pgm_wave_frag_b& b, const __half* p, unsigned ld) {
    nvcuda::wmma::load_matrix_sync(b.f, p + (pgm_wave_quadrant() >> 1) * 16, ld);
}
__device__ inline void pgm_wave_frag_mma(pgm_wave_frag_acc& c, const pgm_wave_frag_a& a,
                                         const pgm_wave_frag_b& b) {
    nvcuda::wmma::mma_sync(c.f, a.f, b.f, c.f);
}
// Stores the 32x32 accumulator col-major: (m, n) at p[m + n*ld].
__device__ inline void pgm_wave_frag_store_acc(float* p, const pgm_wave_frag_acc& c, unsigned ld) {
    const int q = pgm_wave_quadrant();
    nvcuda::wmma::store_matrix_sync(p + (q & 1) * 16 + (size_t)(q >> 1) * 16 * ld, c.f, ld,
                                    nvcuda::wmma::mem_col_major);
}

#endif  // POLYGEMM_MUSA_COMPAT_CUDA_H
