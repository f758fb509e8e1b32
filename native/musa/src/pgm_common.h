// pgm_common.h -- flavor-independent pieces of the polygemm_musa C ABI: the thread-local
// error message, status names, argument validation, the registry of live handles and
// prepared-B objects (LiveSet) and the tile constants shared by the device and host implementations.
// Internal header: included by polygemm_musa_api.mu (musa/cuda flavors) and by
// polygemm_musa_host.cpp (host flavor). Host code only.
#ifndef PGM_COMMON_H
#define PGM_COMMON_H

#include "polygemm_musa.h"

#include <climits>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

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
        case PGM_ERR_STALE_HANDLE: return "PGM_ERR_STALE_HANDLE";
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

// ---- live objects: handles and prepared-B objects --------------------------------------------
// What a caller holds is a token, not an address: a kind tag in the top 8 bits and a serial
// number below it that is never reused. Liveness keyed on the raw address (ABI 1) let a
// second destroy free a different, live object that malloc had put at the same address
// (ABA), and a use after destroy read freed memory; a token that is not live now is simply
// not found, so it gets PGM_ERR_STALE_* and never reaches anything.
//
// Every call holds a Ref to the objects it uses for its whole duration. remove() (destroy,
// release) first marks the object closing, so new calls are refused, then waits until the
// Refs in flight are gone, and only then hands the object back to be freed: a release from
// another thread can never free memory a call is still reading.
//
// The sets are never destroyed (created with new): objects still live at exit must not be
// freed by static destructors after the device runtime has shut down.
template <class T>
class LiveSet {
    struct Entry {
        std::unique_ptr<T> obj;
        int users = 0;
        bool closing = false;
    };

public:
    // A counted use of a live object; the object cannot be freed while a Ref to it exists.
    class Ref {
    public:
        Ref() = default;
        Ref(const Ref&) = delete;
        Ref& operator=(const Ref&) = delete;
        ~Ref() { reset(); }
        T* get() const { return entry_ ? entry_->obj.get() : nullptr; }
        T* operator->() const { return get(); }
        explicit operator bool() const { return entry_ != nullptr; }
        void reset() {
            if (entry_ == nullptr) return;
            std::lock_guard<std::mutex> lock(set_->mu_);
            if (--entry_->users == 0 && entry_->closing) set_->cv_.notify_all();
            entry_ = nullptr;
        }

    private:
        friend class LiveSet;
        LiveSet* set_ = nullptr;
        Entry* entry_ = nullptr;   // unordered_map nodes stay put until erased
    };

    // kind: "handle"; verb: "destroyed"; creator: "pgm_handle_create"; stale: the status.
    LiveSet(uint8_t tag, const char* kind, const char* verb, const char* creator, int stale)
        : tag_(tag), kind_(kind), verb_(verb), creator_(creator), stale_(stale) {}

    // Takes ownership of obj and returns its token (never NULL).
    void* add(std::unique_ptr<T> obj) {
        std::lock_guard<std::mutex> lock(mu_);
        const uint64_t serial = next_++;
        live_[serial].obj = std::move(obj);
        return reinterpret_cast<void*>(static_cast<uintptr_t>(((uint64_t)tag_ << 56) | serial));
    }

    // Fills `out` with a counted use of the live object named by `token`.
    int acquire(const char* fn, const void* token, Ref& out) {
        out.reset();
        if (token == nullptr) return fail(PGM_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, kind_);
        std::lock_guard<std::mutex> lock(mu_);
        Entry* e = nullptr;
        if (int st = find_locked(fn, token, e)) return st;
        ++e->users;
        out.set_ = this;
        out.entry_ = e;
        return PGM_OK;
    }

    // Ends the object's life: refuses new uses at once, waits for the uses in flight, then
    // moves the object into `out` for the caller to free (and report errors from).
    int remove(const char* fn, const void* token, std::unique_ptr<T>& out) {
        std::unique_lock<std::mutex> lock(mu_);
        Entry* e = nullptr;
        if (int st = find_locked(fn, token, e)) return st;
        e->closing = true;
        cv_.wait(lock, [e] { return e->users == 0; });
        out = std::move(e->obj);
        live_.erase(serial_of(token));
        return PGM_OK;
    }

private:
    static uint64_t serial_of(const void* token) {
        return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(token)) & ((1ull << 56) - 1);
    }

    int find_locked(const char* fn, const void* token, Entry*& out) {
        const uint64_t v = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(token));
        const uint64_t serial = serial_of(token);
        if ((v >> 56) != tag_ || serial == 0 || serial >= next_)
            return fail(stale_, "%s: %s %p was never returned by %s (not a %s of this library)",
                        fn, kind_, token, creator_, kind_);
        auto it = live_.find(serial);
        if (it == live_.end())
            return fail(stale_, "%s: %s %p was %s; it cannot be used any more", fn, kind_, token,
                        verb_);
        if (it->second.closing)
            return fail(stale_, "%s: %s %p is being %s by another thread", fn, kind_, token,
                        verb_);
        out = &it->second;
        return PGM_OK;
    }

    std::mutex mu_;
    std::condition_variable cv_;
    std::unordered_map<uint64_t, Entry> live_;
    uint64_t next_ = 1;
    const uint64_t tag_;
    const char* kind_;
    const char* verb_;
    const char* creator_;
    const int stale_;
};

static_assert(sizeof(void*) >= 8, "tokens need 64-bit pointers");

}  // namespace pgm

#endif  // PGM_COMMON_H
