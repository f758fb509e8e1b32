// polygemm_musa_host.cpp -- the `host` flavor of the polygemm_musa C ABI: the same handles,
// prepared-B objects, status codes and messages as the device flavors, computed on the CPU,
// so that CI can exercise a binding end to end without a GPU.
//
// "Device memory" is host memory from pgm_malloc, recorded in a registry: pgm_free of an
// unknown pointer is an error, and every range a call touches (copies, GEMM operands) must
// lie inside one live allocation -- which also catches binding bugs a GPU would only report
// as a crash. New blocks are filled with NaN (as device memory holds garbage), and a GEMM
// with beta != 0 refuses a C whose block was never written. A call pins the blocks it
// touches, and pgm_free waits for those calls to finish (a device's free waits for its
// kernels likewise). fp16 <-> fp32 conversion is done by hand (round-to-nearest-even, NaN and Inf
// preserved); products are accumulated in fp32 like the device kernel; the epilogue is
// alpha*acc + beta*C in fp32, rounded once, and beta == 0 never reads C.
#include "pgm_build_config.h"
#include "pgm_common.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
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
struct Block {
    size_t bytes = 0;
    int pins = 0;           // calls now reading or writing the block
    bool freeing = false;   // pgm_free is waiting for the pins to go
    bool written = false;   // something was copied or computed into it
};
struct Registry {
    std::mutex mu;
    std::condition_variable cv;
    std::map<uintptr_t, Block> blocks;   // base -> block
};
inline Registry& registry() {
    static Registry* r = new Registry();   // never destroyed: see LiveSet
    return *r;
}

// The blocks one call uses, unpinned when the call returns.
class Pins {
public:
    Pins() = default;
    Pins(const Pins&) = delete;
    Pins& operator=(const Pins&) = delete;
    ~Pins() {
        if (bases_.empty()) return;
        Registry& r = registry();
        std::lock_guard<std::mutex> lock(r.mu);
        for (uintptr_t b : bases_) {
            auto it = r.blocks.find(b);
            if (it != r.blocks.end() && --it->second.pins == 0 && it->second.freeing)
                r.cv.notify_all();
        }
    }
    void add(uintptr_t base) { bases_.push_back(base); }

private:
    std::vector<uintptr_t> bases_;
};

enum class Use { read, write, read_initialised };

// Checks that [p, p + bytes) lies inside one live allocation and pins that allocation for
// the rest of the call. `read_initialised`: the block must have been written before
// (beta != 0 reads C).
inline int check_range(const char* fn, const char* what, const void* p, size_t bytes, Pins& pins,
                       Use use = Use::read) {
    if (bytes == 0) return PGM_OK;
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.blocks.upper_bound(a);
    if (it != r.blocks.begin()) {
        --it;
        Block& blk = it->second;
        const bool starts_inside = a >= it->first && a - it->first < blk.bytes;
        if (starts_inside && blk.freeing)
            return fail(PGM_ERR_INVALID_ARGUMENT, "%s: %s %p is being freed by another thread", fn,
                        what, p);
        if (starts_inside && bytes <= blk.bytes - (a - it->first)) {
            if (use == Use::read_initialised && !blk.written)
                return fail(PGM_ERR_INVALID_ARGUMENT,
                            "%s: beta != 0 reads %s, but %s's pgm_malloc block (%zu bytes at %p) "
                            "was never written: copy %s's values in first, or pass beta=0",
                            fn, what, what, blk.bytes, (void*)it->first, what);
            if (use == Use::write) blk.written = true;
            ++blk.pins;
            pins.add(it->first);
            return PGM_OK;
        }
        if (starts_inside)
            return fail(PGM_ERR_INVALID_ARGUMENT,
                        "%s: %s [%p, +%zu bytes) runs past the end of its pgm_malloc block "
                        "(%zu bytes at %p)", fn, what, p, bytes, blk.bytes, (void*)it->first);
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

// ---- live handles and prepared-B objects ---------------------------------------------------
struct Handle {
    int device = 0;
    std::mutex mu;   // serializes the calls made with this handle
    bool timer_running = false;
    std::chrono::steady_clock::time_point t0;
};

struct Prepared {
    int device = 0;
    int k = 0, n = 0;
    std::vector<uint16_t> bt;   // k x n row-major (the transposed B, as on the device)
};

inline LiveSet<Handle>& handles() {
    static auto* s = new LiveSet<Handle>(0x48, "handle", "destroyed", "pgm_handle_create",
                                         PGM_ERR_STALE_HANDLE);
    return *s;
}
inline LiveSet<Prepared>& prepared() {
    static auto* s = new LiveSet<Prepared>(0x42, "prepared B", "released", "pgm_prepare_b",
                                           PGM_ERR_STALE_PREPARED_B);
    return *s;
}

}  // namespace host
}  // namespace pgm

