// polygemm_musa_host.cpp -- the `host` flavor of the polygemm_musa C ABI: the same handles,
// prepared-B objects, status codes and messages as the device flavors, computed on the CPU,
// so that CI can exercise a binding end to end without a GPU.
//
// "Device memory" is host memory from pgm_malloc, recorded in a registry: pgm_free of an
// unknown pointer is an error, and every range a call touches (copies, GEMM operands) must
// lie inside one live allocation -- which also catches binding bugs a GPU would only report
// as a crash. fp16 <-> fp32 conversion is done by hand (round-to-nearest-even, NaN and Inf
// preserved); products are accumulated in fp32 like the device kernel; the epilogue is
// alpha*acc + beta*C in fp32, rounded once, and beta == 0 never reads C.
#include "pgm_build_config.h"
#include "pgm_common.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <vector>

using pgm::fail;

namespace pgm {
namespace host {

// ---- IEEE binary16 <-> binary32 -------------------------------------------------------------
inline float half_to_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);          // Inf, or NaN with its payload
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13); // normal: rebias 15 -> 127
    } else if (man == 0) {
        bits = sign;                                      // +-0
    } else {
        // Subnormal: man * 2^-24. Normalize into a float (always normal in binary32).
        int e = -1;
        uint32_t m = man;
        do {
            m <<= 1;
            ++e;
        } while ((m & 0x400u) == 0);
        // value = 1.f * 2^(-15 - e) with fraction (m & 0x3ff)
        bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((m & 0x3ffu) << 13);
    }
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

inline uint16_t float_to_half(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    u &= 0x7fffffffu;
    if (u >= 0x7f800000u) {
        if (u == 0x7f800000u) return sign | 0x7c00u;                     // Inf
        return (uint16_t)(sign | 0x7e00u | ((u >> 13) & 0x3ffu));        // NaN, quiet, top payload
    }
    if (u >= 0x477ff000u) return sign | 0x7c00u;       // >= 65520 rounds to Inf
    const uint32_t e = u >> 23;
    if (e >= 113) {                                    // normal half (>= 2^-14)
        uint32_t q = ((e - 112u) << 10) | ((u & 0x7fffffu) >> 13);
        const uint32_t rem = u & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;   // may carry into the exponent
        return (uint16_t)(sign | q);
    }
    if (e < 102) return sign;                          // < 2^-25 (or float subnormal): +-0
    // Subnormal half: value / 2^-24 = m * 2^(e - 126), shift = 126 - e in [14, 24].
    const uint32_t m = (u & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (q & 1u))) ++q;   // 0x400 is the smallest normal
    return (uint16_t)(sign | q);
}

// ---- the "device" memory registry ----------------------------------------------------------
struct Registry {
    std::mutex mu;
    std::map<uintptr_t, size_t> blocks;   // base -> bytes
};
inline Registry& registry() {
    static Registry r;
    return r;
}

// Checks that [p, p + bytes) lies inside one live allocation.
inline int check_range(const char* fn, const char* what, const void* p, size_t bytes) {
    if (bytes == 0) return PGM_OK;
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.blocks.upper_bound(a);
    if (it != r.blocks.begin()) {
        --it;
        if (a >= it->first && a - it->first <= it->second && bytes <= it->second - (a - it->first))
            return PGM_OK;
        if (a >= it->first && a - it->first < it->second)
            return fail(PGM_ERR_INVALID_ARGUMENT,
                        "%s: %s [%p, +%zu bytes) runs past the end of its pgm_malloc block "
                        "(%zu bytes at %p)", fn, what, p, bytes, it->second, (void*)it->first);
    }
    return fail(PGM_ERR_INVALID_ARGUMENT,
                "%s: %s %p is not device memory (not inside any live pgm_malloc allocation)", fn,
                what, p);
}

// Bytes spanned by a rows x cols column-major fp16 matrix with leading dimension ld.
inline size_t span_bytes(int rows, int cols, int ld) {
    if (rows <= 0 || cols <= 0) return 0;
    return ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * 2u;
}

}  // namespace host
}  // namespace pgm

