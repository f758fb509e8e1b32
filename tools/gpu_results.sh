#!/usr/bin/env bash
# Produce the committed GPU results (run from the repository root on the GPU machine):
#   tools/gpu_results.sh call     -> docs/benchmarks/h200_call_fp16.*, h200_call_fp32.*, h200_call_numpy.* (polygemm.gemm per call)
#   tools/gpu_results.sh targets  -> docs/benchmarks/h200_targets_*.{json,md} (issue 13's shapes through auto)
#   tools/gpu_results.sh tune     -> docs/benchmarks/h200_tune_{,persistent_,skinny_,batched_}fp16.*, h200_tune_{,skinny_}fp32.* (auto's tables)
#   tools/gpu_results.sh tune-skinny -> docs/benchmarks/{h200,h100}_tune_skinny{,_long}_fp{16,32}.* (the skinny rungs: fp16 v1, v2; fp32 v1, v2, v3)
#   tools/gpu_results.sh bench    -> docs/benchmarks/h200_fp32.*, h200_fp16.*, h200_*_settled.*, h200_musa_cuda_flavor.* (raw kernels)
#   tools/gpu_results.sh matrix   -> docs/matrix/h200.{json,md}
#   tools/gpu_results.sh ncu      -> docs/benchmarks/ncu_*.csv (shared-memory bank conflicts)
#   tools/gpu_results.sh ceiling  -> docs/benchmarks/h200_mma_ceiling.{json,md}
#   tools/gpu_results.sh hopper   -> docs/benchmarks/h200_hopper_{kernel,settled,call}_{fp16,bf16}.* (issue 14: the wgmma rungs)
#   tools/gpu_results.sh hopper-cluster -> docs/benchmarks/h200_cluster.json (2-CTA clusters beside the one-CTA builds)
#   tools/gpu_results.sh tune-cluster -> docs/benchmarks/h200_tune_cluster_fp16.* (the cluster rows, for auto's table)
#   tools/gpu_results.sh tune-cluster-split -> docs/benchmarks/h200_tune_cluster{256,_split}_fp16.* (the cluster rows in K-slices), _cluster_choices_fp16.* (choices side by side)
#   tools/gpu_results.sh tune-cluster-persistent -> docs/benchmarks/h200_tune_cluster_persistent_fp16.* (the persistent cluster rows, for auto's table)
#   tools/gpu_results.sh tune-thin-choices -> docs/benchmarks/h200_tune_thin_choices_fp16.* (the thin shapes measured short, every row side by side)
#   tools/gpu_results.sh tune-lm-head -> docs/benchmarks/h200_tune_lm_head_all_fp16.* (language-model heads: every row auto may choose, side by side)
#   tools/gpu_results.sh hopper-ncu -> docs/benchmarks/ncu_persistent_*.csv, ncu_epilogue_share.csv, ncu_cluster.csv (the wgmma rungs under ncu)
#   tools/gpu_results.sh sweep    -> docs/benchmarks/h200_sweep_{kernel,call}_fp16.json, _fp32.json, h200_sweep_fp16.{png,txt}, _fp32.{png,txt}
# Each writes into the working tree (files named for the GPU: h200_... on an H200, h100_... on an H100);
# copy the files out afterwards.
set -uo pipefail
what=${1:?call, targets, tune, tune-skinny, tune-split, tune-tiles, tune-deep, tune-streamk, tune-cluster, tune-cluster-split, tune-cluster-persistent, tune-thin-choices, tune-lm-head, retune, hopper, hopper-cluster, hopper-ncu, bench, matrix, ncu, ceiling or sweep}
# every target but retune measures the GPU and overwrites committed results: without a usable cuda
# backend (or, for the ncu targets, without ncu) it would replace them with all-skip tables or empty
# files and exit 0, so refuse before anything is written
if [ "$what" != retune ]; then
  python3 - "$what" <<'PY' || exit 2
import sys, polygemm
info = {i.name: i for i in polygemm.backends()}["cuda"]
if not info.available:
    sys.exit(f"tools/gpu_results.sh {sys.argv[1]} needs the cuda backend (an NVIDIA GPU, its driver and PyCUDA); "
             f"nothing was written: {info.reason}")
PY
fi
case "$what" in
  *ncu) command -v ncu >/dev/null || { echo "tools/gpu_results.sh $what needs Nsight Compute's ncu on PATH; nothing was written" >&2; exit 2; } ;;