using namespace pgm::host;
using HandleRef = pgm::LiveSet<Handle>::Ref;
using PreparedRef = pgm::LiveSet<Prepared>::Ref;

namespace {

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

// Operand ranges of a GEMM call must lie in pgm_malloc memory; they stay pinned in `pins`.
int check_gemm_ranges(const char* fn, int m, int n, int k, const void* A, int lda, const void* B,
                      int ldb, bool with_b, float beta, const void* C, int ldc, Pins& pins) {
    if (m == 0 || n == 0) return PGM_OK;
    if (int st = check_range(fn, "A", A, span_bytes(m, k, lda), pins)) return st;
    if (with_b)
        if (int st = check_range(fn, "B", B, span_bytes(k, n, ldb), pins)) return st;
    if (beta != 0.0f)
        if (int st = check_range(fn, "C", C, span_bytes(m, n, ldc), pins, Use::read_initialised))
            return st;
    return check_range(fn, "C", C, span_bytes(m, n, ldc), pins, Use::write);
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

int stale_device(const char* fn, int pb_device, int h_device) {
    return fail(PGM_ERR_STALE_PREPARED_B, "%s: prepared B lives on device %d, handle on device %d",
                fn, pb_device, h_device);
}

}  // namespace

extern "C" {

int pgm_abi_version(void) { return POLYGEMM_MUSA_ABI_VERSION; }

#define PGM_STR2(x) #x
#define PGM_STR(x) PGM_STR2(x)
const char* pgm_build_info(void) {
    return "flavor=" PGM_BUILD_FLAVOR ";arch=" PGM_BUILD_ARCH ";compiler=" PGM_BUILD_COMPILER
           ";abi=" PGM_STR(POLYGEMM_MUSA_ABI_VERSION) ";kernel=cpu reference, fp32 accumulation";
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
        std::unique_ptr<Handle> h(new Handle());
        h->device = device;
        *out = static_cast<pgm_handle*>(handles().add(std::move(h)));
        return PGM_OK;
    });
}

int pgm_handle_destroy(pgm_handle* h) {
    if (h == nullptr) return PGM_OK;
    std::unique_ptr<Handle> obj;
    // Waits for the calls in flight on other threads; the handle is gone when they are.
    return handles().remove("pgm_handle_destroy", h, obj);
}

int pgm_malloc(pgm_handle* h, size_t bytes, void** out) {
    const char* fn = "pgm_malloc";
    HandleRef hr;
    if (int st = handles().acquire(fn, h, hr)) return st;
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
        // 0xffff is an fp16 NaN: a read of memory nobody wrote shows up in the result, as
        // it would on a device, instead of passing on zero pages.
        std::memset(p, 0xff, rounded);
        Registry& r = registry();
        {
            std::lock_guard<std::mutex> lock(r.mu);
            Block blk;
            blk.bytes = bytes;
            r.blocks[reinterpret_cast<uintptr_t>(p)] = blk;
        }
        *out = p;
        return PGM_OK;
    });
}

