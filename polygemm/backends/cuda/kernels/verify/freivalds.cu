// Utility kernels of the CUDA backend (not a ladder rung): the verify= check of a product, made on the
// device where the product ran, on the call's stream (a Freivalds test: C·r against alpha·A·(B·r) +
// beta·C0·r for a fresh random r of ±1; polygemm/verification/threshold.py derives its threshold).
//
//   pg_verify_matvec_<t>_m<w>:  y[b*rows + i] = sum_j X(b, i, j) * v_j
//                               z[b*rows + i] = w ? sum_j |X(b, i, j)| * w[b*wbs + j] : sum_j X(b, i, j)^2
//
// for 0 <= i < rows, 0 <= j < cols, 0 <= b < batch, where X(b, i, j) = X[b*bs + i*rs + j*cs] (strides in
// elements, 64-bit: a row- or column-major matrix of any leading dimension, a transposed view of one, a
// batch, or a batch broadcast with bs = 0); v_j is v[b*vbs + j]. Inputs float32, float16 or bfloat16,
// sums in float32, compensated (Kahan) for y, whose rounding enters the threshold (along a row, each 16-byte
// vector's terms summed by fused multiply-adds first); z's in float64, since
// squares of float32 values (1e-25 or 1e20) would underflow or overflow float32, and z only scales the
// threshold. The walk w (one entry each) is how threads walk X: along a row (1: cs == 1, one warp per
// row, the lanes over j, coalesced; 2: the same with 16-byte loads, for rows that start on 16-byte
// boundaries) or across rows (0: rs == 1, one thread per row, 32 rows a block, its 8 warps over slices of
// j, coalesced across the rows; 3: a thread 16 bytes of adjacent rows, 32 such a block). A
// matrix-vector product is bound by memory: the scalar paths keep 4 loads a thread in flight, the
// vectorized ones four (across rows) or four steps (along a row) of 16 bytes (one 2-byte load at a time would leave most of the memory idle). blockIdx.y
// takes one of gridDim.y slices of j, so that a matrix of few long rows (the B of a skinny product) still
// fills the device: its slices' sums are added to y and z with atomics (zeroed before the launch), one
// more rounding each, which the threshold allows for. blockIdx.z walks the batch. So C·r, B·r and
// A·(B·r) cost one read of C, B and A each, and the sums of squares (B's row norms, C's) come in the
// same read.
//
//   pg_verify_matvec_judge_<t>_m<w>: the same walk, each row's sums judged at once (pgv_judge, below) instead of
//                          stored: the last pass (A's), where each row is in one block (no slices)
//
//   pg_verify_prepare:  zeroes the record and the sums that slices add into, and writes r[j] = ±1 for 0 <= j < n
//                       from `seed` by a hash of (seed, j)
//
// the check's random vector, made on the device (nothing is uploaded per call) once per check and read
// by every pass from cache (a hash per element would cost the matrix-vector loops more than their loads).
//
//   pg_verify_norms:    out[i] = sqrt(sq[i]), float64 sums of squares to float32 norms (B's rows', where its pass
//                       was sliced; an unsliced pass stores them itself)
//
//   pg_verify_compare:  per row t < total, got = yC[t], want = alpha*yA[t] + beta*yC0[t],
//                       threshold = ka*|alpha|*zA[t] + kc0*|beta|*||C0_t|| + t0 + kc*||C_t||
//
// and the row fails when |got - want| > threshold, or got is NaN or infinite where the operands explain
// neither (no element of the row can overflow the result's dtype). A row whose operand terms are not
// finite is not checked (counted). The findings go to one small record (counts, the worst ratio of the
// rows that passed, the first few failed rows): the host reads back that record, not the vectors, which the last
// launch's last block writes into mapped page-locked memory (pgv_publish). A check is so four launches (prepare, C, B,
// A judged; C0 and the sliced cases' norms and compare besides) and one wait.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float pgv_float(float v) { return v; }
__device__ __forceinline__ float pgv_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float pgv_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// The matrix's 16-byte loads: read once and never again, so kept out of L1, where the vectors v
// and w, read by every row, stay (measured on the H100: 8192^2 passes 2.26 -> 2.78 TB/s in float32,
// 2.05 -> 2.29 in float16; a 256-byte L2 prefetch on top gained nothing).
__device__ __forceinline__ uint4 pgv_stream16(const void* p) {
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}

