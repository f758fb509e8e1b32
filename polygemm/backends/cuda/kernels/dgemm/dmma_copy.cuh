// dgemm/dmma_copy.cuh: the global -> shared copies of the FP64 tensor-core rungs (v1 and v2 built
// from dgemm/v1_dmma.cu, v3 from dgemm/v3_dmma_direct.cu): one operand tile per call, cp.async of
// 16 bytes (PG_VEC=1) or 8 bytes (PG_VEC=0), what lies outside the matrix zero-filled, into a
// dgemm::Tile of dgemm/dmma_config.cuh (its XOR swizzle applied on the way in).
#pragma once
#include "dgemm/dmma_config.cuh"

namespace dgemm {

// Global -> shared copies of one operand tile (kRows x kCols of T's layout) whose top-left
// element is g; rows_left / cols_left: rows and columns of the tile inside the matrix (<= 0:
// none). Elements outside read as zero. Thread tid copies rows r0 + i * kRowStep at one column
// c: one source pointer and shared offset, the rest immediates or one XOR (T::at_row).
template <class T, int kRows, int kCols>
__device__ __forceinline__ void issue_tile(uint32_t s, const double* g, int ld, int rows_left,
                                           int cols_left, int tid) {
    constexpr int kPer = PG_VEC ? 2 : 1;              // doubles per cp.async
    constexpr int kCpr = kCols / kPer, kRowStep = kThreads / kCpr;
    constexpr int kIters = kRows / kRowStep;
    static_assert(kThreads % kCpr == 0 && kRows % kRowStep == 0, "whole rows of copies per pass");
    const int r0 = tid / kCpr, c = (tid % kCpr) * kPer;
    const int n = cols_left - c;
    const int bytes = n <= 0 ? 0 : (n >= kPer ? 8 * kPer : 8);
    const double* src = g + r0 * ld + c;
    const uint32_t d0 = s + 8 * T::at(r0, c);
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
        const int r = r0 + i * kRowStep;
        const int nb = r < rows_left ? bytes : 0;
        // rows kRowStep apart with the same swizzle: one shared offset and immediates; else (an
        // MN-contiguous tile copied 1, 2 or 4 rows a pass: r0 < kRowStep) row r's swizzle is that
        // of i * kRowStep, known at compile time, XOR-ed into the thread's column
        uint32_t dst;
        if (T::same_swz(kRowStep)) dst = d0 + 8 * i * kRowStep * kCols;
        else if (4 % kRowStep == 0) dst = s + 8 * (r * kCols + 2 * ((c >> 1) ^ T::swz(i * kRowStep)) + (c & 1));
        else dst = s + 8 * T::at(r, c);
        if (PG_VEC) pg_cp_async<16>(dst, nb ? src + i * kRowStep * ld : g, nb);
        else        pg_cp_async<8>(dst, nb ? src + i * kRowStep * ld : g, nb);
    }
}

}  // namespace dgemm