int pgm_free(pgm_handle* h, void* ptr) {
    const char* fn = "pgm_free";
    HandleRef hr;
    if (int st = handles().acquire(fn, h, hr)) return st;
    if (ptr == nullptr) return PGM_OK;
    Registry& r = registry();
    {
        std::unique_lock<std::mutex> lock(r.mu);
        auto it = r.blocks.find(reinterpret_cast<uintptr_t>(ptr));
        if (it == r.blocks.end())
            return fail(PGM_ERR_INVALID_ARGUMENT,
                        "%s: %p was not returned by pgm_malloc, or was already freed", fn, ptr);
        if (it->second.freeing)
            return fail(PGM_ERR_INVALID_ARGUMENT, "%s: %p is already being freed by another thread",
                        fn, ptr);
        // New calls are refused from here on; the ones in flight finish first.
        it->second.freeing = true;
        Block* blk = &it->second;
        r.cv.wait(lock, [blk] { return blk->pins == 0; });
        r.blocks.erase(it);
    }
    std::free(ptr);
    return PGM_OK;
}

namespace {
int copy(const char* fn, pgm_handle* h, void* dst, bool dst_dev, const void* src, bool src_dev,
         size_t bytes) {
    HandleRef hr;
    if (int st = handles().acquire(fn, h, hr)) return st;
    if (bytes == 0) return PGM_OK;
    if (dst == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: dst is NULL", fn);
    if (src == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: src is NULL", fn);
    Pins pins;
    if (src_dev)
        if (int st = check_range(fn, "src", src, bytes, pins)) return st;
    if (dst_dev)
        if (int st = check_range(fn, "dst", dst, bytes, pins, Use::write)) return st;
    std::lock_guard<std::mutex> lock(hr->mu);
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

int pgm_synchronize(pgm_handle* h) {
    HandleRef hr;
    return handles().acquire("pgm_synchronize", h, hr);
}

int pgm_gemm_f16(pgm_handle* h, int m, int n, int k, float alpha, const void* A, int lda,
                 const void* B, int ldb, float beta, void* C, int ldc) {
    const char* fn = "pgm_gemm_f16";
    HandleRef hr;
    if (int st = handles().acquire(fn, h, hr)) return st;
    if (int st = pgm::check_gemm(fn, m, n, k, A, lda, true, B, ldb, C, ldc)) return st;
    Pins pins;
    if (int st = check_gemm_ranges(fn, m, n, k, A, lda, B, ldb, true, beta, C, ldc, pins)) return st;
    if (m == 0 || n == 0) return PGM_OK;
    return guarded(fn, [&]() -> int {
        std::lock_guard<std::mutex> lock(hr->mu);
        gemm_core(m, n, k, alpha, static_cast<const uint16_t*>(A), lda,
                  static_cast<const uint16_t*>(B), 1, ldb, beta, static_cast<uint16_t*>(C), ldc);
        return PGM_OK;
    });
}

namespace {
void transpose_into(Prepared* pb, const uint16_t* B, int ldb) {
    for (int p = 0; p < pb->k; p++)
        for (int j = 0; j < pb->n; j++)
            pb->bt[(size_t)p * pb->n + j] = B[(size_t)j * ldb + p];
}
}  // namespace

int pgm_prepare_b(pgm_handle* h, int k, int n, const void* B, int ldb, pgm_prepared_b** out) {
    const char* fn = "pgm_prepare_b";
    return guarded(fn, [&]() -> int {
        HandleRef hr;
        if (int st = handles().acquire(fn, h, hr)) return st;
        if (out == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
        *out = nullptr;
        if (int st = pgm::check_dims(fn, 1, n, k)) return st;
        const bool used = k > 0 && n > 0;
        if (int st = pgm::check_operand(fn, "B", B, k, n, ldb, "k", used)) return st;
        Pins pins;
        if (used)
            if (int st = check_range(fn, "B", B, span_bytes(k, n, ldb), pins)) return st;
        std::lock_guard<std::mutex> lock(hr->mu);
        std::unique_ptr<Prepared> pb(new Prepared());
        pb->device = hr->device;
        pb->k = k;
        pb->n = n;
        pb->bt.resize((size_t)k * (size_t)n);
        if (used) transpose_into(pb.get(), static_cast<const uint16_t*>(B), ldb);
        *out = static_cast<pgm_prepared_b*>(prepared().add(std::move(pb)));
        return PGM_OK;
    });
}

int pgm_prepared_b_update(pgm_handle* h, pgm_prepared_b* pb, const void* B, int ldb) {
    const char* fn = "pgm_prepared_b_update";
    HandleRef hr;
    if (int st = handles().acquire(fn, h, hr)) return st;
    PreparedRef pr;
    if (int st = prepared().acquire(fn, pb, pr)) return st;
    if (pr->device != hr->device) return stale_device(fn, pr->device, hr->device);
    const bool used = pr->k > 0 && pr->n > 0;
    if (int st = pgm::check_operand(fn, "B", B, pr->k, pr->n, ldb, "k", used)) return st;
    Pins pins;
    if (used)
        if (int st = check_range(fn, "B", B, span_bytes(pr->k, pr->n, ldb), pins)) return st;
    std::lock_guard<std::mutex> lock(hr->mu);
    if (used) transpose_into(pr.get(), static_cast<const uint16_t*>(B), ldb);
    return PGM_OK;
}

int pgm_prepared_b_shape(const pgm_prepared_b* pb, int* k_out, int* n_out) {
    const char* fn = "pgm_prepared_b_shape";
    PreparedRef pr;
    if (int st = prepared().acquire(fn, pb, pr)) return st;
    if (k_out == nullptr || n_out == nullptr)
        return fail(PGM_ERR_INVALID_ARGUMENT, "%s: k_out or n_out is NULL", fn);
    *k_out = pr->k;
    *n_out = pr->n;
    return PGM_OK;
}

int pgm_prepared_b_release(pgm_prepared_b* pb) {
    if (pb == nullptr) return PGM_OK;
    std::unique_ptr<Prepared> obj;
    // Waits for the GEMMs in flight on other threads that read it; freed when they are done.
    return prepared().remove("pgm_prepared_b_release", pb, obj);
}

int pgm_gemm_f16_prepared(pgm_handle* h, int m, int n, int k, float alpha, const void* A, int lda,
                          const pgm_prepared_b* pb, float beta, void* C, int ldc) {
    const char* fn = "pgm_gemm_f16_prepared";
    HandleRef hr;
    if (int st = handles().acquire(fn, h, hr)) return st;
    PreparedRef pr;
    if (int st = prepared().acquire(fn, pb, pr)) return st;
    if (int st = pgm::check_gemm(fn, m, n, k, A, lda, false, nullptr, 0, C, ldc)) return st;
    if (pr->device != hr->device) return stale_device(fn, pr->device, hr->device);
    if (pr->k != k || pr->n != n)
        return fail(PGM_ERR_SHAPE_MISMATCH, "%s: prepared B is %d x %d (k x n), call has k=%d, n=%d",
                    fn, pr->k, pr->n, k, n);
    Pins pins;
    if (int st = check_gemm_ranges(fn, m, n, k, A, lda, nullptr, 0, false, beta, C, ldc, pins))
        return st;
    if (m == 0 || n == 0) return PGM_OK;
    return guarded(fn, [&]() -> int {
        std::lock_guard<std::mutex> lock(hr->mu);
        gemm_core(m, n, k, alpha, static_cast<const uint16_t*>(A), lda, pr->bt.data(), n, 1, beta,
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
    HandleRef hr;
    if (int st = handles().acquire("pgm_timer_begin", h, hr)) return st;
    std::lock_guard<std::mutex> lock(hr->mu);
    hr->t0 = std::chrono::steady_clock::now();
    hr->timer_running = true;
    return PGM_OK;
}

int pgm_timer_end(pgm_handle* h, float* ms_out) {
    const char* fn = "pgm_timer_end";
    HandleRef hr;
    if (int st = handles().acquire(fn, h, hr)) return st;
    if (ms_out == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: ms_out is NULL", fn);
    *ms_out = 0.0f;
    std::lock_guard<std::mutex> lock(hr->mu);
    if (!hr->timer_running)
        return fail(PGM_ERR_INVALID_ARGUMENT, "%s: no pgm_timer_begin on this handle", fn);
    hr->timer_running = false;
    const auto dt = std::chrono::steady_clock::now() - hr->t0;
    *ms_out = std::chrono::duration<float, std::milli>(dt).count();
    return PGM_OK;
}

}  // extern "C"
