// Utility kernel of the CUDA backend (not a ladder rung): a copy that changes the pitch.
//
//   dst[line * dst_pitch + i] = src[line * src_pitch + i],  0 <= i < width, 0 <= line < lines
//
// (pitches and width in elements of 2 or 4 bytes). It moves an operand whose pointer or leading
// dimension is not 16-byte aligned into aligned scratch for a TMA rung, and a result back out.
// Why not cuMemcpy2DAsync: with unaligned pitches it measured ~0.5 TB/s on the H200. Why not one
// element a thread: 2-byte accesses move 64 bytes per warp instruction, about a third of the
// bandwidth 16-byte ones reach, and the copy is the whole cost of reading such an operand.
//
// Each thread moves 16-byte chunks of one side's lines, that side's accesses whole and aligned:
//   * dst aligned (a copy into scratch, dst_pitch and dst 16-byte aligned): a chunk is one 16-byte
//     store; its source, 2- or 4-byte aligned, is read as the five (four) aligned 32-bit words that
//     hold it, shifted into place (a funnel shift by the source's 2-byte phase). The fifth word
//     holds the chunk's last element, so every word read holds an element of the line.
//   * src aligned (a result copied out of scratch): a chunk is one 16-byte load, stored element by
//     element (the user's rows may start anywhere).
//   * neither: element by element.
// A line's last, partial chunk goes element by element on every path. The (line, chunk) pairs are
// walked flat, grid-stride, so short lines (a narrow result) still fill the blocks.
#include <stdint.h>

namespace repitch_detail {

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// 16 bytes from a 2-byte aligned address as four 32-bit words (aligned words read, then shifted).
__device__ __forceinline__ uint4 load_shifted(const unsigned char* s) {
    const uintptr_t addr = reinterpret_cast<uintptr_t>(s);
    if ((addr & 15u) == 0) return __ldg(reinterpret_cast<const uint4*>(s));
    const uint32_t* w = reinterpret_cast<const uint32_t*>(addr & ~static_cast<uintptr_t>(3));
    const uint32_t w0 = __ldg(w), w1 = __ldg(w + 1), w2 = __ldg(w + 2), w3 = __ldg(w + 3);
    if ((addr & 3u) == 0) return make_uint4(w0, w1, w2, w3);
    const uint32_t w4 = __ldg(w + 4);  // 2-byte phase: the chunk's last element is in a fifth word
    return make_uint4(__funnelshift_r(w0, w1, 16), __funnelshift_r(w1, w2, 16), __funnelshift_r(w2, w3, 16),
                      __funnelshift_r(w3, w4, 16));
}

template <typename T>
__device__ __forceinline__ void repitch(const T* __restrict__ src, long long src_pitch, T* __restrict__ dst,
                                        long long dst_pitch, long long width, long long lines) {
    constexpr int kPer = 16 / sizeof(T);  // elements per 16-byte chunk
    const long long chunks = (width + kPer - 1) / kPer;
    const long long total = chunks * lines;
    const bool dst_whole = aligned16(dst) && (dst_pitch * sizeof(T)) % 16 == 0;
    const bool src_whole = aligned16(src) && (src_pitch * sizeof(T)) % 16 == 0;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total; t += (long long)gridDim.x * blockDim.x) {
        const long long line = t / chunks;
        const long long i = (t - line * chunks) * kPer;
        const T* s = src + line * src_pitch + i;
        T* d = dst + line * dst_pitch + i;
        if (i + kPer <= width) {
            if (dst_whole) {
                *reinterpret_cast<uint4*>(d) = load_shifted(reinterpret_cast<const unsigned char*>(s));
                continue;
            }
            if (src_whole) {
                const uint4 v = __ldg(reinterpret_cast<const uint4*>(s));
                const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
                for (int u = 0; u < kPer; ++u) d[u] = e[u];
                continue;
            }
        }
        const int n = static_cast<int>(width - i < kPer ? width - i : kPer);
        for (int u = 0; u < n; ++u) d[u] = s[u];
    }
}

}  // namespace repitch_detail

extern "C" __global__ void __launch_bounds__(256)
pg_repitch_b16(const uint16_t* src, long long src_pitch, uint16_t* dst, long long dst_pitch,
               long long width, long long lines) {
    repitch_detail::repitch<uint16_t>(src, src_pitch, dst, dst_pitch, width, lines);
}

extern "C" __global__ void __launch_bounds__(256)
pg_repitch_b32(const uint32_t* src, long long src_pitch, uint32_t* dst, long long dst_pitch,
               long long width, long long lines) {
    repitch_detail::repitch<uint32_t>(src, src_pitch, dst, dst_pitch, width, lines);
}

// Two copies in one launch (blockIdx.y picks which): A and B into aligned scratch at once, one
// launch where two cost the host twice (a small product's call is paced by its launches).
#define PG_REPITCH2(SUFFIX, T)                                                                                     \
    extern "C" __global__ void __launch_bounds__(256) pg_repitch2_##SUFFIX(                                        \
        const T* src0, long long src_pitch0, T* dst0, long long dst_pitch0, long long width0, long long lines0,    \
        const T* src1, long long src_pitch1, T* dst1, long long dst_pitch1, long long width1, long long lines1) {  \
        if (blockIdx.y == 0) repitch_detail::repitch<T>(src0, src_pitch0, dst0, dst_pitch0, width0, lines0);     \
        else repitch_detail::repitch<T>(src1, src_pitch1, dst1, dst_pitch1, width1, lines1);                     \
    }
PG_REPITCH2(b16, uint16_t)
PG_REPITCH2(b32, uint32_t)