// 16 bytes of elements (4 float32, 8 float16 or bfloat16) as floats: the vectorized paths' loads
__device__ __forceinline__ void pgv_unpack(uint4 raw, float* out, const float*) {
    out[0] = __uint_as_float(raw.x), out[1] = __uint_as_float(raw.y), out[2] = __uint_as_float(raw.z), out[3] = __uint_as_float(raw.w);
}
__device__ __forceinline__ float pgv_bits(unsigned int b, const __half*) { return __half2float(__ushort_as_half((unsigned short)b)); }
__device__ __forceinline__ float pgv_bits(unsigned int b, const __nv_bfloat16*) {
    return __bfloat162float(__ushort_as_bfloat16((unsigned short)b));
}
template <typename T>
__device__ __forceinline__ void pgv_unpack(uint4 raw, float* out, const T* tag) {
    const unsigned int w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        out[2 * k] = pgv_bits(w[k] & 0xffffu, tag);
        out[2 * k + 1] = pgv_bits(w[k] >> 16, tag);
    }
}

// murmur3's 32-bit finalizer of (j, seed): independent-looking signs for each j, any seed
__device__ __forceinline__ float pgv_sign(unsigned long long seed, long long j) {
    unsigned int x = (unsigned int)j * 0x9E3779B1u ^ (unsigned int)seed ^ ((unsigned int)(seed >> 32) * 0x85EBCA6Bu);
    x ^= x >> 16;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    x *= 0xC2B2AE35u;
    x ^= x >> 16;
    return (x & 1u) ? 1.f : -1.f;
}

// zeroes `words` 32-bit words at `zero` (the record and the sums that slices add into) and writes r: one launch
extern "C" __global__ void __launch_bounds__(256) pg_verify_prepare(long long words, unsigned int* __restrict__ zero, long long n,
                                                                      unsigned long long seed, float* __restrict__ r) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < words; j += step) zero[j] = 0u;
    for (long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x; j < n; j += step) r[j] = pgv_sign(seed, j);
}

// sqrt of a float64 sum of squares, as float32, through float32's sqrt on its mantissa scaled by an even power
// of two (float64's sqrt has a slow path whose call spills registers on sm_80)
__device__ __forceinline__ float pgv_sqrt(double s) {
    if (!(s >= 2.2250738585072014e-308)) return s >= 0.0 ? 0.f : __int_as_float(0x7fc00000);  // 0 (or tinier), NaN
    if (s > 1.7976931348623157e308) return __int_as_float(0x7f800000);
    const int e = ((__double2hiint(s) >> 20) & 0x7ff) - 1023;
    const int k = e & ~1;  // s = m * 2^k, m in [1, 4)
    const double m = s * __hiloint2double((1023 - k) << 20, 0);
    return (float)((double)sqrtf((float)m) * __hiloint2double((1023 + k / 2) << 20, 0));
}

extern "C" __global__ void __launch_bounds__(256) pg_verify_norms(long long n, const double* __restrict__ sq, float* __restrict__ out) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = pgv_sqrt(sq[i]);
}

// Kahan's compensated sum: s - c is the sum, c the rounding error caught so far
struct PgvKahan {
    float s = 0.f, c = 0.f;
    __device__ __forceinline__ void add(float x) {
        const float y = x - c;
        const float t = s + y;
        c = (t - s) - y;
        s = t;
    }
};

constexpr int kPgvWarps = 8;   // warps a block (blockDim = 32 x 8)
constexpr int kPgvUnroll = 4;  // loads each thread keeps in flight (scalar paths)
#ifndef PGV_VEC_UNROLL
#define PGV_VEC_UNROLL 4
#endif
#ifndef PGV_ALONG_UNROLL
#define PGV_ALONG_UNROLL 4
#endif
constexpr int kPgvVecUnroll = PGV_VEC_UNROLL;  // 16-byte loads each thread keeps in flight across rows, their terms summed together (4: float16 passes 14% faster than 2 on the H100, float32 the same)
constexpr int kPgvAlongUnroll = PGV_ALONG_UNROLL;  // along a row: 2 KB a warp, some 32 KB an SM (8 measured no faster on the H100)

