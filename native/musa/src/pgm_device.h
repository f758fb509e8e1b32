// pgm_device.h -- device runtime for the musa and cuda flavors, and the interface between
// the ABI layer (polygemm_musa_api.mu) and the kernels (polygemm_musa_kernel.mu).
// Code is written against MUSA names; the cuda flavor maps them with musa_compat_cuda.h.
#ifndef PGM_DEVICE_H
#define PGM_DEVICE_H

#include "pgm_build_config.h"

#if defined(POLYGEMM_MUSA_FLAVOR_CUDA)
#include "musa_compat_cuda.h"
#elif defined(POLYGEMM_MUSA_FLAVOR_MUSA)
#include <musa_runtime.h>
#include <musa_fp16.h>
#include <musa_pipeline_primitives.h>
#include <mma.h>
#else
#error "pgm_device.h: build with POLYGEMM_MUSA_FLAVOR=musa or cuda (host uses polygemm_musa_host.cpp)"
#endif

namespace pgm {

// Sets the S4000 shared-memory bank width (8 bytes) on the GEMM kernels of the current
// device. Call once per device before launching.
musaError_t configure_kernels();

// B (k x n, column-major, ldb) -> BT (kp x np, row-major, leading dimension np), zero-padded;
// kp and np are multiples of 32. B may have any 2-byte alignment and any ldb >= k.
musaError_t launch_transpose_b(const void* B, long long ldb, int k, int n,
                               void* BT, int kp, int np, musaStream_t stream);

// C = alpha*A*BT' + beta*C on the S4000 kernel. BT comes from launch_transpose_b (kp x np,
// 16-byte aligned base). A and C may have any 2-byte alignment and leading dimension: the
// kernel takes 16-byte async copies / stores only where they are legal.
musaError_t launch_gemm_f16(int m, int n, int k, float alpha,
                            const void* A, long long lda,
                            const void* BT, long long np,
                            float beta, void* C, long long ldc, musaStream_t stream);

}  // namespace pgm

#endif  // PGM_DEVICE_H