using namespace pgm::host;

namespace {
constexpr uint32_t kHandleMagic = 0x70676d48u;
constexpr uint32_t kPreparedMagic = 0x70676d42u;

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

struct pgm_handle {
    uint32_t magic = kHandleMagic;
    int device = 0;
    std::mutex mu;
    bool timer_running = false;
    std::chrono::steady_clock::time_point t0;
};

struct pgm_prepared_b {
    uint32_t magic = kPreparedMagic;
    int device = 0;
    int k = 0, n = 0;
    std::vector<uint16_t> bt;   // k x n row-major (the transposed B, as on the device)
};

namespace {

int check_handle(const char* fn, const pgm_handle* h) {
    if (h == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: handle is NULL", fn);
    if (h->magic != kHandleMagic)
        return fail(PGM_ERR_INVALID_ARGUMENT, "%s: handle %p is not a live pgm_handle", fn,
                    (const void*)h);
    return PGM_OK;
}

int check_prepared(const char* fn, const pgm_prepared_b* pb) {
    if (pb == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: prepared B is NULL", fn);
    if (!pgm::prepared_is_live(pb) || pb->magic != kPreparedMagic)
        return fail(PGM_ERR_STALE_PREPARED_B,
                    "%s: prepared B %p was released or never created by pgm_prepare_b", fn,
                    (const void*)pb);
    return PGM_OK;
}

// Operand ranges of a GEMM call must lie in pgm_malloc memory.
int check_gemm_ranges(const char* fn, int m, int n, int k, const void* A, int lda, const void* B,
                      int ldb, bool with_b, const void* C, int ldc) {
    if (m == 0 || n == 0) return PGM_OK;
    if (int st = check_range(fn, "A", A, span_bytes(m, k, lda))) return st;
    if (with_b)
        if (int st = check_range(fn, "B", B, span_bytes(k, n, ldb))) return st;
    return check_range(fn, "C", C, span_bytes(m, n, ldc));
}

// C = alpha * A * B + beta * C with B(p, j) = b[p * bs_k + j * bs_n].
void gemm_core(int m, int n, int k, float alpha, const uint16_t* A, int lda, const uint16_t* b,
               long long bs_k, long long bs_n, float beta, uint16_t* C, int ldc) {
    std::vector<float> af((size_t)m * (size_t)k);
    for (int p = 0; p < k; p++)
        for (int i = 0; i < m; i++) af[(size_t)p * m + i] = half_to_float(A[(size_t)p * lda + i]);
    std::vector<float> acc((size_t)m);
    for (int j = 0; j < n; j++) {
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int p = 0; p < k; p++) {
            const float bv = half_to_float(b[p * bs_k + j * bs_n]);
            const float* ap = &af[(size_t)p * m];
            for (int i = 0; i < m; i++) acc[i] += ap[i] * bv;
        }
        uint16_t* cj = C + (size_t)j * ldc;
        for (int i = 0; i < m; i++) {
            float r = alpha * acc[i];
            if (beta != 0.0f) r += beta * half_to_float(cj[i]);
            cj[i] = float_to_half(r);
        }
    }
}

}  // namespace

extern "C" {

int pgm_abi_version(void) { return POLYGEMM_MUSA_ABI_VERSION; }

const char* pgm_build_info(void) {
    return "flavor=" PGM_BUILD_FLAVOR ";arch=" PGM_BUILD_ARCH ";compiler=" PGM_BUILD_COMPILER
           ";abi=1;kernel=cpu reference, fp32 accumulation";
}

const char* pgm_last_error(void) { return pgm::error_slot().c_str(); }

const char* pgm_status_name(int status) { return pgm::status_name(status); }

int pgm_device_count(int* count_out) {
    if (count_out == nullptr)
        return fail(PGM_ERR_INVALID_ARGUMENT, "pgm_device_count: count_out is NULL");
    *count_out = 1;
    return PGM_OK;
}

int pgm_device_name(int device, char* buf, size_t buflen) {
    const char* fn = "pgm_device_name";
    if (buf == nullptr || buflen == 0)
        return fail(PGM_ERR_INVALID_ARGUMENT, "%s: buf is NULL or buflen is 0", fn);
    buf[0] = '\0';
    if (device != 0)
        return fail(PGM_ERR_INVALID_ARGUMENT, "%s: device %d out of range (1 device in the host flavor)",
                    fn, device);
    std::strncpy(buf, "polygemm host emulation (CPU)", buflen - 1);
    buf[buflen - 1] = '\0';
    return PGM_OK;
}

int pgm_handle_create(int device, void* stream, pgm_handle** out) {
    const char* fn = "pgm_handle_create";
    return guarded(fn, [&]() -> int {
        if (out == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
        *out = nullptr;
        if (device != 0)
            return fail(PGM_ERR_INVALID_ARGUMENT,
                        "%s: device %d out of range (1 device in the host flavor)", fn, device);
        if (stream != nullptr)
            return fail(PGM_ERR_INVALID_ARGUMENT,
                        "%s: stream must be NULL in the host flavor (got %p)", fn, stream);
        pgm_handle* h = new pgm_handle();
        h->device = device;
        *out = h;
        return PGM_OK;
    });
}

int pgm_handle_destroy(pgm_handle* h) {
    if (h == nullptr) return PGM_OK;
    if (int st = check_handle("pgm_handle_destroy", h)) return st;
    {
        std::lock_guard<std::mutex> lock(h->mu);
        h->magic = 0;
    }
    delete h;
    return PGM_OK;
}

int pgm_malloc(pgm_handle* h, size_t bytes, void** out) {
    const char* fn = "pgm_malloc";
    if (int st = check_handle(fn, h)) return st;
    if (out == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    *out = nullptr;
    if (bytes == 0) return PGM_OK;
    return guarded(fn, [&]() -> int {
        const size_t rounded = (bytes + 255u) / 256u * 256u;   // device-like 256-byte alignment
        if (rounded < bytes)
            return fail(PGM_ERR_OUT_OF_MEMORY, "%s: %zu bytes cannot be allocated", fn, bytes);
        void* p = std::aligned_alloc(256, rounded);
        if (p == nullptr)
            return fail(PGM_ERR_OUT_OF_MEMORY, "%s: allocation of %zu bytes failed", fn, bytes);
        Registry& r = registry();
        {
            std::lock_guard<std::mutex> lock(r.mu);
            r.blocks[reinterpret_cast<uintptr_t>(p)] = bytes;
        }
        *out = p;
        return PGM_OK;
    });
}

int pgm_free(pgm_handle* h, void* ptr) {
    const char* fn = "pgm_free";
    if (int st = check_handle(fn, h)) return st;
    if (ptr == nullptr) return PGM_OK;
    Registry& r = registry();
    {
        std::lock_guard<std::mutex> lock(r.mu);
        auto it = r.blocks.find(reinterpret_cast<uintptr_t>(ptr));
        if (it == r.blocks.end())
            return fail(PGM_ERR_INVALID_ARGUMENT,
                        "%s: %p was not returned by pgm_malloc, or was already freed", fn, ptr);
        r.blocks.erase(it);
    }
    std::free(ptr);
    return PGM_OK;
}

namespace {
int copy(const char* fn, pgm_handle* h, void* dst, bool dst_dev, const void* src, bool src_dev,
         size_t bytes) {
    if (int st = check_handle(fn, h)) return st;
    if (bytes == 0) return PGM_OK;
    if (dst == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: dst is NULL", fn);
    if (src == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: src is NULL", fn);
    if (dst_dev)
        if (int st = check_range(fn, "dst", dst, bytes)) return st;
    if (src_dev)
        if (int st = check_range(fn, "src", src, bytes)) return st;
    std::lock_guard<std::mutex> lock(h->mu);
    std::memmove(dst, src, bytes);
    return PGM_OK;
}
}  // namespace

int pgm_memcpy_h2d(pgm_handle* h, void* dst_device, const void* src_host, size_t bytes) {
    return copy("pgm_memcpy_h2d", h, dst_device, true, src_host, false, bytes);
}
int pgm_memcpy_d2h(pgm_handle* h, void* dst_host, const void* src_device, size_t bytes) {
    return copy("pgm_memcpy_d2h", h, dst_host, false, src_device, true, bytes);
}
int pgm_memcpy_d2d(pgm_handle* h, void* dst_device, const void* src_device, size_t bytes) {
    return copy("pgm_memcpy_d2d", h, dst_device, true, src_device, true, bytes);
}

int pgm_synchronize(pgm_handle* h) { return check_handle("pgm_synchronize", h); }

int pgm_gemm_f16(pgm_handle* h, int m, int n, int k, float alpha, const void* A, int lda,
                 const void* B, int ldb, float beta, void* C, int ldc) {
    const char* fn = "pgm_gemm_f16";
    if (int st = check_handle(fn, h)) return st;
    if (int st = pgm::check_gemm(fn, m, n, k, A, lda, true, B, ldb, C, ldc)) return st;
    if (int st = check_gemm_ranges(fn, m, n, k, A, lda, B, ldb, true, C, ldc)) return st;
    if (m == 0 || n == 0) return PGM_OK;
    return guarded(fn, [&]() -> int {
        std::lock_guard<std::mutex> lock(h->mu);
        gemm_core(m, n, k, alpha, static_cast<const uint16_t*>(A), lda,
                  static_cast<const uint16_t*>(B), 1, ldb, beta, static_cast<uint16_t*>(C), ldc);
        return PGM_OK;
    });
}

namespace {
void transpose_into(pgm_prepared_b* pb, const uint16_t* B, int ldb) {
    for (int p = 0; p < pb->k; p++)
        for (int j = 0; j < pb->n; j++)
            pb->bt[(size_t)p * pb->n + j] = B[(size_t)j * ldb + p];
}
}  // namespace

int pgm_prepare_b(pgm_handle* h, int k, int n, const void* B, int ldb, pgm_prepared_b** out) {
    const char* fn = "pgm_prepare_b";
    return guarded(fn, [&]() -> int {
        if (int st = check_handle(fn, h)) return st;
        if (out == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
        *out = nullptr;
        if (int st = pgm::check_dims(fn, 1, n, k)) return st;
        const bool used = k > 0 && n > 0;
        if (int st = pgm::check_operand(fn, "B", B, k, n, ldb, "k", used)) return st;
        if (used)
            if (int st = check_range(fn, "B", B, span_bytes(k, n, ldb))) return st;
        std::lock_guard<std::mutex> lock(h->mu);
        pgm_prepared_b* pb = new pgm_prepared_b();
        try {
            pb->device = h->device;
            pb->k = k;
            pb->n = n;
            pb->bt.resize((size_t)k * (size_t)n);
            if (used) transpose_into(pb, static_cast<const uint16_t*>(B), ldb);
        } catch (...) {
            delete pb;
            throw;
        }
        pgm::prepared_register(pb);
        *out = pb;
        return PGM_OK;
    });
}

int pgm_prepared_b_update(pgm_handle* h, pgm_prepared_b* pb, const void* B, int ldb) {
    const char* fn = "pgm_prepared_b_update";
    if (int st = check_handle(fn, h)) return st;
    if (int st = check_prepared(fn, pb)) return st;
    if (pb->device != h->device)
        return fail(PGM_ERR_STALE_PREPARED_B, "%s: prepared B lives on device %d, handle on device %d",
                    fn, pb->device, h->device);
    const bool used = pb->k > 0 && pb->n > 0;
    if (int st = pgm::check_operand(fn, "B", B, pb->k, pb->n, ldb, "k", used)) return st;
    if (used)
        if (int st = check_range(fn, "B", B, span_bytes(pb->k, pb->n, ldb))) return st;
    std::lock_guard<std::mutex> lock(h->mu);
    if (used) transpose_into(pb, static_cast<const uint16_t*>(B), ldb);
    return PGM_OK;
}

int pgm_prepared_b_shape(const pgm_prepared_b* pb, int* k_out, int* n_out) {
    const char* fn = "pgm_prepared_b_shape";
    if (int st = check_prepared(fn, pb)) return st;
    if (k_out == nullptr || n_out == nullptr)
        return fail(PGM_ERR_INVALID_ARGUMENT, "%s: k_out or n_out is NULL", fn);
    *k_out = pb->k;
    *n_out = pb->n;
    return PGM_OK;
}

int pgm_prepared_b_release(pgm_prepared_b* pb) {
    if (pb == nullptr) return PGM_OK;
    if (!pgm::prepared_unregister(pb))
        return fail(PGM_ERR_STALE_PREPARED_B,
                    "pgm_prepared_b_release: prepared B %p was already released or never created",
                    (void*)pb);
    pb->magic = 0;
    delete pb;
    return PGM_OK;
}

int pgm_gemm_f16_prepared(pgm_handle* h, int m, int n, int k, float alpha, const void* A, int lda,
                          const pgm_prepared_b* pb, float beta, void* C, int ldc) {
    const char* fn = "pgm_gemm_f16_prepared";
    if (int st = check_handle(fn, h)) return st;
    if (int st = check_prepared(fn, pb)) return st;
    if (int st = pgm::check_gemm(fn, m, n, k, A, lda, false, nullptr, 0, C, ldc)) return st;
    if (pb->device != h->device)
        return fail(PGM_ERR_STALE_PREPARED_B, "%s: prepared B lives on device %d, handle on device %d",
                    fn, pb->device, h->device);
    if (pb->k != k || pb->n != n)
        return fail(PGM_ERR_SHAPE_MISMATCH, "%s: prepared B is %d x %d (k x n), call has k=%d, n=%d",
                    fn, pb->k, pb->n, k, n);
    if (int st = check_gemm_ranges(fn, m, n, k, A, lda, nullptr, 0, false, C, ldc)) return st;
    if (m == 0 || n == 0) return PGM_OK;
    return guarded(fn, [&]() -> int {
        std::lock_guard<std::mutex> lock(h->mu);
        gemm_core(m, n, k, alpha, static_cast<const uint16_t*>(A), lda, pb->bt.data(), n, 1, beta,
                  static_cast<uint16_t*>(C), ldc);
        return PGM_OK;
    });
}

int pgm_mublas_gemm_f16(pgm_handle* h, int m, int n, int k, float alpha, const void* A, int lda,
                        const void* B, int ldb, float beta, void* C, int ldc) {
    (void)h; (void)m; (void)n; (void)k; (void)alpha; (void)A; (void)lda; (void)B; (void)ldb;
    (void)beta; (void)C; (void)ldc;
    return fail(PGM_ERR_NOT_SUPPORTED,
                "pgm_mublas_gemm_f16: muBLAS exists only in the musa flavor; this library is "
                "flavor=host");
}

int pgm_timer_begin(pgm_handle* h) {
    if (int st = check_handle("pgm_timer_begin", h)) return st;
    std::lock_guard<std::mutex> lock(h->mu);
    h->t0 = std::chrono::steady_clock::now();
    h->timer_running = true;
    return PGM_OK;
}

int pgm_timer_end(pgm_handle* h, float* ms_out) {
    const char* fn = "pgm_timer_end";
    if (int st = check_handle(fn, h)) return st;
    if (ms_out == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: ms_out is NULL", fn);
    *ms_out = 0.0f;
    std::lock_guard<std::mutex> lock(h->mu);
    if (!h->timer_running)
        return fail(PGM_ERR_INVALID_ARGUMENT, "%s: no pgm_timer_begin on this handle", fn);
    h->timer_running = false;
    const auto dt = std::chrono::steady_clock::now() - h->t0;
    *ms_out = std::chrono::duration<float, std::milli>(dt).count();
    return PGM_OK;
}

}  // extern "C"
