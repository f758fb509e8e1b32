// hgemm v2 (FP16 tensor-core ladder, second rung, Hopper only): C = alpha * A @ B + beta * C
// with fp16 operands and fp32 accumulation on the warpgroup-level tensor-core instruction
// wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16, both operands read straight from shared
// memory through 64-bit matrix descriptors, the tiles brought in by the Tensor Memory
// Accelerator (cp.async.bulk.tensor.2d, completion counted on an mbarrier).
// PG_BF16=1 builds it for bf16 operands and a bf16 or fp32 C (wgmma ...f32.bf16.bf16; pg_half
// and its conversions from common.cuh; the tensor maps say BFLOAT16).
// What it adds to v1 (ldmatrix + mma.sync, capped near 636 TFLOP/s on an H200):
//   * no ldmatrix and no per-thread address arithmetic: one thread issues whole tiles with
//     TMA, the hardware applies the 128-byte swizzle and zero-fills everything outside the
//     matrix (M, N and K edges need no predication in the main loop);
//   * warp specialization: warpgroup 0 is the producer (one elected thread issues TMA,
//     registers handed back with setmaxnreg.dec), warpgroups 1..kConsumers are consumers
//     (setmaxnreg.inc) that issue wgmma on a 64 x BN slice of the threadblock tile each;
//   * a kStages ring of shared stages guarded by two mbarriers per stage: `full` (producer
//     arrive.expect_tx + TMA complete_tx) and `empty` (one arrive per consumer warp once the
//     wgmma reading the stage has retired, wgmma.wait_group);
//   * the consumers' k-tile loop unrolled over the ring (HG2_RING_UNROLL=1, the default): each
//     stage's descriptors and barrier addresses are uniform-register constants of its copy, with
//     the warpgroup index made visibly warp-uniform (a shuffle), so no wgmma waits on R2UR moves;
//   * a persistent tile loop (any grid works: with the plain grid each CTA takes one tile,
//     with a grid of #SMs each CTA walks tiles, its producer prefetching the next tile while
//     the consumers run the epilogue), tiles visited in groups of kGroupM tile rows (L2 reuse);
//   * a staged epilogue (HG2_EPILOGUE=1, the default): each consumer warp passes its
//     accumulator rows through its own 2 KB shared buffer (stmatrix for a 16-bit C), so C is
//     written with coalesced 16-byte stores instead of 4/8-byte stores scattered over 8 rows
//     (HG2_EPILOGUE=0, kept for comparison);
//   * optional thread-block clusters: PG_CLUSTER_M=2 CTAs own vertically adjacent tiles and
//     share their B tile, PG_CLUSTER_N=2 CTAs horizontally adjacent ones and share A; each
//     CTA loads its share of a shared tile, multicast to the CTAs that share it (L2 traffic of
//     that operand halves). A stage goes back to the producers once every CTA's consumers
//     have released it (one remote arrival per consumer warpgroup and CTA, without a
//     .release.cluster fence: that compiles to MEMBAR.ALL.GPU before every arrival).
//
//   * HG2_PINGPONG=1 (BN 128): each consumer warpgroup owns whole 128 x 128 tiles (two m64
//     wgmma per k16 step) and the two alternate (a `turn` mbarrier pair orders their main
//     loops), so one warpgroup's epilogue runs under the other's main loop.
//   * HG2_COL_C=1: C (and a split's fp32 partial sums) column-major in the kernel's terms,
//     C[i + j*ldc], stored from the fragments (HG2_EPILOGUE=0). With it a row of layout "col"
//     takes a row-major M x N result with a thin M as C^T = B^T A^T: the long side N on wgmma's
//     M, the thin side on a 32-wide B tile (PG_BN=32, m64n32k16, B K-major only), so a 12 KB
//     stage leaves room for an 18-stage ring of the long operand's loads.
//
// Entry (tensor maps first). NOTE for launchers: ptxas puts a __grid_constant__ CUtensorMap at
// a 128-byte aligned constant-bank address, i.e. parameter offset 0x70 (112) on sm_90, not 0
// (cuobjdump -elf: EIATTR_KPARAM_INFO). cuLaunchKernel's kernelParams array handles that by
// itself; PyCUDA's packed argument buffer needs 112 bytes of padding first (tma.param_padding,
// tma.first_param_offset).
//   hgemm_v2_wgmma_tma(const __grid_constant__ CUtensorMap tmap_a,
//                      const __grid_constant__ CUtensorMap tmap_b,
//                      int M, int N, int K, float alpha, float beta, void* C, int ldc)
// A is M x K, B is K x N, C row-major (C[i*ldc + j]), pg_half, or float when PG_OUT_F32=1.
// PG_TRANS_A=0: A row-major (K contiguous)    -> tensor map dims {K, M}, box {64, BM / cluster_n}
//                                                (BM = 64*kConsumers), wgmma K-major (trans-a 0)
// PG_TRANS_A=1: A column-major (M contiguous) -> dims {M, K}, box {64, 64}, BM/64 boxes per
//                                                stage, wgmma M-major (trans-a 1)
// PG_TRANS_B=0: B row-major (N contiguous)    -> dims {N, K}, box {64, 64}, BN/64 boxes per
//                                                stage, wgmma N-major (trans-b 1)
// PG_TRANS_B=1: B column-major (K contiguous) -> dims {K, N}, box {64, BN / cluster},
//                                                wgmma K-major (trans-b 0)
// Every map: fp16, CU_TENSOR_MAP_SWIZZLE_128B, zero OOB fill; the host side is
// polygemm/backends/cuda/tma.py. TMA needs 16-byte aligned base addresses and leading
// dimensions that are multiples of 8 elements (variants.json "align": 8); the epilogue's
// half2/float2 stores rely on the same (C 16-byte aligned, ldc % 8 == 0).
// beta == 0 never reads C. Any M, N, K >= 1.
// PG_BATCH=1 (a strided batch): four more parameters after ldc (HG2_BATCH_PARAMS). The work
// units are the tiles of every matrix (unit u: matrix z = u / tiles-per-matrix), so a
// persistent grid walks the whole batch and each producer prefetches the next tile, maybe of
// the next matrix, while the consumers store. A and B are 3-D tensor maps whose third
// dimension is the batch (its byte stride lives in the map), loaded at coordinate
// z * pg_batch_a (pg_batch_b): 1 for a batched operand, 0 for one shared by the whole batch;
// C moves pg_batch_c elements per matrix. With clusters a unit is a cluster's block of tiles
// of one matrix, and the multicast loads take the batch coordinate too (HG2_LOAD_MC).
//
// Shared memory (all swizzled tiles 1024-byte aligned, as the 128-byte swizzle requires):
// stage s = [A tile BM x 64 | B tile 64 x BN]; a K-major tile is rows of 64 k (128 B, one
// swizzle row each); an MN-major tile is boxes of 64 (m or n) x 64 k, one 128-byte row per k.
// Descriptors (PTX "matrix descriptor": start >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO >> 4
// in 32-45, swizzle mode 1 = 128 B in bits 62-63):
//   K-major : SBO = 1024 (next 8 rows), LBO unused; k16 step = start + 32 B.
//   MN-major: SBO = 1024 (next 8 k), LBO = 8192 (next 64-wide MN box); k16 step = start + 2048 B.
// Accumulators: m64nN fp32 fragment, thread t of warp w (in its warpgroup) holds, for each
// n8 block j, rows 16w + t/4 (+8) and columns 8j + 2(t%4) + {0, 1}: d[4j..4j+3].
//
// Launch: blockDim (128 * (kConsumers + 1)); any grid (plain: (ceil(N/BN), ceil(M/BM)),
// persistent: #SMs); with clusters gridDim.x is a multiple of the cluster's CTAs (compiled-in
// cluster dims, 1-D: rank r takes tile row r % PG_CLUSTER_M and column r / PG_CLUSTER_M of its unit).
// DYNAMIC SHARED MEMORY: kSmemBytes (default 4 x 48 KB + 1024 alignment slack + 256 barrier
// bytes + 8 x 2 KB staged-epilogue buffers = 214272); the launcher raises
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (variants.json "smem_bytes").
// Build: nvcc -cubin -gencode=arch=compute_90a,code=sm_90a (wgmma/setmaxnreg need sm_90a).
// ptxas: 168 registers at entry (setmaxnreg: producer 40, consumers 232), no spills, all builds.
//
// Measurements (epilogues, tile orders, stage counts, clusters, beside cuBLAS):
// docs/benchmarks/README.md and docs/benchmarks/h200_epilogue.md.
#include "hgemm/wgmma_kernel.cuh"
