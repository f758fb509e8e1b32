// Stream-K (PG_STREAMK=1) helpers of common.cuh, which includes this file.
#pragma once

// ======================================================================================
// Section: stream-K (PG_STREAMK=1; the wgmma rung on its persistent grid of G blocks)
// The tiles of the last one or two waves are not dealt out whole: their k-tiles, in tile
// order, are cut into G equal runs, one per block. A block whose run begins inside a tile
// stores its partial sums of that tile into its own workspace slot and raises its flag
// (pg_sk_signal); the block whose run holds the tile's first k-tile waits for the flags of
// the blocks after it (pg_sk_wait), adds their slots in block order and stores the tile.
// Why: a short last wave leaves SMs idle for a whole tile's time (4096^3 in 128 x 256 tiles is
// 3.88 waves; 1000 x 3000 x 2000 is 96 tiles for 132 SMs). The sum's order is fixed, so the
// bits are the same every run. A block contributes to at most one tile (its run's first), so
// one slot per block suffices; the waiting block puts the flags back to zero, so the next
// launch finds them ready. Every block must be resident at once (the persistent grid is, and
// the host launches it cooperatively so that other work on the GPU cannot break that).
// Parameters after the rung's own: PG_STREAMK_PARAMS (the slots, G x tile floats; the flags).
// ======================================================================================
#ifndef PG_STREAMK
#define PG_STREAMK 0
#endif
#if PG_STREAMK
#define PG_STREAMK_PARAMS , float *pg_sk_ws, unsigned int *pg_sk_flag
// Every thread of the group has stored its part of the block's slot: the flag goes up.
// (Why every thread's fence: one release by the first thread after the barrier, as the split
// arrival does, measured 1.4-3.3% slower here at 4096^3 in three runs out of three, and level
// or faster at 1000x3000x2000: docs/benchmarks/split_sync_ab.py.)
__device__ __forceinline__ void pg_sk_signal(int bar, int threads, int rank, unsigned int* flag) {
    __threadfence();
    pg_bar_sync(bar, threads);
    if (rank == 0) asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(flag), "r"(1u) : "memory");
}
// Block until another block's flag is up (rank 0 polls with acquire loads; the barrier then
// lets the whole group read that block's slot).
__device__ __forceinline__ void pg_sk_wait(int bar, int threads, int rank, const unsigned int* flag) {
    if (rank == 0) {
        unsigned int seen;
        for (;;) {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(seen) : "l"(flag) : "memory");
            if (seen) break;
            __nanosleep(32);
        }
    }
    pg_bar_sync(bar, threads);
}
#else
#define PG_STREAMK_PARAMS
#endif
