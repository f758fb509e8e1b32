/*
 * polygemm_musa.h -- versioned C ABI of libpolygemm_musa.
 *
 * One header, three implementations (chosen at CMake time with POLYGEMM_MUSA_FLAVOR):
 *   musa : the Moore Threads MTT S4000 kernel (mp_22) + muBLAS, the product;
 *   cuda : the same kernel source built with nvcc through musa_compat_cuda.h, to check the
 *          kernel's logic on an NVIDIA GPU (its speed there says nothing about S4000);
 *   host : a C++ implementation on the CPU, so CI can exercise a binding end to end.
 *
 * Conventions
 *   - Every matrix is column-major and every element is IEEE binary16 (fp16) passed as raw
 *     16-bit patterns; accumulation is fp32. Element (i, j) of X is X[i + j*ldx].
 *   - Every function returns a pgm_status value (PGM_OK == 0) unless it says otherwise.
 *     On failure pgm_last_error() returns a message for the calling thread naming the
 *     argument or the runtime call that failed (with the vendor's error string).
 *   - "Device pointers" are pointers returned by pgm_malloc (plus an offset). In the host
 *     flavor they are host memory kept in a registry, and every range is checked.
 *   - A handle is bound to one device and one stream (NULL = the default stream). All work
 *     issued through a handle is ordered on its stream. A handle may be used from several
 *     threads (calls are serialized by a mutex inside it); for concurrency give each thread
 *     its own handle.
 *   - C must not overlap A or B. beta == 0 means C is not read (it may hold NaN poison);
 *     beta != 0 reads C, which must then hold values the caller wrote.
 *   - Handles and prepared-B objects are tokens, not addresses (ABI 2): each names one
 *     object for ever and is never reused, so a destroyed/released (or never created) one
 *     gets PGM_ERR_STALE_HANDLE / PGM_ERR_STALE_PREPARED_B and can never reach another
 *     object. Every call holds the objects it uses; pgm_handle_destroy and
 *     pgm_prepared_b_release called from another thread wait for those calls to return
 *     before anything is freed.
 *
 * The block between the CDEF markers is plain C that cffi's cdef() accepts: the Python
 * binding reads its declarations from this file, so keep it free of #include, macros and
 * attributes.
 */
#ifndef POLYGEMM_MUSA_H
#define POLYGEMM_MUSA_H

#include <stddef.h>

#define POLYGEMM_MUSA_ABI_VERSION 2

