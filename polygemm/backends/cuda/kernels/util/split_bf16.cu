// Utility kernel of the CUDA backend (not a ladder rung): a float32 operand split into bfloat16
// parts, laid out as the segments of one longer-K bfloat16 operand.
//
// A float32 value v is the sum of three bfloat16 values to within 2^-27 |v|:
//
//   hi = bf16(v),  mid = bf16(v - hi),  lo = bf16(v - hi - mid)
//
// (each difference is exact in float32; each rounding keeps 8 of the remaining bits). A float32
// product is then the sum of the six largest products of parts, smallest first,
//
//   A·B ~ lo_A·hi_B + hi_A·lo_B + mid_A·mid_B + hi_A·mid_B + mid_A·hi_B + hi_A·hi_B,
//
// dropping mid·lo, lo·mid and lo·lo (each under 2^-26 of |a||b|), and that sum is ONE bfloat16
// product of inner size 6K: A's parts side by side along K, B's stacked along K in the same order,
// computed by a bfloat16 rung accumulating in float32. Three segments (mid·hi, hi·mid, hi·hi) give
// one pass's error class instead. This kernel writes one operand's segments:
//
//   dst[line * dst_pitch + s * seg + j] = part(s) of src[line * src_pitch + j]
//
// for 0 <= line < lines, 0 <= j < width (multiples of 8 past the source's real_lines x real_width:
// zeros, the padding between segments and at the rows' ends). part(s) is 2-bit code s of
// `codes` (0 hi, 1 mid, 2 lo). A line runs along K (A row-major: seg is the padded K) or along
// M/N (B row-major: lines are k, and seg is the padded K times dst_pitch); either way each
// thread writes 8 elements (16 bytes) of every segment, aligned: dst, dst_pitch and seg are
// multiples of 8 elements.
//
// Values that are not finite (inf, nan) keep IEEE results: their parts are (v, 0, 0) in the last
// segment, the hi·hi product, and 0 in every other segment, where the partner's part could be 0
// (0·inf is nan where v·w is not). A finite v too large for bfloat16's range (over 2^128 - 2^120)
// takes hi rounded toward zero, so no part overflows.
#include <cuda_bf16.h>
#include <stdint.h>

namespace split_detail {

struct Parts {
    __nv_bfloat16 hi, mid, lo;
    bool finite;

    // part `code` (0 hi, 1 mid, 2 lo) by selects, not an indexed array (which would live in local memory)
    __device__ __forceinline__ __nv_bfloat16 part(int code) const { return code == 0 ? hi : code == 1 ? mid : lo; }
};

__device__ __forceinline__ Parts split(float v) {
    Parts r;
    if (!isfinite(v)) {
        r.hi = __float2bfloat16_rn(v);  // inf stays inf, nan stays nan
        r.mid = r.lo = __float2bfloat16_rn(0.f);
        r.finite = false;
        return r;
    }
    __nv_bfloat16 hi = __float2bfloat16_rn(v);
    if (isinf(__bfloat162float(hi))) hi = __float2bfloat16_rz(v);
    const float r1 = v - __bfloat162float(hi);  // exact
    const __nv_bfloat16 mid = __float2bfloat16_rn(r1);
    const float r2 = r1 - __bfloat162float(mid);  // exact
    r.hi = hi;
    r.mid = mid;
    r.lo = __float2bfloat16_rn(r2);
    r.finite = true;
    return r;
}

__device__ __forceinline__ uint32_t pack2(__nv_bfloat16 lo, __nv_bfloat16 hi) {
    return static_cast<uint32_t>(__bfloat16_as_ushort(lo)) | (static_cast<uint32_t>(__bfloat16_as_ushort(hi)) << 16);
}

}  // namespace split_detail

extern "C" __global__ void __launch_bounds__(256)
pg_split_bf16(long long lines, long long width, long long real_lines, long long real_width,
              const float* __restrict__ src, long long src_pitch, __nv_bfloat16* __restrict__ dst,
              long long dst_pitch, long long seg, int segments, int codes) {
    using namespace split_detail;
    const long long chunks = width >> 3;  // 8 elements a chunk
    const long long total = lines * chunks;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const long long line = t / chunks;
        const long long j = (t - line * chunks) << 3;
        float v[8];
        const float* s = src + line * src_pitch + j;
        if (line < real_lines && j + 8 <= real_width && (reinterpret_cast<uintptr_t>(s) & 15u) == 0) {
            const float4 x = __ldg(reinterpret_cast<const float4*>(s));
            const float4 y = __ldg(reinterpret_cast<const float4*>(s) + 1);
            v[0] = x.x; v[1] = x.y; v[2] = x.z; v[3] = x.w;
            v[4] = y.x; v[5] = y.y; v[6] = y.z; v[7] = y.w;
        } else {
#pragma unroll
            for (int e = 0; e < 8; ++e) v[e] = (line < real_lines && j + e < real_width) ? __ldg(s + e) : 0.f;
        }
        Parts parts[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) parts[e] = split(v[e]);
        __nv_bfloat16* d = dst + line * dst_pitch + j;
        const __nv_bfloat16 zero = __float2bfloat16_rn(0.f);
        for (int sgm = 0; sgm < segments; ++sgm) {
            const int code = (codes >> (2 * sgm)) & 3;
            const bool last = sgm == segments - 1;
            __nv_bfloat16 w[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) w[e] = (parts[e].finite || last) ? parts[e].part(code) : zero;
            const uint4 chunk = make_uint4(pack2(w[0], w[1]), pack2(w[2], w[3]), pack2(w[4], w[5]), pack2(w[6], w[7]));
            *reinterpret_cast<uint4*>(d + sgm * seg) = chunk;
        }
    }
}