__device__ __forceinline__ void pgv_store(float* __restrict__ out, float v) {
    if (gridDim.y == 1) *out = v;   // the whole row in one block: stored
    else atomicAdd(out, v);         // a slice of it: added to the zeroed sum
}
__device__ __forceinline__ void pgv_store(double* __restrict__ out, double v) {
    if (gridDim.y == 1) *out = v;
    else atomicAdd(out, v);
}

// Lanes a row in the passes along rows: the fewest, a power of two up to 32, whose `per` elements each cover a slice
// of `len` (uniform across a block: every warp of it walks the same slice; a shorter last slice may take fewer).
__device__ __forceinline__ int pgv_lanes(long long len, int per) {
    int lanes = 32;
    while (lanes > 1 && (long long)(lanes / 2) * per >= len) lanes >>= 1;
    return lanes;
}

// A row's sums from its `lanes` lanes (each group of `lanes` adjacent lanes holds one row), handed to `emit` for row
// `t` by the group's first lane where `store` (every lane of the warp takes part in the shuffles).
template <typename Emit>
__device__ __forceinline__ void pgv_row_sums(const PgvKahan& acc, double sq, int lanes, bool store, Emit& emit, long long t) {
    float s = acc.s, c = acc.c;
    for (int off = lanes / 2; off > 0; off >>= 1) {
        s += __shfl_down_sync(0xffffffffu, s, off, lanes);
        c += __shfl_down_sync(0xffffffffu, c, off, lanes);
        sq += __shfl_down_sync(0xffffffffu, sq, off, lanes);
    }
    if (store) emit(t, s - c, sq);
}