#ifdef __cplusplus
extern "C" {
#endif

/* POLYGEMM_MUSA_CDEF_BEGIN */

/* The ABI version this header describes; must equal pgm_abi_version() of the library.
   2: handles and prepared-B objects are never-reused tokens; PGM_ERR_STALE_HANDLE. */
enum pgm_abi_constants {
    PGM_ABI_VERSION = 2
};

/* Status codes returned by every call. */
enum pgm_status {
    PGM_OK = 0,
    PGM_ERR_INVALID_ARGUMENT = 1,   /* null pointer, negative size, ld < rows, bad range, ... */
    PGM_ERR_NOT_SUPPORTED = 2,      /* feature absent in this flavor/build, or problem too large */
    PGM_ERR_OUT_OF_MEMORY = 3,      /* device or host allocation failed */
    PGM_ERR_DEVICE = 4,             /* a MUSA/CUDA runtime or muBLAS call failed */
    PGM_ERR_STALE_PREPARED_B = 5,   /* prepared-B object released, unknown, or from another device */
    PGM_ERR_SHAPE_MISMATCH = 6,     /* prepared-B shape differs from the call's k x n */
    PGM_ERR_INTERNAL = 7,           /* a bug in this library */
    PGM_ERR_STALE_HANDLE = 8        /* handle destroyed, being destroyed, or never created */
};

typedef struct pgm_handle pgm_handle;
typedef struct pgm_prepared_b pgm_prepared_b;

/* ---- library information (never fail) ---- */
int pgm_abi_version(void);
/* "flavor=musa|cuda|host;arch=mp_22|sm_90|host;compiler=...;abi=2;..." */
const char* pgm_build_info(void);
/* Message of the most recent failing call on the calling thread ("" if none yet); calls
   that succeed leave it unchanged. Valid until the next failing call on this thread. */
const char* pgm_last_error(void);
/* Symbolic name of a status code ("PGM_OK", ...); "PGM_UNKNOWN_STATUS" otherwise. */
const char* pgm_status_name(int status);

/* ---- devices ---- */
int pgm_device_count(int* count_out);
/* Writes a NUL-terminated device name (truncated to buflen-1 bytes). */
int pgm_device_name(int device, char* buf, size_t buflen);

/* ---- handles ---- */
/* stream: a musaStream_t (cudaStream_t in the cuda flavor) or NULL for the default stream;
   must be NULL in the host flavor. The stream stays owned by the caller. */
int pgm_handle_create(int device, void* stream, pgm_handle** out);
/* Waits for calls other threads are making with the handle, synchronizes its stream, then
   frees its workspace. NULL is a no-op; a second destroy returns PGM_ERR_STALE_HANDLE. */
int pgm_handle_destroy(pgm_handle* h);

/* ---- device memory (synchronous with respect to the host) ---- */
int pgm_malloc(pgm_handle* h, size_t bytes, void** out);
/* NULL is a no-op. Memory a call is still using is freed after it (host flavor: pgm_free
   waits for the calls in flight; device flavors: the runtime's free waits for kernels). */
int pgm_free(pgm_handle* h, void* ptr);
int pgm_memcpy_h2d(pgm_handle* h, void* dst_device, const void* src_host, size_t bytes);
int pgm_memcpy_d2h(pgm_handle* h, void* dst_host, const void* src_device, size_t bytes);
int pgm_memcpy_d2d(pgm_handle* h, void* dst_device, const void* src_device, size_t bytes);
int pgm_synchronize(pgm_handle* h);

/* ---- GEMM: C = alpha*A*B + beta*C, A m x k, B k x n, C m x n, column-major fp16 ----
   Launches asynchronously on the handle's stream (pgm_synchronize or a d2h copy waits).
   B is transposed into the handle's workspace on every call; to pay that once, use
   pgm_prepare_b + pgm_gemm_f16_prepared. Any m, n, k >= 0 and any leading dimensions
   (>= rows) are accepted: unaligned pointers or leading dimensions take a scalar-copy path.
   m == 0 or n == 0 does nothing; k == 0 gives C = beta*C. */
int pgm_gemm_f16(pgm_handle* h, int m, int n, int k, float alpha,
                 const void* A, int lda, const void* B, int ldb,
                 float beta, void* C, int ldc);

/* ---- explicit B preparation (replaces the seed's pointer-keyed cache) ----
   pgm_prepare_b copies B (k x n, column-major, ldb) into a new object owned by the caller;
   later changes to B's memory are not seen until pgm_prepared_b_update is called. */
int pgm_prepare_b(pgm_handle* h, int k, int n, const void* B, int ldb, pgm_prepared_b** out);
/* Re-reads B (same k x n) into an existing prepared object. */
int pgm_prepared_b_update(pgm_handle* h, pgm_prepared_b* pb, const void* B, int ldb);
/* Reports the k x n shape the object was prepared for. */
int pgm_prepared_b_shape(const pgm_prepared_b* pb, int* k_out, int* n_out);
/* Frees the object: first waits for the calls other threads are making with it (new calls
   already get PGM_ERR_STALE_PREPARED_B), then for its device's pending work. NULL is a
   no-op; a second release returns PGM_ERR_STALE_PREPARED_B. pgm_prepare_b and
   pgm_prepared_b_update wait for their copy to finish, so the object may then be used from
   any handle on the same device. */
int pgm_prepared_b_release(pgm_prepared_b* pb);
int pgm_gemm_f16_prepared(pgm_handle* h, int m, int n, int k, float alpha,
                          const void* A, int lda, const pgm_prepared_b* pb,
                          float beta, void* C, int ldc);

/* ---- vendor library, for comparison: muBLAS mublasGemmEx (fp16 in/out, fp32 compute).
   Real only in the musa flavor; PGM_ERR_NOT_SUPPORTED elsewhere. ---- */
int pgm_mublas_gemm_f16(pgm_handle* h, int m, int n, int k, float alpha,
                        const void* A, int lda, const void* B, int ldb,
                        float beta, void* C, int ldc);

/* ---- timing: events on the handle's stream (host flavor: a steady clock) ----
   pgm_timer_begin records a start event; pgm_timer_end records a stop event, waits for it
   and writes the elapsed milliseconds. Put any number of calls in between. */
int pgm_timer_begin(pgm_handle* h);
int pgm_timer_end(pgm_handle* h, float* ms_out);

/* POLYGEMM_MUSA_CDEF_END */

#ifdef __cplusplus
}
#endif

#endif /* POLYGEMM_MUSA_H */
