// The wgmma rung's kernel, assembled from its parts: warpgroup 0 is the TMA producer, the
// others the wgmma consumers (the main loop), each consumer ending a tile with the build's
// epilogue; the tile scheduler says which tiles and k-tiles each CTA walks. A rung is this
// file under a configuration: hgemm/v2_wgmma_tma.cu (cooperative consumers) and
// hgemm/v3_wgmma_pingpong.cu (ping-pong consumers) include it; the entry's name is HG2_ENTRY.
#pragma once
#include "hgemm/wgmma_config.cuh"
#include "hgemm/wgmma_debug.cuh"
#include "hgemm/wgmma_ptx.cuh"
#include "hgemm/wgmma_mma.cuh"
#include "hgemm/wgmma_epilogue_direct.cuh"
#include "hgemm/wgmma_epilogue_staged.cuh"
#include "hgemm/wgmma_epilogue_tma.cuh"
#include "hgemm/wgmma_scheduler.cuh"

namespace hgemm_v2 {

// A consumer warpgroup hands a stage back to the producers: one arrival on the stage's empty
// barrier of each CTA of the cluster, from thread `rank` of the warpgroup. Why one and not one
// per warp: a wgmma is one warpgroup-wide operation, so the wait that retires it in one warp
// retires it for the warpgroup, and one arrival per warp would be four times the cluster
// traffic the release needs.
__device__ __forceinline__ void release_stage(uint32_t bar, int tid) {
    if (kCluster > 1) {
        if (tid < kCluster) mbar_arrive_cluster(bar, static_cast<uint32_t>(tid));
    } else if (tid == 0) {
        mbar_arrive(bar);
    }
}

}  // namespace hgemm_v2

extern "C" __global__ void HG2_CLUSTER_DIMS
__launch_bounds__(hgemm_v2::kThreads, 1)
HG2_ENTRY(const __grid_constant__ CUtensorMap tmap_a,
                   const __grid_constant__ CUtensorMap tmap_b, HG2_TMAP_C_PARAM int M, int N, int K, float alpha,
                   float beta, void* C, int ldc HG2_BATCH_PARAMS PG_SPLIT_PARAMS PG_STREAMK_PARAMS)
{
    using namespace hgemm_v2;
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const uint32_t full_bar = base + kStages * kStageBytes;  // kStages x 8 bytes
    const uint32_t empty_bar = full_bar + kStages * 8;       // kStages x 8 bytes
    const uint32_t turn_bar = empty_bar + kStages * 8;       // 2 x 8 bytes (ping-pong)
    const uint32_t epi_buf = full_bar + kBarBytes;           // kEpiBytes (staged epilogue)

    // The warpgroup index through a shuffle: ptxas then knows it is warp-uniform and keeps the
    // consumers' descriptors and barrier addresses in uniform registers.
    const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
    const int tid = threadIdx.x % 128;
    const uint32_t rank = (kCluster > 1) ? cluster_rank() : 0u;
    const int rank_m = static_cast<int>(rank) % kClusterM, rank_n = static_cast<int>(rank) / kClusterM;

    const int units_m = CEIL_DIV(CEIL_DIV(M, kBM), kClusterM);
    const int units_n = CEIL_DIV(CEIL_DIV(N, kBN), kClusterN);
    const int per_matrix = units_m * units_n;
    const int num_units = per_matrix * HG2_BATCH_COUNT;  // the tiles of every matrix of a batch
    const int KT = CEIL_DIV(K, kBK);
    const int nblocks = gridDim.x * gridDim.y;
    const int bid = blockIdx.x + blockIdx.y * gridDim.x;
    Work work;
    init_work(work, bid, nblocks, num_units, KT);

    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; ++s) {
            mbar_init(full_bar + 8 * s, 1);
            // one arrival per consumer warpgroup reading the stage, from each CTA of the cluster
            mbar_init(empty_bar + 8 * s, (kPingpong ? 1 : kConsumers) * kCluster);
        }
        mbar_init(turn_bar, 4);      // ping-pong: consumer 0 may start its next main loop
        mbar_init(turn_bar + 8, 4);  // ... consumer 1 may start
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&tmap_a)) : "memory");
        asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&tmap_b)) : "memory");
