// Debug and measurement aids of the wgmma rung, off in every shipped build (their macros then
// expand to empty statements, so the shipped code is the same with or without this header).
//
// HG2_WATCHDOG=1: an mbarrier wait longer than ~2 s traps. Why: a wrong transaction count or a
// missing arrival otherwise hangs the launch silently; a trap turns it into a launch error that
// a test can report.
//
// HG2_TRACE=1 (tools/trace_items.py): thread 128 (the first consumer's first lane) writes
// %clock64 and %globaltimer at fixed points of each block's walk into the module's hg2_trace
// (block b < 1024: 128 words, SM clocks [0, 64), global timer [64, 128)), and each item's unit
// and k-tile range into hg2_trace_items (16 a block). Marks: 0 start; item j < 14: 1+4j it
// begins, 2+4j its first stage arrived, 3+4j its last wgmma retired, 4+4j stream-K done (its
// slot stored and flagged, or the later runs added); 57-59 a stream-K slot's stores issued,
// fenced, met at the barrier; 60 a later run's flag seen; 62 the consumers' walk done; and in
// the SM-clock half's word 63, the block's %smid. The macros name the kernel's `bid`.
#pragma once

#ifndef HG2_WATCHDOG
#define HG2_WATCHDOG 0
#endif
#if HG2_WATCHDOG
#define HG2_WATCHDOG_START() const long long hg2_wd_t0_ = clock64()
#define HG2_WATCHDOG_CHECK(done) \
    if (!(done) && clock64() - hg2_wd_t0_ > 4000000000ll) __trap()
#else
#define HG2_WATCHDOG_START() do {} while (0)
#define HG2_WATCHDOG_CHECK(done) do {} while (0)
#endif

#ifndef HG2_TRACE
#define HG2_TRACE 0
#endif
#if HG2_TRACE
extern "C" __device__ unsigned long long hg2_trace[1024 * 128];
extern "C" __device__ unsigned long long hg2_trace_items[1024 * 16];
#define HG2_MARK(slot)                                                                             \
    do {                                                                                           \
        if (threadIdx.x == 128 && bid < 1024) {                                                    \
            unsigned long long c_, g_;                                                             \
            asm volatile("mov.u64 %0, %%clock64;" : "=l"(c_));                                     \
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g_));                                 \
            hg2_trace[bid * 128 + (slot)] = c_;                                                    \
            hg2_trace[bid * 128 + 64 + (slot)] = g_;                                               \
        }                                                                                          \
    } while (0)
// the SM the block runs on, in the clock half's last word
#define HG2_MARK_SMID()                                                                            \
    do {                                                                                           \
        if (threadIdx.x == 128 && bid < 1024) {                                                    \
            unsigned int sm_;                                                                      \
            asm volatile("mov.u32 %0, %%smid;" : "=r"(sm_));                                       \
            hg2_trace[bid * 128 + 63] = sm_;                                                       \
        }                                                                                          \
    } while (0)
#define HG2_MARK_IF(cond, slot) \
    do {                        \
        if (cond) HG2_MARK(slot); \
    } while (0)
// item j begins: its mark and its unit and k-tile range
#define HG2_MARK_ITEM(j, u, kb, ke)                                                                \
    do {                                                                                           \
        if ((j) < 14) {                                                                            \
            HG2_MARK(1 + 4 * (j));                                                                 \
            if (threadIdx.x == 128 && bid < 1024)                                                  \
                hg2_trace_items[bid * 16 + (j)] = (static_cast<unsigned long long>(u) << 32) |     \
                    (static_cast<unsigned long long>((kb) & 0xFFFF) << 16) | ((ke) & 0xFFFF);      \
        }                                                                                          \
    } while (0)
// a stream-K slot's signal timed in parts (the fence and barrier repeat inside pg_sk_signal)
#define HG2_MARK_SK_SIGNAL(threads)                                                                \
    do {                                                                                           \
        HG2_MARK(57);                                                                              \
        __threadfence();                                                                           \
        HG2_MARK(58);                                                                              \
        pg_bar_sync(4, threads);                                                                   \
        HG2_MARK(59);                                                                              \
    } while (0)
#else
#define HG2_MARK(slot) do {} while (0)
#define HG2_MARK_IF(cond, slot) do {} while (0)
#define HG2_MARK_SMID() do {} while (0)
#define HG2_MARK_ITEM(j, u, kb, ke) do {} while (0)
#define HG2_MARK_SK_SIGNAL(threads) do {} while (0)
#endif
