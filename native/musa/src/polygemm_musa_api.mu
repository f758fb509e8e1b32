// polygemm_musa_api.mu -- the polygemm_musa C ABI on the device runtime (musa and cuda
// flavors). Written against MUSA names; the cuda flavor maps them with musa_compat_cuda.h.
//
// This file holds host code only, but it is a .mu so that the musa flavor compiles every
// source with mcc (it needs the MUSA runtime headers, which the host compiler is not given
// by musa_add_library).
//
// Every runtime call is checked; a failure returns PGM_ERR_DEVICE (PGM_ERR_OUT_OF_MEMORY for
// allocation failures) and leaves "<function>: <call> failed: <vendor string> (error N)" in
// the thread's last-error message. Replaces the seed's static globals with a handle per
// device/stream, and its pointer-keyed B cache with explicit prepared-B objects.
#include "pgm_device.h"
#include "pgm_common.h"

#if defined(POLYGEMM_MUSA_FLAVOR_MUSA)
#include <mublas.h>
#endif

#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>

using pgm::fail;

namespace {

int dev_fail(musaError_t e, const char* fn, const char* what) {
    (void)musaGetLastError();   // clear a non-sticky error so the next call starts clean
    const int st = (e == musaErrorMemoryAllocation) ? PGM_ERR_OUT_OF_MEMORY : PGM_ERR_DEVICE;
    return fail(st, "%s: %s failed: %s (error %d)", fn, what, musaGetErrorString(e), (int)e);
}

#define PGM_CHECK(fn, call)                                        \
    do {                                                           \
        const musaError_t pgm_e_ = (call);                         \
        if (pgm_e_ != musaSuccess) return dev_fail(pgm_e_, fn, #call); \
    } while (0)

// Makes `device` current for the scope of one API call and restores the caller's device.
class DeviceScope {
public:
    int enter(const char* fn, int device) {
        PGM_CHECK(fn, musaGetDevice(&prev_));
        if (prev_ != device) {
            PGM_CHECK(fn, musaSetDevice(device));
            restore_ = true;
        }
        return PGM_OK;
    }
    ~DeviceScope() {
        if (restore_) (void)musaSetDevice(prev_);
    }

private:
    int prev_ = -1;
    bool restore_ = false;
};

// Catches C++ exceptions at the C boundary.
template <class F>
int guarded(const char* fn, F&& body) {
    try {
        return body();
    } catch (const std::bad_alloc&) {
        return fail(PGM_ERR_OUT_OF_MEMORY, "%s: host allocation failed", fn);
    } catch (...) {
        return fail(PGM_ERR_INTERNAL, "%s: unexpected C++ exception", fn);
    }
}

}  // namespace

namespace {

// What a pgm_handle token names (see pgm::LiveSet).
struct Handle {
    int device = 0;
    musaStream_t stream = nullptr;
    std::mutex mu;               // serializes the calls made with this handle
    void* ws = nullptr;          // transposed-B workspace of pgm_gemm_f16
    size_t ws_bytes = 0;
    musaEvent_t ev_start = nullptr;
    musaEvent_t ev_stop = nullptr;
    bool timer_running = false;
#if defined(POLYGEMM_MUSA_FLAVOR_MUSA)
    mublasHandle_t blas = nullptr;
#endif
};

// What a pgm_prepared_b token names.
struct Prepared {
    int device = 0;
    int k = 0, n = 0;            // the shape B had
    int kp = 0, np = 0;          // padded: multiples of the 32 x 128 (k x n) tile
    void* data = nullptr;        // kp x np row-major fp16, zero-padded
};

pgm::LiveSet<Handle>& handles() {
    static auto* s = new pgm::LiveSet<Handle>(0x48, "handle", "destroyed", "pgm_handle_create",
                                              PGM_ERR_STALE_HANDLE);
    return *s;
}
pgm::LiveSet<Prepared>& prepared() {
    static auto* s = new pgm::LiveSet<Prepared>(0x42, "prepared B", "released", "pgm_prepare_b",
                                                PGM_ERR_STALE_PREPARED_B);
    return *s;
}
using HandleRef = pgm::LiveSet<Handle>::Ref;
using PreparedRef = pgm::LiveSet<Prepared>::Ref;

int stale_device(const char* fn, int pb_device, int h_device) {
    return fail(PGM_ERR_STALE_PREPARED_B, "%s: prepared B lives on device %d, handle on device %d",
                fn, pb_device, h_device);
}

// Transposes B into `dst` (kp x np) on the handle's stream.
int transpose_into(const char* fn, Handle* h, const void* B, int ldb, int k, int n, void* dst,
                   int kp, int np) {
    if (kp == 0 || np == 0) return PGM_OK;
    PGM_CHECK(fn, pgm::launch_transpose_b(B, ldb, k, n, dst, kp, np, h->stream));
    return PGM_OK;
}

int launch_gemm(const char* fn, Handle* h, int m, int n, int k, float alpha, const void* A,
                int lda, const void* BT, int np, float beta, void* C, int ldc) {
    PGM_CHECK(fn, pgm::launch_gemm_f16(m, n, k, alpha, A, lda, BT, np, beta, C, ldc, h->stream));
    return PGM_OK;
}

}  // namespace

extern "C" {

int pgm_abi_version(void) { return POLYGEMM_MUSA_ABI_VERSION; }

const char* pgm_build_info(void) {
#if defined(POLYGEMM_MUSA_FLAVOR_CUDA)
#define PGM_WAVE_DESC "wave=4 warps x nvcuda::wmma 16x16x16 (emulated 32x32x16)"
#else
#define PGM_WAVE_DESC "wave=128-thread mtmusa::wmma 32x32x16"
#endif
#define PGM_STR2(x) #x
#define PGM_STR(x) PGM_STR2(x)
    return "flavor=" PGM_BUILD_FLAVOR ";arch=" PGM_BUILD_ARCH ";compiler=" PGM_BUILD_COMPILER
           ";abi=" PGM_STR(POLYGEMM_MUSA_ABI_VERSION) ";kernel=f16 128x128x32 512 threads;"
           PGM_WAVE_DESC;
#undef PGM_WAVE_DESC
#undef PGM_STR
#undef PGM_STR2
}

const char* pgm_last_error(void) { return pgm::error_slot().c_str(); }

const char* pgm_status_name(int status) { return pgm::status_name(status); }

int pgm_device_count(int* count_out) {
    const char* fn = "pgm_device_count";
    if (count_out == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: count_out is NULL", fn);
    *count_out = 0;
    int count = 0;
    PGM_CHECK(fn, musaGetDeviceCount(&count));
    *count_out = count;
    return PGM_OK;
}

int pgm_device_name(int device, char* buf, size_t buflen) {
    const char* fn = "pgm_device_name";
    if (buf == nullptr || buflen == 0)
        return fail(PGM_ERR_INVALID_ARGUMENT, "%s: buf is NULL or buflen is 0", fn);
    buf[0] = '\0';
    int count = 0;
    PGM_CHECK(fn, musaGetDeviceCount(&count));
    if (device < 0 || device >= count)
        return fail(PGM_ERR_INVALID_ARGUMENT, "%s: device %d out of range (%d devices)", fn,
                    device, count);
    musaDeviceProp prop;
    std::memset(&prop, 0, sizeof prop);
    PGM_CHECK(fn, musaGetDeviceProperties(&prop, device));
    std::strncpy(buf, prop.name, buflen - 1);
    buf[buflen - 1] = '\0';
    return PGM_OK;
}

int pgm_handle_create(int device, void* stream, pgm_handle** out) {
    const char* fn = "pgm_handle_create";
    return guarded(fn, [&]() -> int {
        if (out == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
        *out = nullptr;
        int count = 0;
        PGM_CHECK(fn, musaGetDeviceCount(&count));
        if (device < 0 || device >= count)
            return fail(PGM_ERR_INVALID_ARGUMENT, "%s: device %d out of range (%d devices)", fn,
                        device, count);
        DeviceScope scope;
        if (int st = scope.enter(fn, device)) return st;
        PGM_CHECK(fn, pgm::configure_kernels());

        std::unique_ptr<Handle> h(new Handle());
        h->device = device;
        h->stream = static_cast<musaStream_t>(stream);
        musaError_t e = musaEventCreate(&h->ev_start);
        if (e == musaSuccess) {
            e = musaEventCreate(&h->ev_stop);
            if (e != musaSuccess) (void)musaEventDestroy(h->ev_start);
        }
        if (e != musaSuccess) return dev_fail(e, fn, "musaEventCreate");
        *out = static_cast<pgm_handle*>(handles().add(std::move(h)));
        return PGM_OK;
    });
}

int pgm_handle_destroy(pgm_handle* token) {
    const char* fn = "pgm_handle_destroy";
    if (token == nullptr) return PGM_OK;
    int device = 0;
    {
        HandleRef hr;
        if (int st = handles().acquire(fn, token, hr)) return st;
        device = hr->device;
    }
    DeviceScope scope;
    if (int st = scope.enter(fn, device)) return st;   // handle stays valid
    // Waits for the calls other threads are making with the handle.
    std::unique_ptr<Handle> h;
    if (int st = handles().remove(fn, token, h)) return st;
    int first = PGM_OK;
    auto keep = [&](int st) {
        if (first == PGM_OK) first = st;
    };
    musaError_t e = musaStreamSynchronize(h->stream);
    if (e != musaSuccess) keep(dev_fail(e, fn, "musaStreamSynchronize"));
    if (h->ws && (e = musaFree(h->ws)) != musaSuccess) keep(dev_fail(e, fn, "musaFree(workspace)"));
    if ((e = musaEventDestroy(h->ev_start)) != musaSuccess) keep(dev_fail(e, fn, "musaEventDestroy"));
    if ((e = musaEventDestroy(h->ev_stop)) != musaSuccess) keep(dev_fail(e, fn, "musaEventDestroy"));
#if defined(POLYGEMM_MUSA_FLAVOR_MUSA)
    if (h->blas) {
        const mublasStatus_t bs = mublasDestroy(h->blas);
        if (bs != MUBLAS_STATUS_SUCCESS)
            keep(fail(PGM_ERR_DEVICE, "%s: mublasDestroy failed (status %d)", fn, (int)bs));
    }
#endif
    return first;
}

int pgm_malloc(pgm_handle* token, size_t bytes, void** out) {
    const char* fn = "pgm_malloc";
    HandleRef h;
    if (int st = handles().acquire(fn, token, h)) return st;
    if (out == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    *out = nullptr;
    if (bytes == 0) return PGM_OK;
    std::lock_guard<std::mutex> lock(h->mu);
    DeviceScope scope;
    if (int st = scope.enter(fn, h->device)) return st;
    void* p = nullptr;
    const musaError_t e = musaMalloc(&p, bytes);
    if (e != musaSuccess) {
        (void)musaGetLastError();
        return fail(e == musaErrorMemoryAllocation ? PGM_ERR_OUT_OF_MEMORY : PGM_ERR_DEVICE,
                    "%s: musaMalloc(%zu bytes) on device %d failed: %s (error %d)", fn, bytes,
                    h->device, musaGetErrorString(e), (int)e);
    }
    *out = p;
    return PGM_OK;
}

int pgm_free(pgm_handle* token, void* ptr) {
    const char* fn = "pgm_free";
    HandleRef h;
    if (int st = handles().acquire(fn, token, h)) return st;
    if (ptr == nullptr) return PGM_OK;
    std::lock_guard<std::mutex> lock(h->mu);
    DeviceScope scope;
    if (int st = scope.enter(fn, h->device)) return st;
    PGM_CHECK(fn, musaFree(ptr));
    return PGM_OK;
}

namespace {
int copy(const char* fn, pgm_handle* token, void* dst, const void* src, size_t bytes,
         decltype(musaMemcpyHostToDevice) kind) {
    HandleRef h;
    if (int st = handles().acquire(fn, token, h)) return st;
    if (bytes == 0) return PGM_OK;
    if (dst == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: dst is NULL", fn);
    if (src == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: src is NULL", fn);
    std::lock_guard<std::mutex> lock(h->mu);
    DeviceScope scope;
    if (int st = scope.enter(fn, h->device)) return st;
    PGM_CHECK(fn, musaMemcpyAsync(dst, src, bytes, kind, h->stream));
    PGM_CHECK(fn, musaStreamSynchronize(h->stream));
    return PGM_OK;
}
}  // namespace

int pgm_memcpy_h2d(pgm_handle* h, void* dst_device, const void* src_host, size_t bytes) {
    return copy("pgm_memcpy_h2d", h, dst_device, src_host, bytes, musaMemcpyHostToDevice);
}
int pgm_memcpy_d2h(pgm_handle* h, void* dst_host, const void* src_device, size_t bytes) {
    return copy("pgm_memcpy_d2h", h, dst_host, src_device, bytes, musaMemcpyDeviceToHost);
}
int pgm_memcpy_d2d(pgm_handle* h, void* dst_device, const void* src_device, size_t bytes) {
    return copy("pgm_memcpy_d2d", h, dst_device, src_device, bytes, musaMemcpyDeviceToDevice);
}

int pgm_synchronize(pgm_handle* token) {
    const char* fn = "pgm_synchronize";
    HandleRef h;
    if (int st = handles().acquire(fn, token, h)) return st;
    std::lock_guard<std::mutex> lock(h->mu);
    DeviceScope scope;
    if (int st = scope.enter(fn, h->device)) return st;
    PGM_CHECK(fn, musaStreamSynchronize(h->stream));
    return PGM_OK;
}

int pgm_gemm_f16(pgm_handle* token, int m, int n, int k, float alpha, const void* A, int lda,
                 const void* B, int ldb, float beta, void* C, int ldc) {
    const char* fn = "pgm_gemm_f16";
    HandleRef h;
    if (int st = handles().acquire(fn, token, h)) return st;
    if (int st = pgm::check_gemm(fn, m, n, k, A, lda, true, B, ldb, C, ldc)) return st;
    if (m == 0 || n == 0) return PGM_OK;
    std::lock_guard<std::mutex> lock(h->mu);
    DeviceScope scope;
    if (int st = scope.enter(fn, h->device)) return st;

    const long long kp = k == 0 ? 0 : pgm::round_up(k, pgm::kTileK);
    const long long np = pgm::round_up(n, pgm::kTileN);
    if (kp > INT_MAX || np > INT_MAX)
        return fail(PGM_ERR_NOT_SUPPORTED, "%s: k=%d or n=%d too large for the padded B", fn, k, n);
    const size_t need = (size_t)kp * (size_t)np * 2u;
    if (need > h->ws_bytes) {
        if (h->ws) {
            PGM_CHECK(fn, musaStreamSynchronize(h->stream));   // earlier launches may still read it
            PGM_CHECK(fn, musaFree(h->ws));
            h->ws = nullptr;
            h->ws_bytes = 0;
        }
        void* p = nullptr;
        const musaError_t e = musaMalloc(&p, need);
        if (e != musaSuccess) {
            (void)musaGetLastError();
            return fail(e == musaErrorMemoryAllocation ? PGM_ERR_OUT_OF_MEMORY : PGM_ERR_DEVICE,
                        "%s: musaMalloc(%zu bytes) for the transposed-B workspace failed: %s (error %d)",
                        fn, need, musaGetErrorString(e), (int)e);
        }
        h->ws = p;
        h->ws_bytes = need;
    }
    if (int st = transpose_into(fn, h.get(), B, ldb, k, n, h->ws, (int)kp, (int)np)) return st;
    return launch_gemm(fn, h.get(), m, n, k, alpha, A, lda, h->ws, (int)np, beta, C, ldc);
}

int pgm_prepare_b(pgm_handle* token, int k, int n, const void* B, int ldb, pgm_prepared_b** out) {
    const char* fn = "pgm_prepare_b";
    return guarded(fn, [&]() -> int {
        HandleRef h;
        if (int st = handles().acquire(fn, token, h)) return st;
        if (out == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
        *out = nullptr;
        if (int st = pgm::check_dims(fn, 1, n, k)) return st;
        if (int st = pgm::check_operand(fn, "B", B, k, n, ldb, "k", k > 0 && n > 0)) return st;
        const long long kp = k == 0 ? 0 : pgm::round_up(k, pgm::kTileK);
        const long long np = n == 0 ? 0 : pgm::round_up(n, pgm::kTileN);
        if (kp > INT_MAX || np > INT_MAX)
            return fail(PGM_ERR_NOT_SUPPORTED, "%s: k=%d or n=%d too large for the padded B", fn, k, n);

        std::lock_guard<std::mutex> lock(h->mu);
        DeviceScope scope;
        if (int st = scope.enter(fn, h->device)) return st;
        std::unique_ptr<Prepared> pb(new Prepared());
        pb->device = h->device;
        pb->k = k;
        pb->n = n;
        pb->kp = (int)kp;
        pb->np = (int)np;
        const size_t bytes = (size_t)kp * (size_t)np * 2u;
        if (bytes) {
            const musaError_t e = musaMalloc(&pb->data, bytes);
            if (e != musaSuccess) {
                (void)musaGetLastError();
                return fail(e == musaErrorMemoryAllocation ? PGM_ERR_OUT_OF_MEMORY : PGM_ERR_DEVICE,
                            "%s: musaMalloc(%zu bytes) for the prepared B failed: %s (error %d)",
                            fn, bytes, musaGetErrorString(e), (int)e);
            }
        }
        int st = transpose_into(fn, h.get(), B, ldb, k, n, pb->data, pb->kp, pb->np);
        if (st == PGM_OK) {
            const musaError_t e = musaStreamSynchronize(h->stream);
            if (e != musaSuccess) st = dev_fail(e, fn, "musaStreamSynchronize");
        }
        if (st != PGM_OK) {
            if (pb->data) (void)musaFree(pb->data);
            return st;
        }
        *out = static_cast<pgm_prepared_b*>(prepared().add(std::move(pb)));
        return PGM_OK;
    });
}

int pgm_prepared_b_update(pgm_handle* token, pgm_prepared_b* pb_token, const void* B, int ldb) {
    const char* fn = "pgm_prepared_b_update";
    HandleRef h;
    if (int st = handles().acquire(fn, token, h)) return st;
    PreparedRef pb;
    if (int st = prepared().acquire(fn, pb_token, pb)) return st;
    if (pb->device != h->device) return stale_device(fn, pb->device, h->device);
    if (int st = pgm::check_operand(fn, "B", B, pb->k, pb->n, ldb, "k", pb->k > 0 && pb->n > 0))
        return st;
    std::lock_guard<std::mutex> lock(h->mu);
    DeviceScope scope;
    if (int st = scope.enter(fn, h->device)) return st;
    if (int st = transpose_into(fn, h.get(), B, ldb, pb->k, pb->n, pb->data, pb->kp, pb->np))
        return st;
    PGM_CHECK(fn, musaStreamSynchronize(h->stream));
    return PGM_OK;
}

int pgm_prepared_b_shape(const pgm_prepared_b* pb_token, int* k_out, int* n_out) {
    const char* fn = "pgm_prepared_b_shape";
    PreparedRef pb;
    if (int st = prepared().acquire(fn, pb_token, pb)) return st;
    if (k_out == nullptr || n_out == nullptr)
        return fail(PGM_ERR_INVALID_ARGUMENT, "%s: k_out or n_out is NULL", fn);
    *k_out = pb->k;
    *n_out = pb->n;
    return PGM_OK;
}

int pgm_prepared_b_release(pgm_prepared_b* pb_token) {
    const char* fn = "pgm_prepared_b_release";
    if (pb_token == nullptr) return PGM_OK;
    int device = 0;
    {
        PreparedRef pb;
        if (int st = prepared().acquire(fn, pb_token, pb)) return st;
        device = pb->device;
    }
    DeviceScope scope;
    if (int st = scope.enter(fn, device)) return st;   // object stays valid
    // Waits for the calls in flight on other threads (new ones are refused from here on)...
    std::unique_ptr<Prepared> pb;
    if (int st = prepared().remove(fn, pb_token, pb)) return st;
    if (pb->data == nullptr) return PGM_OK;
    // ... then for the kernels they launched, on whichever stream, before the memory goes.
    musaError_t e = musaDeviceSynchronize();
    if (e != musaSuccess) {
        (void)musaFree(pb->data);
        return dev_fail(e, fn, "musaDeviceSynchronize");
    }
    if ((e = musaFree(pb->data)) != musaSuccess) return dev_fail(e, fn, "musaFree(prepared B)");
    return PGM_OK;
}

int pgm_gemm_f16_prepared(pgm_handle* token, int m, int n, int k, float alpha, const void* A,
                          int lda, const pgm_prepared_b* pb_token, float beta, void* C, int ldc) {
    const char* fn = "pgm_gemm_f16_prepared";
    HandleRef h;
    if (int st = handles().acquire(fn, token, h)) return st;
    PreparedRef pb;
    if (int st = prepared().acquire(fn, pb_token, pb)) return st;
    if (int st = pgm::check_gemm(fn, m, n, k, A, lda, false, nullptr, 0, C, ldc)) return st;
    if (pb->device != h->device) return stale_device(fn, pb->device, h->device);
    if (pb->k != k || pb->n != n)
        return fail(PGM_ERR_SHAPE_MISMATCH, "%s: prepared B is %d x %d (k x n), call has k=%d, n=%d",
                    fn, pb->k, pb->n, k, n);
    if (m == 0 || n == 0) return PGM_OK;
    std::lock_guard<std::mutex> lock(h->mu);
    DeviceScope scope;
    if (int st = scope.enter(fn, h->device)) return st;
    return launch_gemm(fn, h.get(), m, n, k, alpha, A, lda, pb->data, pb->np, beta, C, ldc);
}

int pgm_mublas_gemm_f16(pgm_handle* token, int m, int n, int k, float alpha, const void* A,
                        int lda, const void* B, int ldb, float beta, void* C, int ldc) {
    const char* fn = "pgm_mublas_gemm_f16";
#if defined(POLYGEMM_MUSA_FLAVOR_MUSA)
    HandleRef h;
    if (int st = handles().acquire(fn, token, h)) return st;
    if (int st = pgm::check_gemm(fn, m, n, k, A, lda, true, B, ldb, C, ldc)) return st;
    if (m == 0 || n == 0) return PGM_OK;
    std::lock_guard<std::mutex> lock(h->mu);
    DeviceScope scope;
    if (int st = scope.enter(fn, h->device)) return st;
    if (h->blas == nullptr) {
        mublasHandle_t b = nullptr;
        mublasStatus_t bs = mublasCreate(&b);
        if (bs != MUBLAS_STATUS_SUCCESS)
            return fail(PGM_ERR_DEVICE, "%s: mublasCreate failed (status %d)", fn, (int)bs);
        bs = mublasSetStream(b, h->stream);
        if (bs != MUBLAS_STATUS_SUCCESS) {
            (void)mublasDestroy(b);
            return fail(PGM_ERR_DEVICE, "%s: mublasSetStream failed (status %d)", fn, (int)bs);
        }
        h->blas = b;
    }
    // fp16 in/out, fp32 compute (MUBLAS_COMPUTE_32F is muBLAS's own value, not cuBLAS's).
    const mublasStatus_t bs =
        mublasGemmEx(h->blas, MUBLAS_OP_N, MUBLAS_OP_N, m, n, k, &alpha, A, MUSA_R_16F, lda, B,
                     MUSA_R_16F, ldb, &beta, C, MUSA_R_16F, ldc, MUBLAS_COMPUTE_32F,
                     MUBLAS_GEMM_DEFAULT);
    if (bs != MUBLAS_STATUS_SUCCESS)
        return fail(PGM_ERR_DEVICE, "%s: mublasGemmEx(m=%d, n=%d, k=%d, fp16, MUBLAS_COMPUTE_32F) "
                    "failed (status %d)", fn, m, n, k, (int)bs);
    return PGM_OK;
#else
    (void)token; (void)m; (void)n; (void)k; (void)alpha; (void)A; (void)lda; (void)B; (void)ldb;
    (void)beta; (void)C; (void)ldc;
    return fail(PGM_ERR_NOT_SUPPORTED,
                "%s: muBLAS exists only in the musa flavor; this library is flavor=%s", fn,
                PGM_BUILD_FLAVOR);
#endif
}

int pgm_timer_begin(pgm_handle* token) {
    const char* fn = "pgm_timer_begin";
    HandleRef h;
    if (int st = handles().acquire(fn, token, h)) return st;
    std::lock_guard<std::mutex> lock(h->mu);
    DeviceScope scope;
    if (int st = scope.enter(fn, h->device)) return st;
    PGM_CHECK(fn, musaEventRecord(h->ev_start, h->stream));
    h->timer_running = true;
    return PGM_OK;
}

int pgm_timer_end(pgm_handle* token, float* ms_out) {
    const char* fn = "pgm_timer_end";
    HandleRef h;
    if (int st = handles().acquire(fn, token, h)) return st;
    if (ms_out == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: ms_out is NULL", fn);
    *ms_out = 0.0f;
    std::lock_guard<std::mutex> lock(h->mu);
    if (!h->timer_running)
        return fail(PGM_ERR_INVALID_ARGUMENT, "%s: no pgm_timer_begin on this handle", fn);
    DeviceScope scope;
    if (int st = scope.enter(fn, h->device)) return st;
    h->timer_running = false;
    PGM_CHECK(fn, musaEventRecord(h->ev_stop, h->stream));
    PGM_CHECK(fn, musaEventSynchronize(h->ev_stop));
    float ms = 0.0f;
    PGM_CHECK(fn, musaEventElapsedTime(&ms, h->ev_start, h->ev_stop));
    *ms_out = ms;
    return PGM_OK;
}

}  // extern "C"
