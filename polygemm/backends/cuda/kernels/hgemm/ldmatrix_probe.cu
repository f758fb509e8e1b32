// ldmatrix_probe: reproduces seed 003's ldmatrix experiment as a test kernel (not a GEMM rung).
// Launch with ONE warp: blockDim (32, 1, 1), gridDim (1, 1, 1), no dynamic shared memory.
//
// The kernel copies the 32 x 32 16-bit values src[0..1023] (raw bits, e.g. fp16 or small
// integers) into a 16-byte-aligned shared array s[1024], lets lane l supply the address
// &s[row_offsets[l]] (an element offset; it must be a multiple of 8 and at most 1016 so the
// 8-element row is 16-byte aligned and inside s), executes
//     ldmatrix.sync.aligned.m8n8.{x1|x2|x4}{.trans}.shared.b16
// with num = 1, 2 or 4 and trans = 0 / 1, and writes lane l's destination register r to
// out[l*4 + r] (r < num; registers the instruction does not produce are written as 0).
// Each register packs two 16-bit elements, the lower-addressed / lower-column one in bits 0-15.
// Only lanes 0-7 (x1), 0-15 (x2) or 0-31 (x4) supply addresses; the rest are ignored by the
// hardware (they must still be valid shared addresses, which any in-range offset is).
// PTX-documented mapping (no .trans): register j of lane t = elements (t/4, 2*(t%4)) and
// (t/4, 2*(t%4)+1) of matrix j, whose row q starts at the address given by lane 8*j + q;
// with .trans the same positions of the transposed matrix: (2*(t%4), t/4) and (2*(t%4)+1, t/4).
// requires: sm_75 (ldmatrix; `polygemm compile` builds it for sm_75 and newer only)

#include <stdint.h>

extern "C" __global__ void ldmatrix_probe(const unsigned short* src, const int* row_offsets,
                                          unsigned* out, int trans, int num)
{
    __shared__ __align__(16) unsigned short s[32 * 32];
    for (int i = threadIdx.x; i < 32 * 32; i += blockDim.x) s[i] = src[i];
    __syncthreads();
    if (threadIdx.x >= 32) return;

    const int lane = threadIdx.x;
    const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(s + row_offsets[lane]));
    uint32_t r0 = 0, r1 = 0, r2 = 0, r3 = 0;
    // trans and num are kernel arguments, uniform across the warp, so every branch is taken by
    // the whole warp as .sync.aligned requires.
    if (num == 1) {
        if (trans)
            asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                         : "=r"(r0) : "r"(addr));
        else
            asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
                         : "=r"(r0) : "r"(addr));
    } else if (num == 2) {
        if (trans)
            asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                         : "=r"(r0), "=r"(r1) : "r"(addr));
        else
            asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                         : "=r"(r0), "=r"(r1) : "r"(addr));
    } else if (num == 4) {
        if (trans)
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
        else
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
    }
    out[lane * 4 + 0] = r0;
    out[lane * 4 + 1] = r1;
    out[lane * 4 + 2] = r2;
    out[lane * 4 + 3] = r3;
}
