// The wgmma rung's staged epilogue (HG2_EPILOGUE=1, the default): each consumer warp's
// accumulator rows pass through its own shared buffer so that C is written with coalesced
// 16-byte stores.
#pragma once
#include "hgemm/wgmma_epilogue_direct.cuh"

namespace hgemm_v2 {

// ------------------------------------------------------------------------------------------
// Staged epilogue (HG2_EPILOGUE=1). Why: the fragment layout gives each store instruction
// 8 rows x 16 bytes (fp16) -- half-used 32-byte sectors and kBN/4 store instructions per row
// pair. Instead each consumer warp moves its 16 rows through its own 16 x 128-byte shared
// buffer one 128-byte column chunk at a time (stmatrix.x4 for a 16-bit C, st.shared.v2.f32
// for fp32 values) and reads the chunk back one 16-byte vector per lane: each store
// instruction then writes 4 whole 128-byte row segments of C. beta != 0 with a 16-bit C
// stages fp32 alpha*acc (32-column chunks) so that alpha*acc + beta*C is rounded once.
// Element conversions live in out_pack2 / out_unpack2 (one place for another 16-bit type).
// ------------------------------------------------------------------------------------------
// 16-byte unit u of staged row r sits at unit u ^ epi_swz(r): the 8 rows of one stmatrix
// 8x8 matrix (one unit) land in 8 distinct units, and so do the 4 rows x 2 units a half-warp
// writes with st.shared.v2.f32 -- both without bank conflicts; reads take whole rows.
__device__ __forceinline__ uint32_t epi_addr(uint32_t buf, int r, int u) {
    const int swz = ((r & 3) << 1) | ((r >> 2) & 1);
    return buf + static_cast<uint32_t>(r * kEpiRowBytes + ((u ^ swz) << 4));
}
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                            uint32_t r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
                 "r"(r0), "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}
__device__ __forceinline__ void sts_f32x2(uint32_t addr, float a, float b) {
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(a), "f"(b) : "memory");
}
__device__ __forceinline__ uint4 lds_128(uint32_t addr) {
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(addr)
                 : "memory");
    return v;
}
// Two 16-bit outputs in one 32-bit word (lo in the low half: the lower column), and back.
__device__ __forceinline__ uint32_t out_pack2(float lo, float hi) {
    const pg_half2 h = pg_floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ float2 out_unpack2(uint32_t w) {
    return pg_half22float2(*reinterpret_cast<const pg_half2*>(&w));
}

// Row segment stores of one lane: `left` = N - (its first column); 16 bytes when whole and
// 16-byte aligned. A C whose pointer or leading dimension is not (rows of 700 or 1009 halves) is
// written in place element by element, where an aligned copy of it would cost a launch and a pass.
__device__ __forceinline__ bool aligned_to(const void* p, unsigned bytes) {
    return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}
// 8 16-bit outputs (packed pairs in v).
__device__ __forceinline__ void put8_16bit(OutT* p, uint4 v, int left) {
    if (left >= 8 && aligned_to(p, 16)) {
        *reinterpret_cast<uint4*>(p) = v;
    } else {
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
        uint16_t* q = reinterpret_cast<uint16_t*>(p);
#pragma unroll
        for (int e = 0; e < 8; ++e)
            if (e < left) q[e] = static_cast<uint16_t>(w[e / 2] >> (16 * (e % 2)));
    }
}
// 4 fp32 values v (already alpha * acc): + beta * C when beta != 0, stored as OutT.
__device__ __forceinline__ void put4_f32(OutT* p, float4 v, int left, float beta) {
#if PG_OUT_F32
    if (left >= 4 && aligned_to(p, 16)) {
        float4* q = reinterpret_cast<float4*>(p);
        if (beta != 0.f) {
            const float4 o = *q;
            v.x = fmaf(beta, o.x, v.x);
            v.y = fmaf(beta, o.y, v.y);
            v.z = fmaf(beta, o.z, v.z);
            v.w = fmaf(beta, o.w, v.w);
        }
        *q = v;
    } else {
        const float f[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int e = 0; e < 4; ++e)
            if (e < left) p[e] = beta != 0.f ? fmaf(beta, p[e], f[e]) : f[e];
    }
#else
    if (left >= 4 && aligned_to(p, 8)) {
        uint2* q = reinterpret_cast<uint2*>(p);
        if (beta != 0.f) {
            const uint2 o = *q;
            const float2 o0 = out_unpack2(o.x), o1 = out_unpack2(o.y);
            v.x = fmaf(beta, o0.x, v.x);
            v.y = fmaf(beta, o0.y, v.y);
            v.z = fmaf(beta, o1.x, v.z);
            v.w = fmaf(beta, o1.y, v.w);
        }
        *q = make_uint2(out_pack2(v.x, v.y), out_pack2(v.z, v.w));
    } else {
        const float f[4] = {v.x, v.y, v.z, v.w};
        uint16_t* q = reinterpret_cast<uint16_t*>(p);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            if (e < left) {
                float x = f[e];
                if (beta != 0.f) x = fmaf(beta, out_unpack2(q[e]).x, x);
                q[e] = static_cast<uint16_t>(out_pack2(x, 0.f));
            }
        }
    }
#endif
}