template <int kMode, typename T, typename Emit>
__device__ __forceinline__ void pgv_matvec(long long rows, long long cols, long long batch, const T* __restrict__ X,
                                           long long rs, long long cs, long long bs, const float* __restrict__ v,
                                           long long vbs, const float* __restrict__ w, long long wbs, Emit& emit) {
    constexpr int E = 16 / sizeof(T);  // elements in 16 bytes
    const int lane = threadIdx.x, slice = threadIdx.y;
    // blockIdx.y takes one of gridDim.y slices of j: a matrix of few rows still fills the device
    // (a multiple of 256 elements: each slice starts on a 16-byte boundary of an aligned row)
    const long long chunk = ((cols + gridDim.y - 1) / gridDim.y + 255) / 256 * 256;
    const long long jb = blockIdx.y * chunk, je = jb + chunk < cols ? jb + chunk : cols;
    for (long long b = blockIdx.z; b < batch; b += gridDim.z) {
        const T* xb = X + b * bs;
        const float* vb = v + b * vbs;
        const float* wb = w != nullptr ? w + b * wbs : nullptr;
        if constexpr (kMode == 2) {  // one warp a row, lanes over 16-byte vectors of it (rows 16-byte aligned)
            // v and w read 16 bytes at a time as well where they start on 16-byte boundaries: one float a load, the
            // lanes 16 or 32 bytes apart, would cost the cache 8 to 16 times the wavefronts of x's own loads, and
            // the pass would run at a third of the memory's bandwidth
            const bool vec = ((reinterpret_cast<unsigned long long>(vb) | reinterpret_cast<unsigned long long>(wb)) & 15ull) == 0;
            // offsets within the slice in 32 bits (the host makes slices of at most 2^30 elements, matvec_geometry):
            // 64-bit index arithmetic would cost the loop as many instructions as its sums
            const int len = (int)(je - jb);
            const float* vr = vb + jb;
            const float* wr = wb != nullptr ? wb + jb : nullptr;
            // lanes a row: the fewest (a power of two, at most 32) whose 16-byte vectors cover the slice, the warp's
            // other lanes on the next rows (a matrix of many short rows is several rows a warp, not one: a warp a row
            // of 128 bytes left most lanes idle and the pass paced by its threadblocks' latency)
            const int L = pgv_lanes(len, E), G = 32 / L, sub = lane % L;
            for (long long i0 = ((long long)blockIdx.x * kPgvWarps + slice) * G; i0 < rows; i0 += (long long)gridDim.x * kPgvWarps * G) {
                const long long i = i0 + lane / L;
                const T* xr = xb + (i < rows ? i : i0) * rs + jb;
                PgvKahan acc;
                double sq = 0.0;
                for (int j0 = i < rows ? sub * E : len; j0 < len; j0 += L * E * kPgvAlongUnroll) {
                    // every load of the step issued before any is used, kept raw (4 registers each) until then
                    uint4 raw[kPgvAlongUnroll];
                    bool full[kPgvAlongUnroll];
#pragma unroll
                    for (int u = 0; u < kPgvAlongUnroll; ++u) {
                        const int j = j0 + L * E * u;
                        full[u] = j + E <= len;
                        if (full[u]) raw[u] = pgv_stream16(xr + j);
                    }
#pragma unroll
                    for (int u = 0; u < kPgvAlongUnroll; ++u) {
                        const int j = j0 + L * E * u;
                        float x[E];
                        if (full[u]) {
                            pgv_unpack(raw[u], x, xr);
                        } else {
#pragma unroll
                            for (int e = 0; e < E; ++e) x[e] = j + e < len ? pgv_float(xr[j + e]) : 0.f;
                        }
                        if (full[u] && vec) {
                            float vv[E], ww[E];
#pragma unroll
                            for (int q = 0; q < E / 4; ++q) {
                                pgv_unpack(__ldg(reinterpret_cast<const uint4*>(vr + j) + q), vv + 4 * q, vr);
                                if (wr != nullptr) pgv_unpack(__ldg(reinterpret_cast<const uint4*>(wr + j) + q), ww + 4 * q, wr);
                            }
                            // the vector's E terms summed by fused multiply-adds first, then one compensated add
                            // (E u more of their 1-norm, within the threshold's allowance), and their squares or
                            // magnitudes in float32, taken to the float64 sum once, unless that sum overflowed or
                            // may have lost terms to underflow (past 3e38 or under 1e-30: float32 and bfloat16
                            // values only): those vectors are summed in float64 term by term (float64 work on every
                            // term would bound the pass by the device's float64 rate, not by its memory)
                            float t = x[0] * vv[0];
                            float m = wr != nullptr ? fabsf(x[0]) * ww[0] : x[0] * x[0];
#pragma unroll
                            for (int e = 1; e < E; ++e) {
                                t = fmaf(x[e], vv[e], t);
                                m = wr != nullptr ? fmaf(fabsf(x[e]), ww[e], m) : fmaf(x[e], x[e], m);
                            }
                            acc.add(t);
                            if (m <= 3.0e38f && m >= 1.0e-30f) {
                                sq += (double)m;
                            } else {
#pragma unroll
                                for (int e = 0; e < E; ++e)
                                    sq += wr != nullptr ? (double)fabsf(x[e]) * ww[e] : (double)x[e] * x[e];
                            }
                        } else {
#pragma unroll
                            for (int e = 0; e < E; ++e) {
                                if (j + e < len) {
                                    acc.add(x[e] * vr[j + e]);
                                    sq += wr != nullptr ? (double)fabsf(x[e]) * wr[j + e] : (double)x[e] * x[e];
                                }
                            }
                        }
                    }
                }
                pgv_row_sums(acc, sq, L, sub == 0 && i < rows, emit, b * rows + i);
            }
        } else if constexpr (kMode == 3) {  // a thread E adjacent rows (one 16-byte load a column), 32E rows a block
            __shared__ float vpart[2][kPgvWarps][32 * 8];  // 32 lanes x E rows (E <= 8)
            __shared__ double vsq[kPgvWarps][32 * 8];
            for (long long i0 = (long long)blockIdx.x * 32 * E; i0 < rows; i0 += (long long)gridDim.x * 32 * E) {
                const long long ib = i0 + (long long)lane * E;
                PgvKahan acc[E];
                double sq[E];
#pragma unroll
                for (int e = 0; e < E; ++e) sq[e] = 0.0;
                if (ib < rows) {
                    const T* base = xb + ib;
                    const bool full = ib + E <= rows;
                    for (long long j0 = jb + slice; j0 < je; j0 += kPgvWarps * kPgvVecUnroll) {
                        float x[kPgvVecUnroll][E];
#pragma unroll
                        for (int u = 0; u < kPgvVecUnroll; ++u) {
                            const long long j = j0 + kPgvWarps * u;
                            if (j < je && full) {
                                pgv_unpack(pgv_stream16(base + j * cs), x[u], base);
                            } else {
#pragma unroll
                                for (int e = 0; e < E; ++e) x[u][e] = j < je && ib + e < rows ? pgv_float(base[j * cs + e]) : 0.f;
                            }
                        }
                        // the step's terms of each row summed by fused multiply-adds first, then one compensated add,
                        // and their squares or magnitudes in float32, taken to the float64 sum once unless out of float32's
                        // safe range (as the pass along rows does: a conversion to float64 and a compensated add for every
                        // element made this pass compute-bound, half float16's memory rate)
                        float vv[kPgvVecUnroll], ww[kPgvVecUnroll];
#pragma unroll
                        for (int u = 0; u < kPgvVecUnroll; ++u) {
                            const long long j = j0 + kPgvWarps * u;
                            vv[u] = j < je ? vb[j] : 0.f;  // (x is 0 past the slice)
                            ww[u] = j < je && wb != nullptr ? wb[j] : 0.f;
                        }
#pragma unroll
                        for (int e = 0; e < E; ++e) {
                            float t = 0.f, m = 0.f;
#pragma unroll
                            for (int u = 0; u < kPgvVecUnroll; ++u) {
                                t = fmaf(x[u][e], vv[u], t);
                                m = wb != nullptr ? fmaf(fabsf(x[u][e]), ww[u], m) : fmaf(x[u][e], x[u][e], m);
                            }
                            acc[e].add(t);
                            if (m <= 3.0e38f && m >= 1.0e-30f) {
                                sq[e] += (double)m;
                            } else {
#pragma unroll
                                for (int u = 0; u < kPgvVecUnroll; ++u)
                                    sq[e] += wb != nullptr ? (double)fabsf(x[u][e]) * ww[u] : (double)x[u][e] * x[u][e];
                            }
                        }
                    }
                }
#pragma unroll
                for (int e = 0; e < E; ++e) {
                    vpart[0][slice][lane * E + e] = acc[e].s;
                    vpart[1][slice][lane * E + e] = acc[e].c;
                    vsq[slice][lane * E + e] = sq[e];
                }
                __syncthreads();
                for (int r = slice * 32 + lane; r < 32 * E; r += 32 * kPgvWarps) {
                    const long long i = i0 + r;
                    if (i < rows) {
                        float s = 0.f, c = 0.f;
                        double q = 0.0;
#pragma unroll
                        for (int k = 0; k < kPgvWarps; ++k) {
                            s += vpart[0][k][r];
                            c += vpart[1][k][r];
                            q += vsq[k][r];
                        }
                        emit(b * rows + i, s - c, q);
                    }
                }
                __syncthreads();
            }
        } else if constexpr (kMode == 1) {  // a warp a row (or several short rows: pgv_lanes): lanes over j
            const int L = pgv_lanes(je - jb, 1), G = 32 / L, sub = lane % L;
            for (long long i0 = ((long long)blockIdx.x * kPgvWarps + slice) * G; i0 < rows; i0 += (long long)gridDim.x * kPgvWarps * G) {
                const long long i = i0 + lane / L;
                const T* row = xb + (i < rows ? i : i0) * rs;
                PgvKahan acc;
                double sq = 0.0;
                for (long long j0 = i < rows ? jb + sub : je; j0 < je; j0 += L * kPgvUnroll) {
                    float x[kPgvUnroll];
#pragma unroll
                    for (int u = 0; u < kPgvUnroll; ++u) {  // the loads first, all in flight
                        const long long j = j0 + L * u;
                        x[u] = j < je ? pgv_float(row[j * cs]) : 0.f;
                    }
#pragma unroll
                    for (int u = 0; u < kPgvUnroll; ++u) {
                        const long long j = j0 + L * u;
                        if (j < je) {
                            acc.add(x[u] * vb[j]);
                            sq += wb != nullptr ? (double)fabsf(x[u]) * wb[j] : (double)x[u] * x[u];
                        }
                    }
                }
                pgv_row_sums(acc, sq, L, sub == 0 && i < rows, emit, b * rows + i);
            }
        } else {  // kMode 0: one thread a row, 32 rows a block: the block's warps take slices of j
            __shared__ float part[2][kPgvWarps][33];
            __shared__ double psq[kPgvWarps][33];
            for (long long i0 = (long long)blockIdx.x * 32; i0 < rows; i0 += (long long)gridDim.x * 32) {
                const long long i = i0 + lane;
                PgvKahan acc;
                double sq = 0.0;
                if (i < rows) {
                    const T* row = xb + i * rs;
                    for (long long j0 = jb + slice; j0 < je; j0 += kPgvWarps * kPgvUnroll) {
                        float x[kPgvUnroll];
#pragma unroll
                        for (int u = 0; u < kPgvUnroll; ++u) {
                            const long long j = j0 + kPgvWarps * u;
                            x[u] = j < je ? pgv_float(row[j * cs]) : 0.f;
                        }
#pragma unroll
                        for (int u = 0; u < kPgvUnroll; ++u) {
                            const long long j = j0 + kPgvWarps * u;
                            if (j < je) {
                                acc.add(x[u] * vb[j]);
                                sq += wb != nullptr ? (double)fabsf(x[u]) * wb[j] : (double)x[u] * x[u];
                            }
                        }
                    }
                }
                part[0][slice][lane] = acc.s;
                part[1][slice][lane] = acc.c;
                psq[slice][lane] = sq;
                __syncthreads();
                if (slice == 0 && i < rows) {
                    float s = 0.f, c = 0.f;
                        double q = 0.0;
#pragma unroll
                    for (int k = 0; k < kPgvWarps; ++k) {
                        s += part[0][k][lane];
                        c += part[1][k][lane];
                        q += psq[k][lane];
                    }
                    emit(b * rows + i, s - c, q);
                }
                __syncthreads();
            }
        }
    }
}

