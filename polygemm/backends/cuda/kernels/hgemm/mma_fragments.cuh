// The mma.sync rung's warp-level main loop step: ldmatrix fragment addresses inside a stage,
// the fragment loads and the warp tile's mma of one k16 step.
#pragma once
#include "hgemm/mma_smem.cuh"

namespace hgemm_v1 {

// Per-lane ldmatrix byte offsets inside one pipeline stage, split so that every fragment
// address is (stage base + one of these registers + a compile-time immediate). Moving 16 rows
// down a tile never changes the swizzle phase (row & 7, and (row >> 1) & 3), so those moves
// are immediates; what the XOR mixes is precomputed once per thread.
// ldmatrix.x4 lane roles: lane = 8 * tile + r8, the lane addresses row r8 of 8x8 tile `tile`.
//   A K-contiguous [BM][BK]: tiles (m+0,k+0) (m+8,k+0) (m+0,k+8) (m+8,k+8) -> a0 a1 a2 a3.
//   A M-contiguous [BK][BM]: same tiles, stored k-rows x m-cols, loaded with .trans.
//   B K-contiguous [BN][BK]: tiles (n+0,k+0) (n+0,k+8) (n+8,k+0) (n+8,k+8) -> b0 b1 of n8
//     fragment 2*nj, b0 b1 of fragment 2*nj+1.
//   B N-contiguous [BK][BN]: same tiles, stored k-rows x n-cols, loaded with .trans.
struct FragOffsets {
#if PG_TRANS_A
    uint32_t a[kMmaM];       // per m16 fragment; + ks * 16 rows
#else
    uint32_t a[kSteps];      // per k16 step; + mi * 16 rows
#endif
#if PG_TRANS_B
    uint32_t b[kSteps];      // per k16 step; + nj * 16 rows
#else
    uint32_t b[kMmaN / 2];   // per pair of n8 fragments; + ks * 16 rows
#endif

    __device__ __forceinline__ void init(int wm0, int wn0, int lane) {
        const int r8 = lane & 7;
        const int tile = lane >> 3;
#if PG_TRANS_A
#pragma unroll
        for (int mi = 0; mi < kMmaM; ++mi)
            a[mi] = 2 * tile_offset<kACols, kASwizzled>(r8 + (tile >> 1) * 8, (wm0 + mi * kInstM) / 8 + (tile & 1));
#else
#pragma unroll
        for (int ks = 0; ks < kSteps; ++ks)
            a[ks] = 2 * tile_offset<kACols, kASwizzled>(wm0 + (lane & 15), ks * 2 + (lane >> 4));
#endif
#if PG_TRANS_B
#pragma unroll
        for (int ks = 0; ks < kSteps; ++ks)
            b[ks] = 2 * tile_offset<kBCols, kBSwizzled>(wn0 + r8 + (tile >> 1) * 8, ks * 2 + (tile & 1));
#else
#pragma unroll
        for (int nj = 0; nj < kMmaN / 2; ++nj)
            b[nj] = 2 * tile_offset<kBCols, kBSwizzled>(r8 + (tile & 1) * 8, (wn0 + nj * 16) / 8 + (tile >> 1));
#endif
    }
    __device__ __forceinline__ uint32_t a_addr(uint32_t stage, int mi, int ks) const {
#if PG_TRANS_A
        return stage + a[mi] + ks * kInstK * kAPitch * 2;
#else
        return stage + a[ks] + mi * kInstM * kAPitch * 2;
#endif
    }
    __device__ __forceinline__ uint32_t b_addr(uint32_t stage, int nj, int ks) const {
#if PG_TRANS_B
        return stage + b[ks] + nj * 16 * kBPitch * 2;
#else
        return stage + b[nj] + ks * kInstK * kBPitch * 2;
#endif
    }
};

__device__ __forceinline__ void load_a_frag(uint32_t (&a)[4], uint32_t addr) {
#if PG_TRANS_A
    ldsm_x4_trans(a, addr);
#else
    ldsm_x4(a, addr);
#endif
}
__device__ __forceinline__ void load_b_frags(uint32_t (&b0)[2], uint32_t (&b1)[2], uint32_t addr) {
    uint32_t r[4];
#if PG_TRANS_B
    ldsm_x4(r, addr);
#else
    ldsm_x4_trans(r, addr);
#endif
    b0[0] = r[0]; b0[1] = r[1];
    b1[0] = r[2]; b1[1] = r[3];
}

// All fragments of k16 step ks of the warp tile from one stage.
__device__ __forceinline__ void load_fragments(uint32_t (&af)[kMmaM][4], uint32_t (&bf)[kMmaN][2],
                                               const FragOffsets& fo, uint32_t sa, uint32_t sb,
                                               int ks) {
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi) load_a_frag(af[mi], fo.a_addr(sa, mi, ks));
#pragma unroll
    for (int nj = 0; nj < kMmaN / 2; ++nj)
        load_b_frags(bf[2 * nj], bf[2 * nj + 1], fo.b_addr(sb, nj, ks));
}

// One k16 step of the warp tile: the kMmaM x kMmaN mma on (af, bf), with the ldmatrix of the
// next step's fragments (stage sa/sb, step nks) spread between the mma rows so the shared-
// memory pipe and the tensor cores stay busy together.
__device__ __forceinline__ void warp_step(float (&acc)[kMmaM][kMmaN][4],
                                          const uint32_t (&af)[kMmaM][4],
                                          const uint32_t (&bf)[kMmaN][2],
                                          uint32_t (&an)[kMmaM][4], uint32_t (&bn)[kMmaN][2],
                                          const FragOffsets& fo, uint32_t sa, uint32_t sb,
                                          int nks) {
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi) {
        load_a_frag(an[mi], fo.a_addr(sa, mi, nks));
        if (mi < kMmaN / 2) load_b_frags(bn[2 * mi], bn[2 * mi + 1], fo.b_addr(sb, mi, nks));
#pragma unroll
        for (int ni = 0; ni < kMmaN; ++ni) mma_16816(acc[mi][ni], af[mi], bf[ni]);
    }
#pragma unroll
    for (int nj = kMmaM; nj < kMmaN / 2; ++nj)
        load_b_frags(bn[2 * nj], bn[2 * nj + 1], fo.b_addr(sb, nj, nks));
}

}  // namespace hgemm_v1