// 64-column chunk c of one consumer warp's 16 accumulator rows, times alpha, as 16-bit pairs
// into a staged buffer: one stmatrix.x4 takes n8 blocks j, j+1 (rows 0-7 and 8-15 of each),
// lane l giving row l%8 (+8) of matrix l/8. addr(r, u): the address of 16-byte unit u of row r
// (each buffer's own swizzle).
template <typename Addr>
__device__ __forceinline__ void stage_chunk16(const float (&d)[kAcc], int c, float alpha, int lane, Addr addr) {
    const int mi = lane >> 3;
    const int srow = (mi & 1) * 8 + (lane & 7);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const int j = 8 * c + 2 * q;
        stmatrix_x4(addr(srow, 2 * q + (mi >> 1)), out_pack2(alpha * d[4 * j], alpha * d[4 * j + 1]),
                    out_pack2(alpha * d[4 * j + 2], alpha * d[4 * j + 3]),
                    out_pack2(alpha * d[4 * j + 4], alpha * d[4 * j + 5]),
                    out_pack2(alpha * d[4 * j + 6], alpha * d[4 * j + 7]));
    }
}

// One consumer warp's 16 accumulator rows of one m64 block (fragment: n8 block j in
// d[4j..4j+3], rows lane/4 and lane/4 + 8) to C rows row0.., columns n0.., through `buf`.
__device__ __forceinline__ void epilogue_staged(const float (&d)[kAcc], uint32_t buf,
                                                OutT* __restrict__ C, int ldc, int row0, int n0,
                                                int M, int N, float alpha, float beta, int lane) {
    if (row0 >= M) return;  // warp-uniform: none of its rows exists
    __syncwarp();           // stmatrix is .sync.aligned; the buffer's last reads are done
    const int rr = lane >> 3, uu = lane & 7;  // read side: rows rr + 4p, 16-byte unit uu
#if !PG_OUT_F32
    if (beta == 0.f) {
        // 64-column chunks of 16-bit results (stage_chunk16)
#pragma unroll
        for (int c = 0; c < kBN / 64; ++c) {
            if (n0 + 64 * c >= N) break;  // warp-uniform
            stage_chunk16(d, c, alpha, lane, [buf](int r, int u) { return epi_addr(buf, r, u); });
            __syncwarp();
#pragma unroll
            for (int p = 0; p < 4; ++p) {
                const int r = 4 * p + rr;
                const uint4 v = lds_128(epi_addr(buf, r, uu));
                const int row = row0 + r, col = n0 + 64 * c + 8 * uu;
                if (row < M && col < N) put8_16bit(C + static_cast<size_t>(row) * ldc + col, v, N - col);
            }
            __syncwarp();
        }
        return;
    }
#endif
    // 32-column chunks of fp32 values; lane l holds row l/4 (+8), columns 2(l%4) + {0, 1} of
    // each n8 block: unit 2jj + (l%4)/2, byte 8 * (l%2) within it.
    const int srow = lane >> 2;
    const int su = (lane & 3) >> 1;
    const uint32_t sbyte = (lane & 1) * 8;
#pragma unroll
    for (int c = 0; c < kBN / 32; ++c) {
        if (n0 + 32 * c >= N) break;  // warp-uniform
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
            const int j = 4 * c + jj;
#pragma unroll
            for (int h = 0; h < 2; ++h)
                sts_f32x2(epi_addr(buf, srow + 8 * h, 2 * jj + su) + sbyte, alpha * d[4 * j + 2 * h],
                          alpha * d[4 * j + 2 * h + 1]);
        }
        __syncwarp();
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            const int r = 4 * p + rr;
            const uint4 w = lds_128(epi_addr(buf, r, uu));
            const float4 v = make_float4(__uint_as_float(w.x), __uint_as_float(w.y),
                                         __uint_as_float(w.z), __uint_as_float(w.w));
            const int row = row0 + r, col = n0 + 32 * c + 4 * uu;
            if (row < M && col < N) put4_f32(C + static_cast<size_t>(row) * ldc + col, v, N - col, beta);
        }
        __syncwarp();
    }
}

}  // namespace hgemm_v2