// neither NaN nor infinite (no <cmath> needed: NVRTC builds these kernels too)
__device__ __forceinline__ bool pgv_finite(float x) { return fabsf(x) <= 3.402823466e38f; }

// What the check leaves for the host (zeroed by pg_verify_prepare); the first rows that failed are those that
// reached a slot first (the host sorts them)
constexpr int kPgvShown = 8;
struct PgvRecord {
    unsigned int failed;      // rows whose check failed
    unsigned int unchecked;   // rows whose operand terms are not finite
    unsigned int worst_bits;  // the largest |got - want| / threshold of the rows that passed, as float bits
    unsigned int shown;       // failed rows that took a slot below (at most kPgvShown stored)
    long long index[kPgvShown];
    double diff[kPgvShown];
    double thr[kPgvShown];
    unsigned int arrived;     // blocks of the last launch done (pgv_publish)
    unsigned int pad;
};

// The record handed to the host by the last launch itself (where `host`, page-locked memory mapped into the device, is
// given): the block that finishes last copies it there, so the host waits for the stream and reads it with no copy of
// its own queued (a launch less for the host to pay: a small product's check is paid for on the host). Every thread of
// the block calls it, after its last atomic on the record.
__device__ __forceinline__ void pgv_publish(PgvRecord* __restrict__ rec, PgvRecord* __restrict__ host) {
    if (host == nullptr) return;
    __shared__ bool last;
    const int t = threadIdx.y * blockDim.x + threadIdx.x;
    __syncthreads();
    if (t == 0) {
        __threadfence();  // this block's atomics on the record before its arrival
        last = atomicAdd(&rec->arrived, 1u) == gridDim.x * gridDim.y * gridDim.z - 1;
    }
    __syncthreads();
    if (last) {  // a word a thread, all at once (one thread's 54 reads in turn cost the launch some 10 µs)
        __threadfence();
        constexpr int kWords = (int)(sizeof(PgvRecord) / 4);
        if (t < kWords)
            reinterpret_cast<unsigned int*>(host)[t] = reinterpret_cast<const volatile unsigned int*>(rec)[t];
    }
}