#if HG2_EPILOGUE == 3
        if (kTmaStore)
            asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&tmap_c)) : "memory");
#endif
    }
    if (kCluster > 1) cluster_sync();  // peers' barriers initialised before any multicast
    else __syncthreads();
    HG2_MARK(0);
    HG2_MARK_SMID();

    if (wg == 0) {
        // ---------------------------------------------------------------- producer
        if constexpr (kConsumers == 2) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid == 0) {
            int s = 0;
            uint32_t ph = 0;
            // multicast masks: the CTAs of this CTA's column of the cluster (same N position:
            // they share its B tile) and of its row (same M position: they share its A tile)
            const uint16_t mask_b = static_cast<uint16_t>(((1u << kClusterM) - 1u) << (rank_n * kClusterM));
            uint16_t mask_a = 0;
#pragma unroll
            for (int j = 0; j < kClusterN; ++j) mask_a |= static_cast<uint16_t>(1u << (rank_m + kClusterM * j));
            (void)mask_a;
            (void)mask_b;
            for (int i = 0;; ++i) {
                int u, kb, ke;
                if (!work.item(i, u, kb, ke)) break;
                int um, un;
#if PG_BATCH
                const int z = u / per_matrix;
                const int za = z * pg_batch_a, zb = z * pg_batch_b;  // batch coordinates in the maps
                unit_coords(u - z * per_matrix, units_m, units_n, um, un);
#else
                unit_coords(u, units_m, units_n, um, un);
#endif
                const int m0 = (um * kClusterM + rank_m) * kBM;
                const int n0 = (un * kClusterN + rank_n) * kBN;
                for (int kt = kb; kt < ke; ++kt) {
                    const uint32_t fb = full_bar + 8 * s;
                    mbar_wait(empty_bar + 8 * s, ph ^ 1);  // fresh barrier: passes at once
                    mbar_arrive_expect_tx(fb, kStageBytes);
                    const uint32_t sa = base + s * kStageBytes;
                    const uint32_t sb = sa + kATileBytes;
                    const int k0 = kt * kBK;
                    if constexpr (PG_TRANS_A != 0) {  // M-major A: BM/64 boxes
#pragma unroll
                        for (int i = 0; i < kBM / 64; ++i) {
                            if (kClusterN == 1)
                                HG2_LOAD(sa + i * kBoxBytes, &tmap_a, m0 + 64 * i, k0, za, fb);
                            else if (i % kClusterN == rank_n)  // this CTA's share of the M-major A tile's boxes
                                HG2_LOAD_MC(sa + i * kBoxBytes, &tmap_a, m0 + 64 * i, k0, za, fb, mask_a);
                        }
                    } else {
                        if (kClusterN == 1)
                            HG2_LOAD(sa, &tmap_a, k0, m0, za, fb);
                        else  // rows [rank_n*BM/2, +BM/2) of the K-major A tile
                            HG2_LOAD_MC(sa + rank_n * (kATileBytes / kClusterN), &tmap_a, k0,
                                        m0 + rank_n * (kBM / kClusterN), za, fb, mask_a);
                    }
                    if constexpr (PG_TRANS_B != 0) {  // K-major B
                        if (kClusterM > 1) {  // rows [rank_m*BN/2, +BN/2) of the K-major B tile
                            HG2_LOAD_MC(sb + rank_m * (kBTileBytes / kClusterM), &tmap_b, k0,
                                        n0 + rank_m * (kBN / kClusterM), zb, fb, mask_b);
                        } else {
                            HG2_LOAD(sb, &tmap_b, k0, n0, zb, fb);
                        }
                    } else {
                        if (kClusterM > 1) {  // the N-major B tile's boxes jj with jj % 2 == rank_m
#pragma unroll
                            for (int jj = 0; jj < kBN / 64; ++jj)
                                if (jj % kClusterM == rank_m)
                                    HG2_LOAD_MC(sb + jj * kBoxBytes, &tmap_b, n0 + 64 * jj, k0, zb, fb, mask_b);
                        } else {
#pragma unroll
                            for (int j = 0; j < kBN / 64; ++j)
                                HG2_LOAD(sb + j * kBoxBytes, &tmap_b, n0 + 64 * j, k0, zb, fb);
                        }
                    }
                    if (++s == kStages) {
                        s = 0;
                        ph ^= 1;
                    }
                }
            }
        }
        __syncwarp();
    } else {
        // ---------------------------------------------------------------- consumers
        if constexpr (kConsumers == 2) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int cw = wg - 1;               // consumer index (cooperative: its 64-row slice)
        const int warp = tid / 32, lane = tid % 32;
        OutT* const Cp = static_cast<OutT*>(C);
        // Per-stage descriptor offsets (bytes) of this consumer's A slice and of B.
        constexpr uint32_t kAStep = PG_TRANS_A ? 2048u : 32u;  // per k16 step
        constexpr uint32_t kBStep = PG_TRANS_B ? 32u : 2048u;
        const uint32_t da0 = desc_lo(base, PG_TRANS_A ? 8192 : 16);
        const uint32_t db0 = desc_lo(base + kATileBytes, PG_TRANS_B ? 16 : 8192);
        // This warpgroup's first m64 block inside the A tile (cooperative: its own slice).
        const uint32_t da_wg = da0 + (kPingpong ? 0u : static_cast<uint32_t>(cw * kBoxBytes) >> 4);
        // Tiles of this consumer: every tile of the CTA (cooperative) or every other one
        // (ping-pong; the ring iterations of the partner's tiles are skipped).
        const int my_first = kPingpong ? cw : 0;
        const int my_step = kPingpong ? 2 : 1;
        uint32_t turn_ph = 0;
        float acc[kMW][kAcc];
#if PG_STREAMK
        long long ring = 0;  // ring iteration of the next item's first k-tile
#endif
        for (int j = my_first;; j += my_step) {
            int u, kb, ke;
            if (!work.item(j, u, kb, ke)) break;
            HG2_MARK_ITEM(j, u, kb, ke);
            int um, un;
#if PG_BATCH
            const int z = u / per_matrix;
            OutT* const Cz = Cp + static_cast<long long>(z) * pg_batch_c;  // this matrix's C
            unit_coords(u - z * per_matrix, units_m, units_n, um, un);
#else
            OutT* const Cz = Cp;
            unit_coords(u, units_m, units_n, um, un);
#endif
            const int m0 = (um * kClusterM + rank_m) * kBM;
            const int n0 = (un * kClusterN + rank_n) * kBN;
#if PG_STREAMK
            const long long it0 = ring;  // ring iteration of this item's first k-tile
            ring += ke - kb;
#else
            const int it0 = j * KT;  // ring iteration of this tile's first k-tile (every item is whole)
#endif
            int s = static_cast<int>(it0 % kStages);
            uint32_t ph = static_cast<uint32_t>(it0 / kStages) & 1;
            if (kPingpong && j > 0) {
                // Wait for the partner to have passed all of its (earlier) tile's full-barrier
                // waits: keeps every waiter within one phase of each barrier, and alternates
                // the two main loops on the tensor cores (one's epilogue hides under the
                // other's main loop).
                mbar_wait(turn_bar + 8 * cw, turn_ph);
                turn_ph ^= 1;
            }
#pragma unroll
            for (int h = 0; h < kMW; ++h)
#pragma unroll
                for (int i = 0; i < kAcc; ++i) acc[h][i] = 0.f;
            int prev = -1;  // ring stage of the k-tile whose wgmma may still run
            // One k-tile from ring stage `st` (phase ph): its wgmma issued, the previous
            // k-tile's retired and that stage handed back (to every CTA's producer).
            auto k_tile = [&](const int st, const bool first) {
                mbar_wait(full_bar + 8 * st, ph);
                HG2_MARK_IF(first && j < 14, 2 + 4 * j);
                (void)first;
                __syncwarp();  // wgmma is .sync.aligned: the warp must be converged
                const uint32_t so = static_cast<uint32_t>(st * kStageBytes) >> 4;
                wgmma_fence();
#pragma unroll
                for (int ks = 0; ks < kBK / 16; ++ks)
#pragma unroll
                    for (int h = 0; h < kMW; ++h)
                        wgmma_tile<kTransA, kTransB>(
                            acc[h], da_wg + so + ((h * kBoxBytes + ks * kAStep) >> 4),
                            db0 + so + ((ks * kBStep) >> 4));
                wgmma_commit();
                if (prev >= 0) {
                    wgmma_wait<1>();
                    release_stage(empty_bar + 8 * prev, tid);
                }
                prev = st;
            };
            if constexpr (HG2_RING_UNROLL) {
                // Passes over the whole ring, unrolled over its stages: each copy's stage is a
                // constant, so its descriptors and barrier addresses are uniform-register adds
                // (no per-wgmma R2UR moves). Pass positions before kb (a tile need not start on
                // stage 0) or from ke on are skipped.
                for (int kt0 = kb - s; kt0 < ke; kt0 += kStages, ph ^= 1) {
#pragma unroll
                    for (int st = 0; st < kStages; ++st)
                        if (kt0 + st >= kb && kt0 + st < ke) k_tile(st, kt0 + st == kb);
                }
            } else {
                for (int kt = kb; kt < ke; ++kt) {
                    k_tile(s, kt == kb);
                    if (++s == kStages) {
                        s = 0;
                        ph ^= 1;
                    }
                }
            }
            if (kPingpong && lane == 0) mbar_arrive(turn_bar + 8 * (1 - cw));  // partner's turn
            wgmma_wait<0>();
            if (prev >= 0) release_stage(empty_bar + 8 * prev, tid);
            HG2_MARK_IF(j < 14, 3 + 4 * j);
#if PG_STREAMK
            {
                // slot layout: [consumer][accumulator][thread], so each warp moves 128-byte rows
                const int rank_c = static_cast<int>(threadIdx.x) - 128;
                constexpr long long kSlot = static_cast<long long>(kConsumers) * kAcc * 128;
                if (kb > 0) {  // a later part of a tile another block finishes: out to this block's slot
                    float* slot = pg_sk_ws + bid * kSlot + cw * kAcc * 128 + tid;
#pragma unroll
                    for (int i = 0; i < kAcc; ++i) slot[i * 128] = acc[0][i];
                    HG2_MARK_SK_SIGNAL(128 * kConsumers);
                    pg_sk_signal(4, 128 * kConsumers, rank_c, pg_sk_flag + bid);
                    HG2_MARK_IF(j < 14, 4 + 4 * j);
                    continue;
                }
                if (ke < KT) {  // this block began the tile: add the runs of the blocks after it, in order
                    const long long tile_end = static_cast<long long>(u - work.sk_unit0 + 1) * KT;
                    int c = bid + 1;
                    for (; c < nblocks && static_cast<long long>(c) * work.sk_run < tile_end; ++c) {
                        pg_sk_wait(4, 128 * kConsumers, rank_c, pg_sk_flag + c);
                        HG2_MARK(60);
                        const float* slot = pg_sk_ws + c * kSlot + cw * kAcc * 128 + tid;
#pragma unroll
                        for (int i = 0; i < kAcc; ++i) acc[0][i] += slot[i * 128];
                    }
                    pg_bar_sync(4, 128 * kConsumers);  // every slot read: the flags go back down
                    if (rank_c == 0)
                        for (int f = bid + 1; f < c; ++f) pg_sk_flag[f] = 0u;
                }
            }
#endif
            HG2_MARK_IF(j < 14, 4 + 4 * j);

#if HG2_EPILOGUE == 1 || HG2_EPILOGUE == 3
#if HG2_EPILOGUE == 3
            if (kTmaStore && beta == 0.f) {
                // Staged in this warp's two buffers, each chunk then stored by TMA.
#pragma unroll
                for (int h = 0; h < kMW; ++h)
                    epilogue_tma(acc[h], epi_buf + (cw * 4 + warp) * kEpiBuffers * kEpiWarpBytes, &tmap_c,
                                 m0 + (kPingpong ? h : cw) * 64 + warp * 16, n0, M, N, alpha, lane);
                continue;  // (nothing follows the store in these builds: no K-slices)
            }
#endif
            // Epilogue staged through this warp's shared buffer (coalesced 16-byte stores).
#pragma unroll
            for (int h = 0; h < kMW; ++h)
                epilogue_staged(acc[h], epi_buf + (cw * 4 + warp) * kEpiBuffers * kEpiWarpBytes, Cz, ldc,
                                m0 + (kPingpong ? h : cw) * 64 + warp * 16, n0, M, N, alpha, beta,
                                lane);
#elif HG2_EPILOGUE == 2
            // Measurement aid: a store the launch never takes (ldc >= 0), so the accumulators
            // stay live and the main loop is compiled as in the real builds.
            if (ldc < 0) {
#pragma unroll
                for (int h = 0; h < kMW; ++h)
                    epilogue_staged(acc[h], epi_buf, Cz, ldc, m0 + 64 * h, n0, M, N, alpha, beta, lane);
            }
#elif HG2_EPILOGUE == 0
            // Epilogue straight from the accumulator fragments.
#pragma unroll
            for (int h = 0; h < kMW; ++h) {
                const int row0 = m0 + (kPingpong ? h : cw) * 64 + warp * 16 + lane / 4;
                const int colq = n0 + 2 * (lane % 4);
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    const int row = row0 + 8 * r;
                    if (row < M) {
#pragma unroll
                        for (int jn = 0; jn < kBN / 8; ++jn)
                            store_pair(Cz, ldc, row, colq + 8 * jn, N, acc[h][4 * jn + 2 * r],
                                       acc[h][4 * jn + 2 * r + 1], alpha, beta);
                    }
                }
            }
#endif
#if PG_SPLIT
            // K-slice z of this tile is in the workspace: count it (the threads that stored
            // the tile meet on their own named barrier; ping-pong: one per consumer).
            // The counter is the tile's (row-major over the tile grid, as the reduction counts
            // them); a cluster's CTA whose tile lies past the result's edge stored nothing.
            if (m0 < M && n0 < N)
                pg_split_arrive(kPingpong ? 1 + cw : 1, kPingpong ? 128 : 128 * kConsumers,
                                kPingpong ? tid : static_cast<int>(threadIdx.x) - 128,
                                pg_split_count + (m0 / kBM) * CEIL_DIV(N, kBN) + n0 / kBN, pg_batch_count);
#endif
        }
        HG2_MARK(62);
        // the copies read this CTA's shared memory: done before it leaves
        if (kTmaStore && tid % 32 == 0) bulk_wait_all();
#if PG_SPLIT
        // Every block of this persistent grid is resident (one per SM; a cluster row's grid is
        // as many clusters as the device holds at once): once its own tiles are stored, the
        // consumers of all blocks reduce the output together, band by band, each band as soon
        // as its tile's slices are all in (common.cuh, PG_SPLIT).
        pg_split_reduce_all(3, 128 * kConsumers, static_cast<int>(threadIdx.x) - 128, bid, nblocks,
                            pg_split_count, M, N, kBM, kBN, pg_batch_count,
                            reinterpret_cast<const float*>(Cp), HG2_COL_C ? 1 : ldc, HG2_COL_C ? ldc : 1, pg_batch_c, pg_split_d,
                            pg_split_d_rs, pg_split_d_cs, pg_split_alpha, pg_split_beta,
                            pg_split_d_half);
#endif
    }
    // No CTA of a cluster may leave while its peer can still multicast into it or arrive on
    // its barriers.
    if (kCluster > 1) cluster_sync();
}
