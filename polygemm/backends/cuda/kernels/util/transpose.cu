// Utility kernel of the CUDA backend (not a ladder rung): a copy that changes an operand's layout.
//
//   dst[i * dst_pitch + line] = src[line * src_pitch + i],  0 <= i < width, 0 <= line < lines
//
// (pitches and width in elements of 8 bytes). It moves a float64 operand stored the other way
// round from what the FP64 tensor-core rung reads at full speed (dgemm/v3_dmma_direct.cu: A and B
// both row-major or both column-major) into scratch of the other layout, so that the rung reads
// both operands with 16-byte fragment loads.
//
// Why a tile through shared memory: reading lines and writing columns directly makes one of the
// two sides 8-byte accesses a warp spread over 32 lines (32 sectors a request). Here a block
// moves a 32 x 32 tile: each warp reads 32 consecutive elements of a source line (256 bytes, whole
// sectors) and writes 32 consecutive elements of a destination line. The tile's rows are padded
// by one element, so that the column a warp reads back out of shared memory falls on 32 distinct
// banks pairs. Tiles are walked grid-stride along the lines, so any number of lines fits the grid.
#include <stdint.h>

namespace transpose_detail {

constexpr int kTile = 32, kRows = 8;  // a 32 x 32 tile, blockDim (32, 8): 4 elements a thread each way

template <typename T>
__device__ __forceinline__ void transpose(const T* __restrict__ src, long long src_pitch, T* __restrict__ dst,
                                          long long dst_pitch, long long width, long long lines) {
    __shared__ T tile[kTile][kTile + 1];
    const long long i0 = static_cast<long long>(blockIdx.x) * kTile;  // the tile's first element of a line
    const long long line_tiles = (lines + kTile - 1) / kTile;
    for (long long lt = blockIdx.y; lt < line_tiles; lt += gridDim.y) {
        const long long l0 = lt * kTile;
#pragma unroll
        for (int r = threadIdx.y; r < kTile; r += kRows) {  // source line l0 + r, elements i0 + threadIdx.x
            const long long line = l0 + r, i = i0 + threadIdx.x;
            if (line < lines && i < width) tile[r][threadIdx.x] = src[line * src_pitch + i];
        }
        __syncthreads();
#pragma unroll
        for (int r = threadIdx.y; r < kTile; r += kRows) {  // destination line i0 + r, elements l0 + threadIdx.x
            const long long i = i0 + r, line = l0 + threadIdx.x;
            if (line < lines && i < width) dst[i * dst_pitch + line] = tile[threadIdx.x][r];
        }
        __syncthreads();  // the tile is read out before the next one is written
    }
}

}  // namespace transpose_detail

extern "C" __global__ void __launch_bounds__(256)
pg_transpose_b64(const uint64_t* src, long long src_pitch, uint64_t* dst, long long dst_pitch,
                 long long width, long long lines) {
    transpose_detail::transpose<uint64_t>(src, src_pitch, dst, dst_pitch, width, lines);
}