// The scalars of the comparison: the threshold's coefficients (polygemm/verification/threshold.py) and the result's
// largest finite value
struct PgvScalars {
    float alpha, beta;
    double ka, kc0, kc, t0, out_max;
};

// Row t's comparison: got = yC[t] against want = alpha*yA + beta*yC0[t], threshold = ka*|alpha|*zA +
// kc0*|beta|*||C0_t|| + t0 + kc*||C_t|| (zC, zC0: the rows' float64 sums of squares). Counts the row in the record
// as unchecked (operand terms not finite) or failed (and takes a slot for it); returns |got - want| / threshold for a
// row that passed, else 0.
__device__ __forceinline__ float pgv_judge(long long t, float yA, double zA, const float* __restrict__ yC,
                                           const double* __restrict__ zC, const float* __restrict__ yC0,
                                           const double* __restrict__ zC0, const PgvScalars& k, PgvRecord* __restrict__ rec) {
    float want = k.alpha * yA;
    const double ya = fabs((double)k.alpha) * zA;
    double c0a = 0.0;
    if (yC0 != nullptr) {
        want += k.beta * yC0[t];
        c0a = fabs((double)k.beta) * pgv_sqrt(zC0[t]);
    }
    const double side = k.ka * ya + k.kc0 * c0a + k.t0;
    const float got = yC[t];
    const bool finite = pgv_finite(got);
    const bool unchecked = !(side <= 1.7976931348623157e308) || !pgv_finite(want) || (!finite && ya + c0a > k.out_max);
    const double thr = side + k.kc * pgv_sqrt(zC[t]);
    const double diff = fabs((double)got - (double)want);
    const bool failed = !unchecked && (!finite || !(diff <= thr));
    if (unchecked) atomicAdd(&rec->unchecked, 1u);
    if (failed) {
        atomicAdd(&rec->failed, 1u);
        const unsigned int slot = atomicAdd(&rec->shown, 1u);
        if (slot < kPgvShown) {
            rec->index[slot] = t;
            rec->diff[slot] = diff;
            rec->thr[slot] = thr;
        }
        return 0.f;
    }
    return !unchecked && thr > 0.0 ? (float)(diff / thr) : 0.f;
}

