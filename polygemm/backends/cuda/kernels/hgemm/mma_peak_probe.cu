// mma_peak_probe: the throughput ceiling of mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// on the device, with no memory traffic at all: the roofline the ldmatrix + mma.sync rung is
// read against (`polygemm ceiling`). Not a GEMM rung.
//
// Launch: blockDim (256, 1, 1), any grid (the harness uses several blocks per SM so every SM
// sub-partition holds several warps). Every warp runs `iters` rounds of kChains independent
// mma.sync (independent accumulators, so the tensor pipe, not the mma latency, limits) on
// fragments built from ab[0..5] (fp16x2 words: a0..a3, b0, b1), accumulating from zero;
// thread t writes the sum of its kChains x 4 accumulators to out[blockIdx.x * 256 + t].
// With every fp16 input equal to x, each mma adds 16 * x * x to each accumulator, so every
// output is kChains * 4 * iters * 16 * x * x (the GPU test checks that). One mma is
// 2 * 16 * 8 * 16 = 4096 FLOP.
// requires: sm_80 (mma.sync m16n8k16 in fp16; `polygemm compile` builds it for sm_80 and newer only)

#include <stdint.h>

#define PROBE_CHAINS 16

extern "C" __global__ void __launch_bounds__(256)
hgemm_mma_peak_probe(const uint32_t* __restrict__ ab, float* __restrict__ out, int iters)
{
    const uint32_t a0 = ab[0], a1 = ab[1], a2 = ab[2], a3 = ab[3], b0 = ab[4], b1 = ab[5];
    float acc[PROBE_CHAINS][4];
#pragma unroll
    for (int c = 0; c < PROBE_CHAINS; ++c)
        acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0.f;
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int c = 0; c < PROBE_CHAINS; ++c)
            asm volatile(  // volatile: every mma is issued, none is folded
                "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                : "+f"(acc[c][0]), "+f"(acc[c][1]), "+f"(acc[c][2]), "+f"(acc[c][3])
                : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < PROBE_CHAINS; ++c) s += (acc[c][0] + acc[c][1]) + (acc[c][2] + acc[c][3]);
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
