// The wgmma rung's TMA-store epilogue (HG2_EPILOGUE=3): the staged buffers leave for C through
// a third tensor map (tmap_c, a kernel parameter only in these builds). The functions are
// defined in every build (unused ones emit no code) so that the kernel tests kTmaStore rather
// than the macro.
#pragma once
#include "hgemm/wgmma_epilogue_staged.cuh"

#if HG2_EPILOGUE == 3
#define HG2_TMAP_C_PARAM const __grid_constant__ CUtensorMap tmap_c,
#else
#define HG2_TMAP_C_PARAM
#endif

namespace hgemm_v2 {

// ------------------------------------------------------------------------------------------
// TMA-store epilogue (HG2_EPILOGUE=3). Why: the staged epilogue's read-back and 16-byte global
// stores are issued by every lane and wait in the LSU when all SMs store their tiles at once;
// here each 16 x 64 chunk goes from the warp's buffer to C by one cp.async.bulk.tensor that
// lane 0 issues, and the warp stages the next chunk (two buffers) or starts its next tile
// while the copy drains. The buffer is laid out as the tensor map's 128-byte swizzle wants
// (16-byte unit u of row r at unit u ^ (r % 8)), which is also conflict-free for stmatrix.
// TMA clips the rows past M and columns past N.
// ------------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t epi_addr_tma(uint32_t buf, int r, int u) {
    return buf + static_cast<uint32_t>(r * kEpiRowBytes + ((u ^ (r & 7)) << 4));
}
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, uint32_t src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                     reinterpret_cast<uint64_t>(map)),
                 "r"(src), "r"(c0), "r"(c1)
                 : "memory");
}
// Lane 0's bulk copies: commit the ones issued, wait until at most N groups still read shared
// memory (or, bulk_wait_all, until all are complete).
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// One consumer warp's 16 accumulator rows of one m64 block (beta == 0, 16-bit C) to C rows
// row0.., columns n0.., through its buffers buf and buf + kEpiWarpBytes.
__device__ __forceinline__ void epilogue_tma(const float (&d)[kAcc], uint32_t buf, const CUtensorMap* tmap_c,
                                             int row0, int n0, int M, int N, float alpha, int lane) {
    if (row0 >= M) return;  // warp-uniform: none of its rows exists
    if (lane == 0) bulk_wait_read<0>();  // the last tile's copies have left both buffers
    __syncwarp();
#pragma unroll
    for (int c = 0; c < kBN / 64; ++c) {
        if (n0 + 64 * c >= N) break;  // warp-uniform
        const uint32_t b = buf + (c & 1) * kEpiWarpBytes;
        if (c >= 2) {  // this buffer's copy (chunk c - 2) has read it
            if (lane == 0) bulk_wait_read<1>();
            __syncwarp();
        }
        stage_chunk16(d, c, alpha, lane, [b](int r, int u) { return epi_addr_tma(b, r, u); });
        // the shared writes (generic proxy) become visible to the copy (async proxy)
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncwarp();
        if (lane == 0) {
            tma_store_2d(tmap_c, b, n0 + 64 * c, row0);
            bulk_commit();
        }
    }
}

}  // namespace hgemm_v2