// The warp's largest ratio into the record: one atomic a warp, and none where the record already holds a larger one
// (non-negative floats order as their bits do); every lane of the warp calls it
__device__ __forceinline__ void pgv_worst(float ratio, PgvRecord* __restrict__ rec) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) ratio = fmaxf(ratio, __shfl_down_sync(0xffffffffu, ratio, off));
    if ((threadIdx.x & 31) == 0 && ratio > 0.f && __float_as_uint(ratio) > *(volatile unsigned int*)&rec->worst_bits)
        atomicMax(&rec->worst_bits, __float_as_uint(ratio));
}

// What a pass does with a row's sums: stores them (C's, C0's, B's rows; B's norms too where the whole row is in one
// block and `norm` is given: the A pass reads them, and a sliced pass leaves them to pg_verify_norms)...
struct PgvSums {
    float* __restrict__ y;
    double* __restrict__ z;
    float* __restrict__ norm;
    __device__ __forceinline__ void operator()(long long t, float s, double q) {
        pgv_store(y + t, s);
        pgv_store(z + t, q);
        if (norm != nullptr && gridDim.y == 1) norm[t] = pgv_sqrt(q);
    }
};

// ...or judges the row (the A pass, where each row is in one block: no launch of pg_verify_compare)
struct PgvJudge {
    const float* __restrict__ yC;
    const double* __restrict__ zC;
    const float* __restrict__ yC0;
    const double* __restrict__ zC0;
    PgvScalars k;
    PgvRecord* __restrict__ rec;
    float worst;
    __device__ __forceinline__ void operator()(long long t, float s, double q) {
        worst = fmaxf(worst, pgv_judge(t, s, q, yC, zC, yC0, zC0, k, rec));
    }
};

