// Utility kernel of the CUDA backend (not a ladder rung): a copy that changes the pitch.
//
//   dst[line * dst_pitch + i] = src[line * src_pitch + i],  0 <= i < width, 0 <= line < lines
//
// (pitches and width in elements). It moves an operand whose pointer or leading dimension is
// not 16-byte aligned into aligned scratch for a TMA rung, and a result back out. Why not
// cuMemcpy2DAsync: with unaligned pitches it measured ~0.5 TB/s on the H200; here each warp
// moves 32 consecutive elements per access (coalesced whatever the alignment), and a block's
// threads walk one line with 4 accesses in flight each. blockIdx.y strides over the lines.
#include <stdint.h>

template <typename T>
__device__ __forceinline__ void repitch(const T* __restrict__ src, long long src_pitch,
                                        T* __restrict__ dst, long long dst_pitch, long long width,
                                        long long lines) {
    constexpr int kUnroll = 4;
    const long long span = (long long)blockDim.x * kUnroll;
    for (long long line = blockIdx.y; line < lines; line += gridDim.y) {
        const T* s = src + line * src_pitch;
        T* d = dst + line * dst_pitch;
        for (long long base = (long long)blockIdx.x * span; base < width; base += (long long)gridDim.x * span) {
            T v[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const long long i = base + u * blockDim.x + threadIdx.x;
                if (i < width) v[u] = s[i];
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const long long i = base + u * blockDim.x + threadIdx.x;
                if (i < width) d[i] = v[u];
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(256)
pg_repitch_b16(const uint16_t* src, long long src_pitch, uint16_t* dst, long long dst_pitch,
               long long width, long long lines) {
    repitch<uint16_t>(src, src_pitch, dst, dst_pitch, width, lines);
}

extern "C" __global__ void __launch_bounds__(256)
pg_repitch_b32(const uint32_t* src, long long src_pitch, uint32_t* dst, long long dst_pitch,
               long long width, long long lines) {
    repitch<uint32_t>(src, src_pitch, dst, dst_pitch, width, lines);
}
