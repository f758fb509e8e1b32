// The wgmma rung's tile schedulers: which tiles (work units) each CTA computes, and in which
// order. Data-parallel (the plain grid: one unit per CTA) and persistent (a grid of #SMs, each
// CTA striding over the units) are the same walk; stream-K (PG_STREAMK=1) adds a run of
// k-tiles per CTA over the last waves' units; split-K (PG_SPLIT=1) is a batch of K-slices
// (the batch walk) reduced by common.cuh's pg_split_reduce_all. Units are visited in groups of
// tile rows (or columns) for L2 reuse.
#pragma once
#include "hgemm/wgmma_config.cuh"

namespace hgemm_v2 {

// Tile `t` of the cluster-level grid (kCluster vertically adjacent BM x BN tiles per unit) in
// grouped order (common.cuh's pg_grouped_walk): kGroupM unit rows are walked column by column;
// with kGroupN > 0, kGroupN unit columns row by row instead.
__device__ __forceinline__ void unit_coords(int t, int units_m, int units_n, int& um, int& un) {
    if (kGroupN > 0)
        pg_grouped_walk(t, units_n, units_m, kGroupN, un, um);
    else
        pg_grouped_walk(t, units_m, units_n, kGroupM, um, un);
}

// The work of one CTA, item by item: its whole units (first + i * stride), then (PG_STREAMK)
// its run [sk_begin, sk_end) of the stream-K region's k-tiles (the units from sk_unit0 on,
// KT k-tiles each, in unit order), one item per unit the run touches. Item i is k-tiles
// [kb, ke) of unit `unit`. Producer and consumers walk the same items.
struct Work {
    int first, stride, count;
    int KT;
#if PG_STREAMK
    int sk_unit0;
    long long sk_begin, sk_end, sk_run;  // sk_run: k-tiles per CTA (the last run may be shorter)
#endif
    __device__ __forceinline__ bool item(int i, int& unit, int& kb, int& ke) const {
        if (i < count) {
            unit = first + i * stride;
            kb = 0;
            ke = KT;
            return true;
        }
#if PG_STREAMK
        const long long t = sk_begin / KT + (i - count);
        const long long a = max(sk_begin, t * KT), e = min(sk_end, (t + 1) * KT);
        if (a >= e) return false;
        unit = sk_unit0 + static_cast<int>(t);
        kb = static_cast<int>(a - t * KT);
        ke = static_cast<int>(e - t * KT);
        return true;
#else
        return false;
#endif
    }
};

// The items of CTA `bid` of `nblocks`: `num_units` units of KT k-tiles each.
__device__ __forceinline__ void init_work(Work& work, int bid, int nblocks, int num_units, int KT) {
    work.KT = KT;
#if PG_STREAMK
    // whole units for all but the last one or two waves, whose k-tiles are shared out
    const int dp = num_units % nblocks == 0 ? num_units : max(num_units / nblocks - 1, 0) * nblocks;
    const long long region = static_cast<long long>(num_units - dp) * KT;
    work.first = bid;
    work.stride = nblocks;
    work.count = dp > bid ? (dp - bid + nblocks - 1) / nblocks : 0;
    work.sk_unit0 = dp;
    work.sk_run = (region + nblocks - 1) / nblocks;
    work.sk_begin = min(static_cast<long long>(bid) * work.sk_run, region);
    work.sk_end = min(work.sk_begin + work.sk_run, region);
#else
    // Work unit of this CTA: its cluster's index among all clusters (a cluster = kCluster
    // consecutive CTAs along x; both walk the same units).
    const int first_unit = bid / kCluster;
    const int unit_stride = nblocks / kCluster;
    work.first = first_unit;
    work.stride = unit_stride;
    work.count = first_unit < num_units ? (num_units - first_unit + unit_stride - 1) / unit_stride : 0;
#endif
}

}  // namespace hgemm_v2