esac
mkdir -p docs/benchmarks docs/matrix
# results are named by the GPU they ran on (h200_..., h100_...): the device tool may lend an H100
# for an H200; retune reads the H200 files and paces other GPUs' records to the H200's vendor
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -oiE 'h100|h200' | tr 'A-Z' 'a-z')
gpu=${gpu:-h200}
musa_lib() {  # the cuda flavor of libpolygemm_musa, built once
  if [ ! -f build/musa-cuda/libpolygemm_musa.so ]; then
    cmake -S . -B build/musa-cuda -DPOLYGEMM_MUSA_FLAVOR=cuda >/dev/null && cmake --build build/musa-cuda -j 16 >/dev/null || return 1
  fi
  export POLYGEMM_MUSA_LIBRARY=$PWD/build/musa-cuda/libpolygemm_musa.so POLYGEMM_MUSA_EMULATION=1
}
case "$what" in
  call)
    for dt in 16 32; do
      python3 -m polygemm bench --mode call --device cuda --dtype float$dt --shapes overhead square odd --repeats 5 \
        --json docs/benchmarks/${gpu}_call_fp$dt.json --markdown docs/benchmarks/${gpu}_call_fp$dt.md
    done
    python3 -m polygemm bench --mode call --inputs numpy --device cuda --dtype float32 --shapes overhead 4096x4096x4096 --repeats 5 \
      --json docs/benchmarks/${gpu}_call_numpy.json --markdown docs/benchmarks/${gpu}_call_numpy.md
    # the raw kernels auto picks, in the same session (the results page sets them beside the call)
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --variants hgemm_v3_wgmma_pingpong hgemm_v2_wgmma_tma hgemm_v1_mma_ldmatrix \
      --shapes overhead square odd --repeats 5 --json docs/benchmarks/${gpu}_kernel_fp16.json --markdown docs/benchmarks/${gpu}_kernel_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float32 --variants cm_v12_cp_async cm_v13_cp_async_narrow_tile \
      --shapes overhead square odd --repeats 5 --json docs/benchmarks/${gpu}_kernel_fp32.json --markdown docs/benchmarks/${gpu}_kernel_fp32.md
    # strided batches per call beside torch.matmul on 3-D tensors (cublasGemmStridedBatchedEx)
    for dt in 16 32; do
      python3 -m polygemm bench --mode call --device cuda --dtype float$dt --array-lib torch --batch 64 --shapes 512x512x512 128x128x128 \
        --repeats 5 --json docs/benchmarks/${gpu}_batched_fp$dt.json --markdown docs/benchmarks/${gpu}_batched_fp$dt.md
    done
    ;;
  tune)  # the measurements auto's cost model is fitted to and anchored on; then:
         #   bash tools/gpu_results.sh retune
         # (with the sweep's kernel-mode records: measurements of auto's own choices anchor them)
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 \
      --variants hgemm_v1_mma_ldmatrix hgemm_v2_wgmma_tma hgemm_v2_wgmma_tma_128x192 hgemm_v3_wgmma_pingpong \
      --shapes overhead square odd --repeats 5 --no-progress \
      --json docs/benchmarks/${gpu}_tune_fp16.json --markdown docs/benchmarks/${gpu}_tune_fp16.md
    # every unsplit rung on the sweep's shapes (auto's model anchors on the nearest measurement)
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --shapes sweep --repeats 5 --no-progress \
      --variants hgemm_v1_mma_ldmatrix hgemm_v2_wgmma_tma hgemm_v2_wgmma_tma_128x192 hgemm_v2_wgmma_tma_128x128 hgemm_v3_wgmma_pingpong \
      --json docs/benchmarks/${gpu}_tune_wide_fp16.json --markdown docs/benchmarks/${gpu}_tune_wide_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float32 --shapes sweep --repeats 5 --no-progress \
      --variants cm_v12_cp_async cm_v13_cp_async_narrow_tile \
      --json docs/benchmarks/${gpu}_tune_wide_fp32.json --markdown docs/benchmarks/${gpu}_tune_wide_fp32.md
    # the wgmma rungs on a persistent grid, on the shapes above and the sweep's
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 \
      --variants hgemm_v2_wgmma_tma_persistent hgemm_v3_wgmma_pingpong_persistent --shapes overhead square odd sweep --repeats 5 --no-progress \
      --json docs/benchmarks/${gpu}_tune_persistent_fp16.json --markdown docs/benchmarks/${gpu}_tune_persistent_fp16.md
    python3 -m polygemm bench --mode call --device cuda --dtype float16 --array-lib torch --batch 64 \
      --variants hgemm_v1_mma_ldmatrix hgemm_v2_wgmma_tma hgemm_v2_wgmma_tma_128x192 hgemm_v2_wgmma_tma_128x128 hgemm_v2_wgmma_tma_128x64 \
        hgemm_v2_wgmma_tma_64x256 hgemm_v3_wgmma_pingpong --shapes 512x512x512 128x128x128 1024x1024x1024 \
      --repeats 5 --no-progress --json docs/benchmarks/${gpu}_tune_batched_fp16.json --markdown docs/benchmarks/${gpu}_tune_batched_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float32 \
      --variants cm_v12_cp_async cm_v13_cp_async_narrow_tile --shapes overhead square odd --repeats 5 --no-progress \
      --json docs/benchmarks/${gpu}_tune_fp32.json --markdown docs/benchmarks/${gpu}_tune_fp32.md
    bash "$0" tune-skinny
    bash "$0" tune-split
    bash "$0" tune-tiles
    bash "$0" tune-deep
    bash "$0" tune-streamk
    bash "$0" tune-cluster
    ;;
  tune-skinny)  # the skinny rungs (fp16 v1, v2; fp32 v1, v2, v3) on the skinny preset, the sweep's thin shapes (a side <= 32)
                # and long K (on an H100 into h100_ files: retune paces their records to the H200 vendor)
    thin="1x1x512 16x16x512 1x8192x512 16x8192x512 8192x1x512 8192x16x512 1x1x4096 16x16x4096 1x4096x16384 16x4096x16384 4096x1x16384 4096x16x16384"
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 \
      --variants skinny_v1_fp16_row skinny_v1_fp16_col skinny_v2_fp16_row skinny_v2_fp16_col hgemm_v3_wgmma_pingpong \
      --shapes skinny 1x1x4096 1x1x16384 16x16x16384 1x16x16384 16x1x16384 $thin --repeats 5 --no-progress \
      --json docs/benchmarks/${gpu}_tune_skinny_fp16.json --markdown docs/benchmarks/${gpu}_tune_skinny_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float32 \
      --variants skinny_v1_fp32_row skinny_v1_fp32_col skinny_v2_fp32_row skinny_v2_fp32_col skinny_v3_fp32_row skinny_v3_fp32_col cm_v13_cp_async_narrow_tile \
      --shapes skinny 1x1x4096 1x1x16384 16x16x16384 1x16x16384 16x1x16384 $thin --repeats 5 --no-progress \
      --json docs/benchmarks/${gpu}_tune_skinny_fp32.json --markdown docs/benchmarks/${gpu}_tune_skinny_fp32.md
    long="16x4096x16384 4096x16x16384 17x4096x16384 1x4096x16384 4096x1x16384 16x8192x8192 1x8192x8192 8192x1x8192 17x4096x4096 4096x17x4096 32x4096x16384 4096x32x4096"
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --shapes $long --repeats 3 --no-progress \
      --variants skinny_v1_fp16_row skinny_v1_fp16_col skinny_v2_fp16_row skinny_v2_fp16_col \
      --json docs/benchmarks/${gpu}_tune_skinny_long_fp16.json --markdown docs/benchmarks/${gpu}_tune_skinny_long_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float32 --shapes $long --repeats 3 --no-progress \
      --variants skinny_v1_fp32_row skinny_v1_fp32_col skinny_v2_fp32_row skinny_v2_fp32_col skinny_v3_fp32_row skinny_v3_fp32_col \
      --json docs/benchmarks/${gpu}_tune_skinny_long_fp32.json --markdown docs/benchmarks/${gpu}_tune_skinny_long_fp32.md
    ;;
  tune-cluster)  # the 2-CTA cluster rows (B multicast) on the sweep and the square, odd and mid-size shapes
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --repeats 3 --no-progress \
      --shapes sweep square odd 1000x3000x2000 1000x1000x4096 1000x1000x16384 1024x1024x8192 2048x2048x2048 \
      --variants hgemm_v2_wgmma_tma_128x192_cluster2 hgemm_v2_wgmma_tma_128x128_cluster2 hgemm_v2_wgmma_tma_128x64_cluster2 \
      --json docs/benchmarks/${gpu}_tune_cluster_fp16.json --markdown docs/benchmarks/${gpu}_tune_cluster_fp16.md
    # the 2 x 2 cluster row (A shared along N as well)
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --repeats 3 --no-progress \
      --shapes sweep square odd 1000x3000x2000 1000x1000x4096 1000x1000x16384 1024x1024x8192 2048x2048x2048 \
      --variants hgemm_v2_wgmma_tma_128x128_cluster2x2 \
      --json docs/benchmarks/${gpu}_tune_cluster2x2_fp16.json --markdown docs/benchmarks/${gpu}_tune_cluster2x2_fp16.md
    ;;
  tune-cluster-persistent)  # the persistent cluster rows on the sweep, the targets and mid-size to square products
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 \
      --variants hgemm_v2_wgmma_tma_cluster2_persistent hgemm_v2_wgmma_tma_128x128_cluster2_persistent \
      --shapes sweep 4096x4096x4096 8192x8192x8192 2000x2000x8192 6144x1536x1024 1536x6144x1024 3000x3000x3000 \
        8192x2000x1024 4096x4096x1024 4096x4096x2048 2048x8192x4096 --repeats 3 --no-progress \
      --json docs/benchmarks/${gpu}_tune_cluster_persistent_fp16.json --markdown docs/benchmarks/${gpu}_tune_cluster_persistent_fp16.md
    # side by side with the rows they displaced, where auto moved (two rungs a shape leave the run's vendor median to chance)
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --variants hgemm_v2_wgmma_tma_cluster2_persistent \
      hgemm_v2_wgmma_tma_128x128_cluster2_persistent hgemm_v2_wgmma_tma_128x192_cluster2 hgemm_v2_wgmma_tma_64x128_cluster2 \
      hgemm_v2_wgmma_tma_cluster2 hgemm_v2_wgmma_tma_persistent hgemm_v3_wgmma_pingpong_persistent hgemm_v3_wgmma_pingpong_persistent_tma_store \
      --shapes 1000x3000x2000 1000x1000x4096 4096x1000x4096 4096x1000x16384 4096x4096x4096 8192x1000x512 8192x2000x1024 8192x8192x8192 \
        6144x1536x1024 --repeats 5 --no-progress \
      --json docs/benchmarks/${gpu}_tune_cluster_persistent_choices_fp16.json --markdown docs/benchmarks/${gpu}_tune_cluster_persistent_choices_fp16.md
    ;;
  tune-thin-choices)  # the thin shapes the H100's sweep measured short (auto's rung under 0.9x of cuBLAS), every row that
                      # could run them side by side, so each anchors on the same run's vendor
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --variants hgemm_v2_wgmma_tma_64x32_col \
      hgemm_v2_wgmma_tma_64x32_col:split_k=2 hgemm_v2_wgmma_tma_64x64 hgemm_v2_wgmma_tma_64x64:split_k=2 hgemm_v2_wgmma_tma_64x128 \
      hgemm_v2_wgmma_tma_64x128:split_k=2 hgemm_v2_wgmma_tma_64x128:split_k=4 hgemm_v2_wgmma_tma_128x64 hgemm_v2_wgmma_tma_128x64:split_k=2 \
      hgemm_v2_wgmma_tma_128x128 skinny_v2_fp16_row skinny_v1_fp16_col \
      --shapes 17x4096x4096 4096x16x4096 4096x128x4096 --repeats 5 --no-progress \
      --json docs/benchmarks/${gpu}_tune_thin_choices_fp16.json --markdown docs/benchmarks/${gpu}_tune_thin_choices_fp16.md
    ;;
  tune-lm-head)  # language-model heads (M = 1-16 against a vocabulary, K = 768 or 4096; N aligned, so every row can run):
                 # every row auto may choose, and the K-slices the model weighs there, side by side, so that no row
                 # is anchored far away and extrapolated past the rows measured at the very shape
    rows=$(python3 -c "from polygemm.backends.cuda.catalog import auto_specs; print(' '.join(s.name for s in auto_specs('float16', 90)))")
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --variants $rows hgemm_v2_wgmma_tma:split_k=2 \
      hgemm_v2_wgmma_tma_128x192:split_k=2 hgemm_v2_wgmma_tma_128x128:split_k=2 hgemm_v2_wgmma_tma_128x64:split_k=2 \
      hgemm_v2_wgmma_tma_64x64:split_k=2 hgemm_v2_wgmma_tma_64x128:split_k=2 hgemm_v2_wgmma_tma_64x256:split_k=2 \
      hgemm_v2_wgmma_tma_64x32_col:split_k=2 hgemm_v3_wgmma_pingpong:split_k=2 \
      --shapes 1x50256x768 4x50256x768 8x50256x768 1x50256x4096 16x50256x4096 1x32000x4096 16x32000x4096 1x128256x4096 \
      --repeats 5 --no-progress \
      --json docs/benchmarks/${gpu}_tune_lm_head_all_fp16.json --markdown docs/benchmarks/${gpu}_tune_lm_head_all_fp16.md
    ;;
  tune-cluster-split)  # the cluster rows in K-slices on the long-K mid-size shapes, and the 128x256 cluster row whole on the
                      # sweep's shapes auto offers cluster rows for (both result sides >= 512)
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --repeats 3 --no-progress \
      --shapes 512x512x512 1000x1000x512 4096x4096x512 8192x8192x512 1000x8192x512 8192x1000x512 512x512x4096 1000x1000x4096 \
        4096x4096x4096 8192x8192x4096 1000x4096x4096 4096x1000x4096 512x512x16384 1000x1000x16384 4096x4096x16384 8192x8192x16384 \
        1000x4096x16384 4096x1000x16384 4095x4097x4093 1000x3000x2000 1024x1024x8192 2048x2048x8192 \
      --variants hgemm_v2_wgmma_tma_cluster2 \
      --json docs/benchmarks/${gpu}_tune_cluster256_fp16.json --markdown docs/benchmarks/${gpu}_tune_cluster256_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --repeats 3 --no-progress \
      --shapes 512x512x4096 1000x1000x4096 1000x4096x4096 4096x1000x4096 512x512x16384 1000x1000x16384 1000x4096x16384 \
        4096x1000x16384 1024x1024x8192 2048x2048x8192 \
      --variants hgemm_v2_wgmma_tma_cluster2:split_k=2 hgemm_v2_wgmma_tma_cluster2:split_k=4 hgemm_v2_wgmma_tma_cluster2:split_k=8 \
        hgemm_v2_wgmma_tma_128x128_cluster2:split_k=2 hgemm_v2_wgmma_tma_128x128_cluster2:split_k=4 \
        hgemm_v2_wgmma_tma_128x128_cluster2x2:split_k=2 hgemm_v2_wgmma_tma_128x128_cluster2x2:split_k=4 \
        hgemm_v2_wgmma_tma_128x192_cluster2:split_k=2 hgemm_v2_wgmma_tma_128x64_cluster2:split_k=2 \
      --json docs/benchmarks/${gpu}_tune_cluster_split_fp16.json --markdown docs/benchmarks/${gpu}_tune_cluster_split_fp16.md
    # where the table's choice moved to a cluster row, the two choices side by side with more repeats
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --repeats 7 --no-progress \
      --shapes 512x512x16384 1000x1000x16384 4096x1000x4096 4096x1000x16384 512x512x512 1000x1000x4096 \
      --variants hgemm_v2_wgmma_tma hgemm_v2_wgmma_tma_cluster2 hgemm_v2_wgmma_tma:split_k=4 hgemm_v2_wgmma_tma_cluster2:split_k=4 \
        hgemm_v2_wgmma_tma_128x128:split_k=8 hgemm_v2_wgmma_tma_128x128_cluster2x2:split_k=4 hgemm_v2_wgmma_tma_128x128_cluster2x2 \
      --json docs/benchmarks/${gpu}_tune_cluster_choices_fp16.json --markdown docs/benchmarks/${gpu}_tune_cluster_choices_fp16.md
    ;;
  tune-streamk)  # the stream-K rows on the sweep and the square, odd and target shapes
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --shapes sweep square odd 70000x128x32768 --repeats 3 --no-progress \
      --variants hgemm_v2_wgmma_tma_streamk hgemm_v2_wgmma_tma_128x128_streamk \
      --json docs/benchmarks/${gpu}_tune_streamk_fp16.json --markdown docs/benchmarks/${gpu}_tune_streamk_fp16.md
    ;;
  tune-deep)  # long K on few outputs: K in 128 or 256 slices (fp32)
    deep="1x1x16384 16x16x16384 64x64x16384 128x128x16384 1x1x4096 16x16x4096 64x64x4096 128x128x4096 512x512x16384"
    python3 -m polygemm bench --mode kernel --device cuda --dtype float32 --shapes $deep --repeats 3 --no-progress \
      --variants cm_v13_cp_async_narrow_tile:split_k=64 cm_v13_cp_async_narrow_tile:split_k=128 cm_v13_cp_async_narrow_tile:split_k=256 \
        cm_v14_cp_async_short_tile:split_k=128 cm_v14_cp_async_short_tile:split_k=256 \
      --json docs/benchmarks/${gpu}_tune_deep_fp32.json --markdown docs/benchmarks/${gpu}_tune_deep_fp32.md
    # (the skinny rungs' long-K measurements are tune-skinny's)
    ;;
  tune-tiles)  # the short-side tiles (a 64-row or 64-column threadblock tile) unsplit on the sweep, and split where a
               # result is thin or the tiles few
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --shapes sweep --repeats 3 --no-progress \
      --variants hgemm_v2_wgmma_tma_128x64 hgemm_v2_wgmma_tma_64x256 \
      --json docs/benchmarks/${gpu}_tune_tiles_fp16.json --markdown docs/benchmarks/${gpu}_tune_tiles_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float32 --shapes sweep --repeats 3 --no-progress \
      --variants cm_v14_cp_async_short_tile \
      --json docs/benchmarks/${gpu}_tune_tiles_fp32.json --markdown docs/benchmarks/${gpu}_tune_tiles_fp32.md
    thin="16x4096x4096 4096x16x4096 64x4096x4096 4096x64x4096 128x4096x4096 4096x128x4096 64x4096x16384 4096x64x16384 1000x1000x4096 1000x1000x16384 512x512x16384 64x64x4096 1x8192x8192 8192x1x8192 1x4096x4096 4096x1x4096 1x4096x16384 4096x1x16384 16x4096x16384 4096x16x16384 128x4096x16384 4096x128x16384 8192x64x512 64x8192x512"
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --shapes $thin --repeats 3 --no-progress \
      --variants hgemm_v2_wgmma_tma_128x64:split_k=2 hgemm_v2_wgmma_tma_128x64:split_k=4 hgemm_v2_wgmma_tma_128x64:split_k=8 \
        hgemm_v2_wgmma_tma_64x256:split_k=2 hgemm_v2_wgmma_tma_64x256:split_k=4 hgemm_v2_wgmma_tma_64x256:split_k=8 hgemm_v2_wgmma_tma_64x256:split_k=16 \
      --json docs/benchmarks/${gpu}_tune_tiles_split_fp16.json --markdown docs/benchmarks/${gpu}_tune_tiles_split_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float32 --shapes $thin --repeats 3 --no-progress \
      --variants cm_v14_cp_async_short_tile:split_k=2 cm_v14_cp_async_short_tile:split_k=4 cm_v14_cp_async_short_tile:split_k=8 \
        cm_v14_cp_async_short_tile:split_k=16 cm_v14_cp_async_short_tile:split_k=32 \
      --json docs/benchmarks/${gpu}_tune_tiles_split_fp32.json --markdown docs/benchmarks/${gpu}_tune_tiles_split_fp32.md
    ;;
  retune)  # the tuning tables from the committed measurements (no GPU needed); the sweep's and the targets'
          # kernel-mode records measure auto's own choices, so a choice that measured slow anchors on that
    # first, newest first: this session's runs (at a shape measured in several runs the first
    # file's record anchors a rung): the H200's sweep of auto's choices and its side-by-side runs
    # of the candidates where auto measured short; the H100's side-by-side runs of the small and
    # mid shapes (where an older run's slow cuBLAS made rungs look faster than they run) and of
    # the 64x64 row. First of all: side-by-side runs at shapes off the sweep where auto measured
    # short (H100: 2000x2000x8192 and 6144x1536x1024 on stream-K, 256x256x65536, thin N); then
    # the 64x32 col row beside the rows it displaced or nearly
    # displaced, at the shapes where it did (H100, one run); last, its first runs, which measured
    # other rows beside it: placed last, they add the new row without displacing others' anchors.
    # Newest and first of all: the persistent cluster rows beside the rows they displaced (H100, one
    # run), their sweep run last (two rungs a shape: its vendor median is left to chance). First of
    # those: the language-model heads (every row auto may choose, side by side), then the thin
    # shapes the H100's sweep measured short, every row that runs them side by side
    python3 tools/update_tuning.py docs/benchmarks/h100_tune_lm_head_all_fp16.json docs/benchmarks/h100_tune_thin_choices_fp16.json docs/benchmarks/h100_tune_cluster_persistent_choices_fp16.json docs/benchmarks/h100_tune_offsweep2_fp16.json docs/benchmarks/h100_tune_offsweep_fp16.json docs/benchmarks/h100_tune_deep_fp16.json \
      docs/benchmarks/h100_tune_thin_n_fp16.json docs/benchmarks/h100_tune_64x32_col_choices_fp16.json docs/benchmarks/h100_tune_settled_8192_fp16.json \
      docs/benchmarks/h200_tune_tma_store_k512_fp16.json docs/benchmarks/h200_tune_tma_store_fp16.json \
      docs/benchmarks/h200_tune_session29g_fp16.json docs/benchmarks/h200_tune_session29f_fp16.json \
      docs/benchmarks/h200_tune_session29e_fp16.json docs/benchmarks/h200_tune_session29d_fp16.json \
      docs/benchmarks/h200_tune_session29c_fp16.json docs/benchmarks/h200_tune_session29b_fp16.json \
      docs/benchmarks/h200_tune_session29_fp16.json docs/benchmarks/h200_tune_64x128_fp16.json \
      docs/benchmarks/h200_sweep_kernel_fp16_s28.json \
      docs/benchmarks/h200_tune_session28f_fp16.json docs/benchmarks/h200_tune_session28e_fp16.json \
      docs/benchmarks/h200_tune_session28d_fp16.json docs/benchmarks/h200_tune_session28c_fp16.json \
      docs/benchmarks/h200_tune_session28b_fp16.json docs/benchmarks/h200_tune_session28_fp16.json \
      docs/benchmarks/h100_tune_64x64_small_fp16.json docs/benchmarks/h100_tune_64x64_fp16.json \
      docs/benchmarks/h100_tune_small3_fp16.json docs/benchmarks/h100_tune_small_fp16.json docs/benchmarks/h100_tune_small2_fp16.json \
      docs/benchmarks/h200_tune_fp16.json docs/benchmarks/h200_tune_wide_fp16.json docs/benchmarks/h200_tune_persistent_fp16.json \
      docs/benchmarks/h200_tune_skinny_fp16.json docs/benchmarks/h200_tune_batched_fp16.json docs/benchmarks/h200_tune_split_fp16.json \
      docs/benchmarks/h200_tune_big_fp16.json docs/benchmarks/h200_tune_autopass1_fp16.json docs/benchmarks/h200_sweep_kernel_fp16.json \
      docs/benchmarks/h200_tune_tiles_fp16.json docs/benchmarks/h200_tune_tiles_split_fp16.json docs/benchmarks/h200_tune_skinny_long_fp16.json \
      docs/benchmarks/h200_tune_streamk_fp16.json docs/benchmarks/h200_targets_kernel_fp16.json docs/benchmarks/h200_targets_big_fp16.json \
      docs/benchmarks/h100_tune_skinny_fp16.json docs/benchmarks/h100_tune_skinny_long_fp16.json \
      docs/benchmarks/h200_tune_cluster_fp16.json docs/benchmarks/h100_tune_cluster_fp16.json \
      docs/benchmarks/h200_tune_cluster2x2_fp16.json docs/benchmarks/h100_tune_cluster2x2_fp16.json \
      docs/benchmarks/h100_tune_cluster256_fp16.json docs/benchmarks/h100_tune_cluster_split_fp16.json \
      docs/benchmarks/h100_tune_cluster_choices_fp16.json \
      docs/benchmarks/h100_tune_64x32_col_fp16.json docs/benchmarks/h100_tune_64x32_col_sweep_fp16.json \
      docs/benchmarks/h100_tune_cluster_persistent_fp16.json
    python3 tools/update_tuning.py docs/benchmarks/h200_tune_v12_split_fp32.json docs/benchmarks/h200_tune_v12_split_big_fp32.json \
      docs/benchmarks/h200_tune_batched_v12_fp32.json docs/benchmarks/h200_tune_fp32.json docs/benchmarks/h200_tune_wide_fp32.json docs/benchmarks/h200_tune_skinny_fp32.json \
      docs/benchmarks/h200_tune_split_fp32.json docs/benchmarks/h200_sweep_kernel_fp32.json \
      docs/benchmarks/h200_tune_tiles_fp32.json docs/benchmarks/h200_tune_tiles_split_fp32.json docs/benchmarks/h200_tune_deep_fp32.json \
      docs/benchmarks/h200_tune_skinny_long_fp32.json docs/benchmarks/h200_targets_kernel_fp32.json \
      docs/benchmarks/h100_tune_skinny_fp32.json docs/benchmarks/h100_tune_skinny_long_fp32.json
    ;;
  targets)  # issue 13's target shapes through auto, call and kernel mode, the vendor beside; the odd square settled; A past 2^31
    shapes="16x4096x4096 512x512x16384 8192x8192x512 1000x3000x2000 1x8192x8192 4096x16x4096 4095x4097x4093 17x4096x4096 4096x17x4096 1000x1000x4096 64x4096x4096"
    for dt in 16 32; do
      python3 -m polygemm bench --mode call --device cuda --dtype float$dt --shapes $shapes --repeats 5 --no-progress \
        --json docs/benchmarks/${gpu}_targets_call_fp$dt.json --markdown docs/benchmarks/${gpu}_targets_call_fp$dt.md
      python3 -m polygemm bench --mode call --result new --device cuda --dtype float$dt --shapes $shapes --repeats 5 --no-progress \
        --json docs/benchmarks/${gpu}_targets_call_new_fp$dt.json --markdown docs/benchmarks/${gpu}_targets_call_new_fp$dt.md
      python3 -m polygemm bench --mode kernel --device cuda --dtype float$dt --variants auto --shapes $shapes --repeats 5 --no-progress \
        --json docs/benchmarks/${gpu}_targets_kernel_fp$dt.json --markdown docs/benchmarks/${gpu}_targets_kernel_fp$dt.md
    done
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --variants auto --shapes 4095x4097x4093 --repeats 5 --settle 1 \
      --no-progress --json docs/benchmarks/${gpu}_targets_settled_fp16.json --markdown docs/benchmarks/${gpu}_targets_settled_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --variants auto --shapes 70000x128x32768 --repeats 3 --no-progress \
      --json docs/benchmarks/${gpu}_targets_big_fp16.json --markdown docs/benchmarks/${gpu}_targets_big_fp16.md
    python3 -m polygemm bench --mode call --device cuda --dtype float16 --shapes 70000x128x32768 --repeats 3 --no-progress \
      --json docs/benchmarks/${gpu}_targets_big_call_fp16.json --markdown docs/benchmarks/${gpu}_targets_big_call_fp16.md
    ;;
  tune-split)  # split-K measured (rung + its in-launch reduction), so auto's split candidates anchor on measured splits
    split_shapes="16x4096x4096 2x4096x4096 1x8192x8192 8192x1x8192 16x8192x8192 4096x16x4096 4096x17x4096 32x4096x4096 128x4096x4096 512x512x16384 16x1024x16384 1024x1024x8192 1000x1000x4096 256x4096x8192 1000x3000x2000 16x16x4096 64x64x4096 128x128x4096 512x512x4096 64x64x16384 128x128x16384 64x64x512 128x128x512 4096x64x4096 4096x128x4096 4096x64x16384 128x4096x16384"
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --shapes $split_shapes --repeats 5 --no-progress \
      --variants hgemm_v2_wgmma_tma:split_k=2 hgemm_v2_wgmma_tma:split_k=4 hgemm_v2_wgmma_tma:split_k=8 hgemm_v3_wgmma_pingpong:split_k=2 \
        hgemm_v3_wgmma_pingpong:split_k=4 hgemm_v3_wgmma_pingpong:split_k=8 hgemm_v3_wgmma_pingpong:split_k=16 hgemm_v3_wgmma_pingpong:split_k=32 \
        hgemm_v2_wgmma_tma_128x192:split_k=2 hgemm_v2_wgmma_tma_128x192:split_k=4 hgemm_v1_mma_ldmatrix:split_k=8 \
        hgemm_v2_wgmma_tma_128x128:split_k=2 hgemm_v2_wgmma_tma_128x128:split_k=4 hgemm_v2_wgmma_tma_128x128:split_k=8 \
      --json docs/benchmarks/${gpu}_tune_split_fp16.json --markdown docs/benchmarks/${gpu}_tune_split_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float32 --shapes $split_shapes --repeats 5 --no-progress \
      --variants cm_v13_cp_async_narrow_tile:split_k=2 cm_v13_cp_async_narrow_tile:split_k=4 cm_v13_cp_async_narrow_tile:split_k=8 \
        cm_v13_cp_async_narrow_tile:split_k=16 cm_v13_cp_async_narrow_tile:split_k=32 cm_v13_cp_async_narrow_tile:split_k=64 \
      --json docs/benchmarks/${gpu}_tune_split_fp32.json --markdown docs/benchmarks/${gpu}_tune_split_fp32.md
    # a tall product whose A is past 2^31 elements: which tile wastes least of N = 128
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --shapes 70000x128x32768 --repeats 3 --no-progress \
      --variants hgemm_v2_wgmma_tma hgemm_v2_wgmma_tma_128x192 hgemm_v3_wgmma_pingpong hgemm_v3_wgmma_pingpong:split_k=4 \
        hgemm_v3_wgmma_pingpong_persistent hgemm_v2_wgmma_tma_128x128 hgemm_v2_wgmma_tma_128x64 hgemm_v2_wgmma_tma_128x128_streamk \
      --json docs/benchmarks/${gpu}_tune_big_fp16.json --markdown docs/benchmarks/${gpu}_tune_big_fp16.md
    ;;
  bench)
    polygemm_() { python3 -m polygemm "$@"; }
    polygemm_ bench --mode kernel --device cuda --dtype float32 --variants all --shapes square odd --repeats 5 \
      --json docs/benchmarks/${gpu}_fp32.json --markdown docs/benchmarks/${gpu}_fp32.md --plot docs/benchmarks/${gpu}_fp32.png
    polygemm_ bench --mode kernel --device cuda --dtype float16 --variants all --shapes square odd --repeats 5 \
      --json docs/benchmarks/${gpu}_fp16.json --markdown docs/benchmarks/${gpu}_fp16.md --plot docs/benchmarks/${gpu}_fp16.png
    polygemm_ bench --mode kernel --device cuda --dtype float16 --variants all --shapes square odd --repeats 5 --settle 1 \
      --json docs/benchmarks/${gpu}_fp16_settled.json --markdown docs/benchmarks/${gpu}_fp16_settled.md
    polygemm_ bench --mode kernel --device cuda --dtype float32 --variants cm_v12_cp_async cm_v13_cp_async_narrow_tile \
      --shapes 4096x4096x4096 8192x8192x8192 4095x4097x4093 1000x3000x2000 --repeats 5 --settle 1 \
      --json docs/benchmarks/${gpu}_fp32_settled.json --markdown docs/benchmarks/${gpu}_fp32_settled.md
    musa_lib && polygemm_ bench --mode kernel --device musa --dtype float16 --variants wmma_s4000 --shapes 1024x1024x1024 4096x4096x4096 4095x4097x4093 --repeats 3 \
      --json docs/benchmarks/${gpu}_musa_cuda_flavor.json --markdown docs/benchmarks/${gpu}_musa_cuda_flavor.md
    ;;
  matrix)
    musa_lib
    python3 -m polygemm matrix --no-progress --json docs/matrix/${gpu}.json | tee docs/matrix/${gpu}.md
    ;;
  ncu)
    metrics=gpu__time_duration.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__inst_executed_op_ldsm.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed
    ncu --clock-control none --metrics "$metrics" --csv python3 tools/profile_rungs.py --dtype float32 --shape 2048x2048x2048 \
      cm_v01_naive cm_v02_smem_tiling cm_v03_register_index cm_v04_conflict_free_smem cm_v05_micro4x1 cm_v06_float4 cm_v07_micro4x4 cm_v08_micro8x8 \
      cm_v09_warp_tiling cm_v10_register_prefetch cm_v11_smem_double_buffer cm_v12_cp_async cm_v13_cp_async_narrow_tile \
      rm_v0_global_mem rm_v1_shared_mem rm_v2_thread_workload rm_v3_float4 rm_v4_register_tile rm_v5_register_float4 rm_v6_transpose_a_smem rm_v7_double_buffer \
      > docs/benchmarks/ncu_fp32_ladders.csv
    fp16=$(python3 -c "from polygemm.backends.cuda.variants import kernel_specs as k; print(' '.join(n for n, s in k().items() if s.dtype == 'float16'))")
    ncu --clock-control none --metrics "$metrics" --csv python3 tools/profile_rungs.py --dtype float16 --shape 4096x4096x4096 $fp16 \
      > docs/benchmarks/ncu_fp16.csv
    odd=gpu__time_duration.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed_op_ldsm.sum,smsp__inst_executed_op_ldgsts.sum,launch__registers_per_thread,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
    ncu --clock-control none --metrics "$odd" --csv python3 tools/profile_rungs.py --dtype float16 --shape 4095x4097x4093 hgemm_v1_mma_ldmatrix \
      > docs/benchmarks/ncu_fp16_odd.csv
    ;;
  ceiling)
    python3 -m polygemm ceiling --repeats 5 --json docs/benchmarks/${gpu}_mma_ceiling.json --markdown docs/benchmarks/${gpu}_mma_ceiling.md
    ;;
  hopper)  # issue 14: the wgmma rungs (each grid) at 4096^3 and 8192^3 and the no-regression shapes, fp16 and bf16,
           # interleaved and settled (kernel) beside cuBLAS, and through polygemm.gemm beside cupy.matmul / torch.matmul
    shapes="4096x4096x4096 8192x8192x8192 1000x3000x2000 8192x8192x512"
    rungs="auto hgemm_v2_wgmma_tma hgemm_v2_wgmma_tma_persistent hgemm_v2_wgmma_tma_cluster2_persistent hgemm_v2_wgmma_tma_streamk hgemm_v2_wgmma_tma_128x128_streamk hgemm_v3_wgmma_pingpong hgemm_v3_wgmma_pingpong_persistent hgemm_v3_wgmma_pingpong_persistent_tma_store"
    for dt in float16 bfloat16; do
      tag=$([ $dt = float16 ] && echo fp16 || echo bf16)
      python3 -m polygemm bench --mode kernel --device cuda --dtype $dt --variants $rungs --shapes $shapes --repeats 5 --no-progress \
        --json docs/benchmarks/${gpu}_hopper_kernel_$tag.json --markdown docs/benchmarks/${gpu}_hopper_kernel_$tag.md
      python3 -m polygemm bench --mode kernel --device cuda --dtype $dt --variants $rungs --shapes $shapes --repeats 5 --settle 1 --no-progress \
        --json docs/benchmarks/${gpu}_hopper_settled_$tag.json --markdown docs/benchmarks/${gpu}_hopper_settled_$tag.md
      python3 -m polygemm bench --mode call --device cuda --dtype $dt --shapes $shapes --repeats 5 --no-progress \
        $([ $dt = bfloat16 ] && echo --array-lib torch) --json docs/benchmarks/${gpu}_hopper_call_$tag.json --markdown docs/benchmarks/${gpu}_hopper_call_$tag.md
    done
    ;;
  hopper-cluster)  # issues 13 and 14: the 2-CTA cluster builds beside the one-CTA builds of the same tiles and the shipped
                  # persistent builds, shuffled rounds beside cuBLAS
    python3 docs/benchmarks/epilogue_bench.py --rounds 5 --shuffle \
      --shapes 4096x4096x4096 8192x8192x8192 8192x8192x512 1000x3000x2000 1000x1000x4096 1000x1000x16384 \
      --only v2_e1_g8_persistent v2_e1_g8_c2 v2_e1_g8_c2_persistent v2_e1_g8_c2_persistent128 v3s6_e1_g4_persistent \
        v2bn192s5_e1_g8 v2bn192s5_e1_g8_c2 v2bn128s6_e1_g8 v2bn128s6_e1_g8_c2 v2bn128s6_e1_g8_c2_persistent v2bn64s8_e1_g8 v2bn64s8_e1_g8_c2 \
      --json docs/benchmarks/${gpu}_cluster.json
    # 2 x 2 clusters (A multicast along N as well), beside the 2 x 1 builds
    python3 docs/benchmarks/epilogue_bench.py --rounds 5 --shuffle --shapes 4096x4096x4096 8192x8192x8192 1000x3000x2000 1000x1000x4096 8192x8192x512 \
      --only v2_e1_g8_persistent v3s6_e1_g4_persistent v2_e1_g8_c2x2 v2_e1_g8_c2x2_persistent128 v2bn192s5_e1_g8_c2 v2bn192s5_e1_g8_c2x2 v2bn192s5_e1_g8_c1x2 \
        v2bn128s6_e1_g8_c2x2 v2bn64s8_e1_g8_c2 v2bn64s8_e1_g8_c2x2 --json docs/benchmarks/${gpu}_cluster2x2.json
    ;;
  small-ncu)  # issue 13: the launch-sized fp16 shapes under the profiler, our rungs beside cuBLAS's kernels (one launch each)
    M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__cluster_dim_x,sm__cycles_active.avg,gpc__cycles_elapsed.max
    for spec in "4096x16x4096 hgemm_v2_wgmma_tma_128x64 hgemm_v2_wgmma_tma_128x64:split_k=4 skinny_v1_fp16_col cublas" \
                "17x4096x4096 hgemm_v2_wgmma_tma_128x128:split_k=4 hgemm_v3_wgmma_pingpong:split_k=8 skinny_v2_fp16_row cublas" \
                "512x512x16384 hgemm_v2_wgmma_tma_128x128:split_k=8 cublas"; do
      set -- $spec; shape=$1; shift
      ncu --clock-control none --csv --metrics $M python3 tools/profile_rungs.py --dtype float16 --shape $shape "$@" \
        > docs/benchmarks/ncu_small_$shape.csv
    done
    ;;
  hopper-ncu)  # issue 14: the profiler on the wgmma rungs, each grid (one launch each; kernels named hgemm*)
    for shape in 4096x4096x4096 8192x8192x512; do
      ncu --clock-control none -k regex:hgemm --csv --metrics \
        gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,launch__registers_per_thread,smsp__inst_executed.sum \
        python3 tools/profile_rungs.py --dtype float16 --shape $shape hgemm_v2_wgmma_tma hgemm_v2_wgmma_tma_persistent \
        hgemm_v3_wgmma_pingpong hgemm_v3_wgmma_pingpong_persistent hgemm_v3_wgmma_pingpong_persistent_tma_store > docs/benchmarks/ncu_persistent_$shape.csv
    done
    # the epilogue's share: the persistent builds with and without their C store (HG2_EPILOGUE=2)
    ncu --clock-control none -k regex:hgemm --csv --metrics \
      gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
      python3 docs/benchmarks/epilogue_bench.py --profile 4096x4096x4096 v2_e1_g8_persistent v2_e2_g8_persistent_noepi \
      v3s6_e1_g4_persistent v3s6_e2_g4_persistent_noepi > docs/benchmarks/ncu_epilogue_share.csv
    # the 2-CTA cluster (B multicast) beside the one-CTA build: where its warps wait, what L2 moves
    ncu --clock-control none -k regex:hgemm --csv --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
      python3 docs/benchmarks/epilogue_bench.py --profile 4096x4096x4096 v2_e1_g8_persistent v2_e1_g8_c2_persistent \
      > docs/benchmarks/ncu_cluster.csv
    ncu --clock-control none -k regex:hgemm --csv --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
      python3 docs/benchmarks/epilogue_bench.py --profile 1000x3000x2000 v2bn192s5_e1_g8 v2bn192s5_e1_g8_c2 \
      > docs/benchmarks/ncu_cluster_1000x3000x2000.csv
    ;;
  sweep)  # issue 13: the sweep preset (60 shapes) through the raw launch of auto's rung beside cuBLAS, and through
          # polygemm.gemm beside cupy.matmul; the heatmap of the ratio and its geometric mean and worst shape
    for dt in 16 32; do
      for mode in kernel call; do
        python3 -m polygemm bench --mode $mode --device cuda --dtype float$dt --variants auto --shapes sweep --repeats auto \
          --no-progress --json docs/benchmarks/${gpu}_sweep_${mode}_fp$dt.json
      done
      python3 -m polygemm plot docs/benchmarks/${gpu}_sweep_kernel_fp$dt.json docs/benchmarks/${gpu}_sweep_call_fp$dt.json --heatmap \
        -o docs/benchmarks/${gpu}_sweep_fp$dt.png | tee docs/benchmarks/${gpu}_sweep_fp$dt.txt
    done
    ;;
esac
