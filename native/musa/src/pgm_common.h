// pgm_common.h -- flavor-independent pieces of the polygemm_musa C ABI: the thread-local
// error message, status names, argument validation, the registry of live prepared-B
// objects and the tile constants shared by the device and host implementations.
// Internal header: included by polygemm_musa_api.mu (musa/cuda flavors) and by
// polygemm_musa_host.cpp (host flavor). Host code only.
#ifndef PGM_COMMON_H
#define PGM_COMMON_H

#include "polygemm_musa.h"

#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_set>

static_assert(POLYGEMM_MUSA_ABI_VERSION == PGM_ABI_VERSION,
              "POLYGEMM_MUSA_ABI_VERSION and the cdef enum PGM_ABI_VERSION must agree");

namespace pgm {

// Threadblock tile of the S4000 kernel. The prepared (transposed) B is stored zero-padded
// to whole tiles: kp = roundup(k, kTileK) rows, np = roundup(n, kTileN) columns, so the
// kernel's B loads are always in range and 16-byte aligned.
constexpr int kTileM = 128;
constexpr int kTileN = 128;
constexpr int kTileK = 32;

inline long long round_up(long long x, long long m) { return (x + m - 1) / m * m; }

// ---- thread-local error message -------------------------------------------------------
inline std::string& error_slot() {
    static thread_local std::string msg;
    return msg;
}

inline void vset_error(const char* fmt, va_list ap) {
    char buf[1024];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    error_slot() = buf;
}

// Records a message for the calling thread and returns `status` (for `return fail(...)`).
inline int fail(int status, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vset_error(fmt, ap);
    va_end(ap);
    return status;
}

inline const char* status_name(int s) {
    switch (s) {
        case PGM_OK: return "PGM_OK";
        case PGM_ERR_INVALID_ARGUMENT: return "PGM_ERR_INVALID_ARGUMENT";
        case PGM_ERR_NOT_SUPPORTED: return "PGM_ERR_NOT_SUPPORTED";
        case PGM_ERR_OUT_OF_MEMORY: return "PGM_ERR_OUT_OF_MEMORY";
        case PGM_ERR_DEVICE: return "PGM_ERR_DEVICE";
        case PGM_ERR_STALE_PREPARED_B: return "PGM_ERR_STALE_PREPARED_B";
        case PGM_ERR_SHAPE_MISMATCH: return "PGM_ERR_SHAPE_MISMATCH";
        case PGM_ERR_INTERNAL: return "PGM_ERR_INTERNAL";
        default: return "PGM_UNKNOWN_STATUS";
    }
}

// ---- argument validation ------------------------------------------------------------------
inline bool is_aligned(const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) % a) == 0; }

// A fp16 operand: `rows` x `cols`, column-major, leading dimension `ld`; `used` says whether
// the call reads/writes it (a pointer that is never touched may be NULL).
inline int check_operand(const char* fn, const char* name, const void* p, int rows, int cols,
                         int ld, const char* rows_name, bool used) {
    const int min_ld = rows > 1 ? rows : 1;
    if (ld < min_ld)
        return fail(PGM_ERR_INVALID_ARGUMENT,
                    "%s: ld%c=%d is smaller than max(1, %s)=%d (column-major %s is %d x %d)",
                    fn, (char)(name[0] - 'A' + 'a'), ld, rows_name, min_ld, name, rows, cols);
    if (!used) return PGM_OK;
    if (p == nullptr)
        return fail(PGM_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, name);
    if (!is_aligned(p, 2))
        return fail(PGM_ERR_INVALID_ARGUMENT,
                    "%s: %s=%p is not 2-byte aligned, as fp16 elements must be", fn, name, p);
    return PGM_OK;
}

inline int check_dims(const char* fn, int m, int n, int k) {
    if (m < 0 || n < 0 || k < 0)
        return fail(PGM_ERR_INVALID_ARGUMENT, "%s: dimensions must be >= 0 (got m=%d, n=%d, k=%d)",
                    fn, m, n, k);
    return PGM_OK;
}

// Validates a GEMM call. B is checked only when `B_checked` (the prepared path has no B).
inline int check_gemm(const char* fn, int m, int n, int k, const void* A, int lda,
                      bool B_checked, const void* B, int ldb, const void* C, int ldc) {
    int st = check_dims(fn, m, n, k);
    if (st) return st;
    const bool any = m > 0 && n > 0;
    const bool reads_ab = any && k > 0;
    if ((st = check_operand(fn, "A", A, m, k, lda, "m", reads_ab))) return st;
    if (B_checked && (st = check_operand(fn, "B", B, k, n, ldb, "k", reads_ab))) return st;
    if ((st = check_operand(fn, "C", C, m, n, ldc, "m", any))) return st;
    // Every 128x128 output tile is one threadblock; the block count must fit an int.
    const long long blocks = round_up(m, kTileM) / kTileM * (round_up(n, kTileN) / kTileN);
    if (blocks > INT_MAX)
        return fail(PGM_ERR_NOT_SUPPORTED, "%s: m=%d x n=%d needs %lld threadblocks (max %d)",
                    fn, m, n, blocks, INT_MAX);
    return PGM_OK;
}

// ---- live prepared-B objects ------------------------------------------------------------------
// A prepared object is valid from pgm_prepare_b until pgm_prepared_b_release. The registry
// lets a released (or never created) object be reported as PGM_ERR_STALE_PREPARED_B instead
// of being dereferenced. It identifies objects, not B's contents: nothing is ever looked up
// by the address of B.
inline std::mutex& prepared_mutex() {
    static std::mutex mu;
    return mu;
}
inline std::unordered_set<const void*>& prepared_set() {
    static std::unordered_set<const void*> live;
    return live;
}
inline void prepared_register(const void* pb) {
    std::lock_guard<std::mutex> lock(prepared_mutex());
    prepared_set().insert(pb);
}
inline bool prepared_is_live(const void* pb) {
    std::lock_guard<std::mutex> lock(prepared_mutex());
    return prepared_set().count(pb) != 0;
}
inline bool prepared_unregister(const void* pb) {
    std::lock_guard<std::mutex> lock(prepared_mutex());
    return prepared_set().erase(pb) != 0;
}

}  // namespace pgm

#endif  // PGM_COMMON_H