// One entry a walk (mode) and input type, each with the registers its own walk needs: one function of the four walks
// would take the widest walk's (about 126) for all and hold two blocks an SM, leaving the passes along rows (most of
// them) short of loads in flight. PGV_BLOCKS: the blocks an SM each walk is built to hold.
#define PGV_BLOCKS_0 4
#define PGV_BLOCKS_1 4
#define PGV_BLOCKS_2 3
#define PGV_BLOCKS_3 2
#define PGV_MATVEC(SUFFIX, T, M)                                                                                    \
    extern "C" __global__ void __launch_bounds__(256, PGV_BLOCKS_##M) pg_verify_matvec_##SUFFIX##_m##M(               \
        long long rows, long long cols, long long batch, const T* __restrict__ X, long long rs, long long cs,       \
        long long bs, const float* __restrict__ v, long long vbs, const float* __restrict__ w, long long wbs,       \
        float* __restrict__ y, double* __restrict__ z, float* __restrict__ norm) {                                  \
        PgvSums emit{y, z, norm};                                                                                   \
        pgv_matvec<M, T>(rows, cols, batch, X, rs, cs, bs, v, vbs, w, wbs, emit);                                   \
    }                                                                                                               \
    extern "C" __global__ void __launch_bounds__(256, PGV_BLOCKS_##M) pg_verify_matvec_judge_##SUFFIX##_m##M(         \
        long long rows, long long cols, long long batch, const T* __restrict__ X, long long rs, long long cs,       \
        long long bs, const float* __restrict__ v, long long vbs, const float* __restrict__ w, long long wbs,       \
        const float* __restrict__ yC, const double* __restrict__ zC, const float* __restrict__ yC0,                 \
        const double* __restrict__ zC0, float alpha, float beta, double ka, double kc0, double kc, double t0,       \
        double out_max, PgvRecord* __restrict__ rec, PgvRecord* __restrict__ host) {                                \
        PgvJudge emit{yC, zC, yC0, zC0, {alpha, beta, ka, kc0, kc, t0, out_max}, rec, 0.f};                         \
        pgv_matvec<M, T>(rows, cols, batch, X, rs, cs, bs, v, vbs, w, wbs, emit);                                   \
        pgv_worst(emit.worst, rec);                                                                                 \
        pgv_publish(rec, host);                                                                                     \
    }
#define PGV_MATVEC_WALKS(SUFFIX, T) PGV_MATVEC(SUFFIX, T, 0) PGV_MATVEC(SUFFIX, T, 1) PGV_MATVEC(SUFFIX, T, 2) PGV_MATVEC(SUFFIX, T, 3)

PGV_MATVEC_WALKS(f32, float)
PGV_MATVEC_WALKS(f16, __half)
PGV_MATVEC_WALKS(bf16, __nv_bfloat16)

extern "C" __global__ void __launch_bounds__(256)
pg_verify_compare(long long total, const float* __restrict__ yC, const double* __restrict__ zC,
                  const float* __restrict__ yA, const double* __restrict__ zA, const float* __restrict__ yC0,
                  const double* __restrict__ zC0, float alpha, float beta, double ka, double kc0, double kc, double t0,
                  double out_max, PgvRecord* __restrict__ rec, PgvRecord* __restrict__ host) {
    const PgvScalars k{alpha, beta, ka, kc0, kc, t0, out_max};
    for (long long t0_ = (long long)blockIdx.x * blockDim.x; t0_ < total; t0_ += (long long)gridDim.x * blockDim.x) {
        const long long t = t0_ + threadIdx.x;
        pgv_worst(t < total ? pgv_judge(t, yA[t], zA[t], yC, zC, yC0, zC0, k, rec) : 0.f, rec);
    }
    pgv_publish(rec, host);
}
