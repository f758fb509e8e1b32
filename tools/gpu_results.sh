#!/usr/bin/env bash
# Measure GPU results (run from the repository root on a GPU machine):
#   tools/gpu_results.sh TARGET [OUT]     (OUT: the folder written, gpu-results/ by default)
# Targets: real (the real-workload preset through polygemm.gemm, fp16, bf16 and fp32, against the faster of
# torch.matmul and cupy.matmul), verify (verify="raise" through the call and the fault campaign), precision (float32 at
# each precision, float64 and complex through the call beside the faster vendor), call (squares and odd sizes through polygemm.gemm, NumPy in and out, the raw kernels, strided
# batches), targets (the target shapes through auto), hopper (the wgmma rungs at the large squares),
# sweep (60 shapes through auto), bench (every rung of both ladders), matrix (the conformance suite),
# ceiling (the mma.sync ceiling), ncu and small-ncu (Nsight Compute counters), and the tuning runs
# tune, tune-skinny, tune-split, tune-tiles, tune-deep, tune-streamk, tune-cluster, tune-cluster-split,
# tune-cluster-persistent, tune-thin-choices, tune-lm-head.
# Files are named for the GPU they ran on (h200_..., h100_...). A tuning run joins auto's tables with
#   python tools/update_tuning.py --add OUT/<file>.json
# (see polygemm/backends/cuda/tuning/measurements/README.md); figures for the results page go into
# docs/results/ (see tools/results_page.py).
set -uo pipefail
what=${1:?real, verify, precision, call, targets, tune, tune-skinny, tune-split, tune-tiles, tune-deep, tune-streamk, tune-cluster, tune-cluster-split, tune-cluster-persistent, tune-thin-choices, tune-lm-head, hopper, bench, matrix, ncu, small-ncu, ceiling or sweep}
out=${2:-gpu-results}
# without a usable cuda backend (or, for the ncu targets, without ncu) every target would write
# all-skip tables or empty files and exit 0, so refuse before anything is written
python3 - "$what" <<'PY' || exit 2
import sys, polygemm
info = {i.name: i for i in polygemm.backends()}["cuda"]
if not info.available:
  sys.exit(f"tools/gpu_results.sh {sys.argv[1]} needs the cuda backend (an NVIDIA GPU, its driver and PyCUDA); "
           f"nothing was written: {info.reason}")
PY
case "$what" in
  *ncu) command -v ncu >/dev/null || { echo "tools/gpu_results.sh $what needs Nsight Compute's ncu on PATH; nothing was written" >&2; exit 2; } ;;
esac
mkdir -p "$out"
# files are named by the GPU they ran on: update_tuning.py paces other GPUs' records to the table GPU's vendor
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -oiE 'h100|h200' | tr 'A-Z' 'a-z')
gpu=${gpu:-h200}
musa_lib() {  # the cuda flavor of libpolygemm_musa, built once
  if [ ! -f build/musa-cuda/libpolygemm_musa.so ]; then
    cmake -S . -B build/musa-cuda -DPOLYGEMM_MUSA_FLAVOR=cuda >/dev/null && cmake --build build/musa-cuda -j 16 >/dev/null || return 1
  fi
  export POLYGEMM_MUSA_LIBRARY=$PWD/build/musa-cuda/libpolygemm_musa.so POLYGEMM_MUSA_EMULATION=1
}
case "$what" in
  real)  # docs/results/<gpu>-real-<dtype>.json come from these files
    for dt in float16 bfloat16 float32; do
      python3 -m polygemm bench --mode call --device cuda --dtype $dt --shapes real --repeats auto --no-progress \
        --json $out/${gpu}-real-$dt.json --markdown $out/${gpu}-real-$dt.md
    done
    ;;
  verify)  # docs/results/<gpu>-verify.json: verify="raise" through the call, then the fault campaign (10,000 of each)
    python3 tools/verify_campaign.py --device cuda --out $out/${gpu}-verify.json --no-campaign --repeats 5
    python3 tools/verify_campaign.py --device cuda --out $out/${gpu}-verify.json --append --no-overhead --time-limit 480
    ;;
  precision)  # docs/results/<gpu>-precision.json: float32 at each precision, float64 and complex beside the faster vendor
    python3 tools/precision_bench.py --dtypes float32 --precision highest medium --shapes 2048x2048x2048 4096x4096x4096 \
      8192x8192x8192 --repeats 3 --out $out/${gpu}-precision-float32.json
    python3 tools/precision_bench.py --dtypes float64 complex64 complex128 --shapes 4096x4096x4096 8192x8192x8192 --repeats 3 \
      --out $out/${gpu}-precision-complex.json
    ;;
  call)
    for dt in 16 32; do
      python3 -m polygemm bench --mode call --device cuda --dtype float$dt --shapes overhead square odd --repeats 5 \
        --json $out/${gpu}_call_fp$dt.json --markdown $out/${gpu}_call_fp$dt.md
    done
    python3 -m polygemm bench --mode call --inputs numpy --device cuda --dtype float32 --shapes overhead 4096x4096x4096 --repeats 5 \
      --json $out/${gpu}_call_numpy.json --markdown $out/${gpu}_call_numpy.md
    # the raw kernels auto picks, in the same run (set beside the call)
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --variants hgemm_v3_wgmma_pingpong hgemm_v2_wgmma_tma hgemm_v1_mma_ldmatrix \
      --shapes overhead square odd --repeats 5 --json $out/${gpu}_kernel_fp16.json --markdown $out/${gpu}_kernel_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float32 --variants cm_v12_cp_async cm_v13_cp_async_narrow_tile \
      --shapes overhead square odd --repeats 5 --json $out/${gpu}_kernel_fp32.json --markdown $out/${gpu}_kernel_fp32.md
    # strided batches per call beside torch.matmul on 3-D tensors (cublasGemmStridedBatchedEx)
    for dt in 16 32; do
      python3 -m polygemm bench --mode call --device cuda --dtype float$dt --array-lib torch --batch 64 --shapes 512x512x512 128x128x128 \
        --repeats 5 --json $out/${gpu}_batched_fp$dt.json --markdown $out/${gpu}_batched_fp$dt.md
    done
    ;;
  tune)  # the measurements auto's cost model is fitted to and anchored on
         # (with the sweep's kernel-mode records: measurements of auto's own choices anchor them)
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 \
      --variants hgemm_v1_mma_ldmatrix hgemm_v2_wgmma_tma hgemm_v2_wgmma_tma_128x192 hgemm_v3_wgmma_pingpong \
      --shapes overhead square odd --repeats 5 --no-progress \
      --json $out/${gpu}_tune_fp16.json --markdown $out/${gpu}_tune_fp16.md
    # every unsplit rung on the sweep's shapes (auto's model anchors on the nearest measurement)
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --shapes sweep --repeats 5 --no-progress \
      --variants hgemm_v1_mma_ldmatrix hgemm_v2_wgmma_tma hgemm_v2_wgmma_tma_128x192 hgemm_v2_wgmma_tma_128x128 hgemm_v3_wgmma_pingpong \
      --json $out/${gpu}_tune_wide_fp16.json --markdown $out/${gpu}_tune_wide_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float32 --shapes sweep --repeats 5 --no-progress \
      --variants cm_v12_cp_async cm_v13_cp_async_narrow_tile \
      --json $out/${gpu}_tune_wide_fp32.json --markdown $out/${gpu}_tune_wide_fp32.md
    # the wgmma rungs on a persistent grid, on the shapes above and the sweep's
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 \
      --variants hgemm_v2_wgmma_tma_persistent hgemm_v3_wgmma_pingpong_persistent --shapes overhead square odd sweep --repeats 5 --no-progress \
      --json $out/${gpu}_tune_persistent_fp16.json --markdown $out/${gpu}_tune_persistent_fp16.md
    python3 -m polygemm bench --mode call --device cuda --dtype float16 --array-lib torch --batch 64 \
      --variants hgemm_v1_mma_ldmatrix hgemm_v2_wgmma_tma hgemm_v2_wgmma_tma_128x192 hgemm_v2_wgmma_tma_128x128 hgemm_v2_wgmma_tma_128x64 \
        hgemm_v2_wgmma_tma_64x256 hgemm_v3_wgmma_pingpong --shapes 512x512x512 128x128x128 1024x1024x1024 \
      --repeats 5 --no-progress --json $out/${gpu}_tune_batched_fp16.json --markdown $out/${gpu}_tune_batched_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float32 \
      --variants cm_v12_cp_async cm_v13_cp_async_narrow_tile --shapes overhead square odd --repeats 5 --no-progress \
      --json $out/${gpu}_tune_fp32.json --markdown $out/${gpu}_tune_fp32.md
    bash "$0" tune-skinny "$out"
    bash "$0" tune-split "$out"
    bash "$0" tune-tiles "$out"
    bash "$0" tune-deep "$out"
    bash "$0" tune-streamk "$out"
    bash "$0" tune-cluster "$out"
    ;;
  tune-skinny)  # the skinny rungs (fp16 v1, v2; fp32 v1, v2, v3) on the skinny preset, the sweep's thin shapes (a side <= 32)
                # and long K (update_tuning.py paces another GPU's records to the table GPU's vendor)
    thin="1x1x512 16x16x512 1x8192x512 16x8192x512 8192x1x512 8192x16x512 1x1x4096 16x16x4096 1x4096x16384 16x4096x16384 4096x1x16384 4096x16x16384"
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 \
      --variants skinny_v1_fp16_row skinny_v1_fp16_col skinny_v2_fp16_row skinny_v2_fp16_col hgemm_v3_wgmma_pingpong \
      --shapes skinny 1x1x4096 1x1x16384 16x16x16384 1x16x16384 16x1x16384 $thin --repeats 5 --no-progress \
      --json $out/${gpu}_tune_skinny_fp16.json --markdown $out/${gpu}_tune_skinny_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float32 \
      --variants skinny_v1_fp32_row skinny_v1_fp32_col skinny_v2_fp32_row skinny_v2_fp32_col skinny_v3_fp32_row skinny_v3_fp32_col cm_v13_cp_async_narrow_tile \
      --shapes skinny 1x1x4096 1x1x16384 16x16x16384 1x16x16384 16x1x16384 $thin --repeats 5 --no-progress \
      --json $out/${gpu}_tune_skinny_fp32.json --markdown $out/${gpu}_tune_skinny_fp32.md
    long="16x4096x16384 4096x16x16384 17x4096x16384 1x4096x16384 4096x1x16384 16x8192x8192 1x8192x8192 8192x1x8192 17x4096x4096 4096x17x4096 32x4096x16384 4096x32x4096"
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --shapes $long --repeats 3 --no-progress \
      --variants skinny_v1_fp16_row skinny_v1_fp16_col skinny_v2_fp16_row skinny_v2_fp16_col \
      --json $out/${gpu}_tune_skinny_long_fp16.json --markdown $out/${gpu}_tune_skinny_long_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float32 --shapes $long --repeats 3 --no-progress \
      --variants skinny_v1_fp32_row skinny_v1_fp32_col skinny_v2_fp32_row skinny_v2_fp32_col skinny_v3_fp32_row skinny_v3_fp32_col \
      --json $out/${gpu}_tune_skinny_long_fp32.json --markdown $out/${gpu}_tune_skinny_long_fp32.md
    ;;
  tune-cluster)  # the 2-CTA cluster rows (B multicast) on the sweep and the square, odd and mid-size shapes
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --repeats 3 --no-progress \
      --shapes sweep square odd 1000x3000x2000 1000x1000x4096 1000x1000x16384 1024x1024x8192 2048x2048x2048 \
      --variants hgemm_v2_wgmma_tma_128x192_cluster2 hgemm_v2_wgmma_tma_128x128_cluster2 hgemm_v2_wgmma_tma_128x64_cluster2 \
      --json $out/${gpu}_tune_cluster_fp16.json --markdown $out/${gpu}_tune_cluster_fp16.md
    # the 2 x 2 cluster row (A shared along N as well)
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --repeats 3 --no-progress \
      --shapes sweep square odd 1000x3000x2000 1000x1000x4096 1000x1000x16384 1024x1024x8192 2048x2048x2048 \
      --variants hgemm_v2_wgmma_tma_128x128_cluster2x2 \
      --json $out/${gpu}_tune_cluster2x2_fp16.json --markdown $out/${gpu}_tune_cluster2x2_fp16.md
    ;;
  tune-cluster-persistent)  # the persistent cluster rows on the sweep, the targets and mid-size to square products
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 \
      --variants hgemm_v2_wgmma_tma_cluster2_persistent hgemm_v2_wgmma_tma_128x128_cluster2_persistent \
      --shapes sweep 4096x4096x4096 8192x8192x8192 2000x2000x8192 6144x1536x1024 1536x6144x1024 3000x3000x3000 \
        8192x2000x1024 4096x4096x1024 4096x4096x2048 2048x8192x4096 --repeats 3 --no-progress \
      --json $out/${gpu}_tune_cluster_persistent_fp16.json --markdown $out/${gpu}_tune_cluster_persistent_fp16.md
    # side by side with the rows they compete with (two rungs a shape would leave the run's vendor median to chance)
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --variants hgemm_v2_wgmma_tma_cluster2_persistent \
      hgemm_v2_wgmma_tma_128x128_cluster2_persistent hgemm_v2_wgmma_tma_128x192_cluster2 hgemm_v2_wgmma_tma_64x128_cluster2 \
      hgemm_v2_wgmma_tma_cluster2 hgemm_v2_wgmma_tma_persistent hgemm_v3_wgmma_pingpong_persistent hgemm_v3_wgmma_pingpong_persistent_tma_store \
      --shapes 1000x3000x2000 1000x1000x4096 4096x1000x4096 4096x1000x16384 4096x4096x4096 8192x1000x512 8192x2000x1024 8192x8192x8192 \
        6144x1536x1024 --repeats 5 --no-progress \
      --json $out/${gpu}_tune_cluster_persistent_choices_fp16.json --markdown $out/${gpu}_tune_cluster_persistent_choices_fp16.md
    ;;
  tune-thin-choices)  # the thin shapes where auto's rung measures under 0.9x of cuBLAS, every row that
                      # could run them side by side, so each anchors on the same run's vendor
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --variants hgemm_v2_wgmma_tma_64x32_col \
      hgemm_v2_wgmma_tma_64x32_col:split_k=2 hgemm_v2_wgmma_tma_64x64 hgemm_v2_wgmma_tma_64x64:split_k=2 hgemm_v2_wgmma_tma_64x128 \
      hgemm_v2_wgmma_tma_64x128:split_k=2 hgemm_v2_wgmma_tma_64x128:split_k=4 hgemm_v2_wgmma_tma_128x64 hgemm_v2_wgmma_tma_128x64:split_k=2 \
      hgemm_v2_wgmma_tma_128x128 skinny_v2_fp16_row skinny_v1_fp16_col \
      --shapes 17x4096x4096 4096x16x4096 4096x128x4096 --repeats 5 --no-progress \
      --json $out/${gpu}_tune_thin_choices_fp16.json --markdown $out/${gpu}_tune_thin_choices_fp16.md
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
      --json $out/${gpu}_tune_lm_head_all_fp16.json --markdown $out/${gpu}_tune_lm_head_all_fp16.md
    ;;
  tune-cluster-split)  # the cluster rows in K-slices on the long-K mid-size shapes, and the 128x256 cluster row whole on the
                      # sweep's shapes auto offers cluster rows for (both result sides >= 512)
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --repeats 3 --no-progress \
      --shapes 512x512x512 1000x1000x512 4096x4096x512 8192x8192x512 1000x8192x512 8192x1000x512 512x512x4096 1000x1000x4096 \
        4096x4096x4096 8192x8192x4096 1000x4096x4096 4096x1000x4096 512x512x16384 1000x1000x16384 4096x4096x16384 8192x8192x16384 \
        1000x4096x16384 4096x1000x16384 4095x4097x4093 1000x3000x2000 1024x1024x8192 2048x2048x8192 \
      --variants hgemm_v2_wgmma_tma_cluster2 \
      --json $out/${gpu}_tune_cluster256_fp16.json --markdown $out/${gpu}_tune_cluster256_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --repeats 3 --no-progress \
      --shapes 512x512x4096 1000x1000x4096 1000x4096x4096 4096x1000x4096 512x512x16384 1000x1000x16384 1000x4096x16384 \
        4096x1000x16384 1024x1024x8192 2048x2048x8192 \
      --variants hgemm_v2_wgmma_tma_cluster2:split_k=2 hgemm_v2_wgmma_tma_cluster2:split_k=4 hgemm_v2_wgmma_tma_cluster2:split_k=8 \
        hgemm_v2_wgmma_tma_128x128_cluster2:split_k=2 hgemm_v2_wgmma_tma_128x128_cluster2:split_k=4 \
        hgemm_v2_wgmma_tma_128x128_cluster2x2:split_k=2 hgemm_v2_wgmma_tma_128x128_cluster2x2:split_k=4 \
        hgemm_v2_wgmma_tma_128x192_cluster2:split_k=2 hgemm_v2_wgmma_tma_128x64_cluster2:split_k=2 \
      --json $out/${gpu}_tune_cluster_split_fp16.json --markdown $out/${gpu}_tune_cluster_split_fp16.md
    # where the table chooses a cluster row, it and the runner-up side by side with more repeats
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --repeats 7 --no-progress \
      --shapes 512x512x16384 1000x1000x16384 4096x1000x4096 4096x1000x16384 512x512x512 1000x1000x4096 \
      --variants hgemm_v2_wgmma_tma hgemm_v2_wgmma_tma_cluster2 hgemm_v2_wgmma_tma:split_k=4 hgemm_v2_wgmma_tma_cluster2:split_k=4 \
        hgemm_v2_wgmma_tma_128x128:split_k=8 hgemm_v2_wgmma_tma_128x128_cluster2x2:split_k=4 hgemm_v2_wgmma_tma_128x128_cluster2x2 \
      --json $out/${gpu}_tune_cluster_choices_fp16.json --markdown $out/${gpu}_tune_cluster_choices_fp16.md
    ;;
  tune-streamk)  # the stream-K rows on the sweep and the square, odd and target shapes
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --shapes sweep square odd 70000x128x32768 --repeats 3 --no-progress \
      --variants hgemm_v2_wgmma_tma_streamk hgemm_v2_wgmma_tma_128x128_streamk \
      --json $out/${gpu}_tune_streamk_fp16.json --markdown $out/${gpu}_tune_streamk_fp16.md
    ;;
  tune-deep)  # long K on few outputs: K in 128 or 256 slices (fp32)
    deep="1x1x16384 16x16x16384 64x64x16384 128x128x16384 1x1x4096 16x16x4096 64x64x4096 128x128x4096 512x512x16384"
    python3 -m polygemm bench --mode kernel --device cuda --dtype float32 --shapes $deep --repeats 3 --no-progress \
      --variants cm_v13_cp_async_narrow_tile:split_k=64 cm_v13_cp_async_narrow_tile:split_k=128 cm_v13_cp_async_narrow_tile:split_k=256 \
        cm_v14_cp_async_short_tile:split_k=128 cm_v14_cp_async_short_tile:split_k=256 \
      --json $out/${gpu}_tune_deep_fp32.json --markdown $out/${gpu}_tune_deep_fp32.md
    # (the skinny rungs' long-K measurements are tune-skinny's)
    ;;
  tune-tiles)  # the short-side tiles (a 64-row or 64-column threadblock tile) unsplit on the sweep, and split where a
               # result is thin or the tiles few
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --shapes sweep --repeats 3 --no-progress \
      --variants hgemm_v2_wgmma_tma_128x64 hgemm_v2_wgmma_tma_64x256 \
      --json $out/${gpu}_tune_tiles_fp16.json --markdown $out/${gpu}_tune_tiles_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float32 --shapes sweep --repeats 3 --no-progress \
      --variants cm_v14_cp_async_short_tile \
      --json $out/${gpu}_tune_tiles_fp32.json --markdown $out/${gpu}_tune_tiles_fp32.md
    thin="16x4096x4096 4096x16x4096 64x4096x4096 4096x64x4096 128x4096x4096 4096x128x4096 64x4096x16384 4096x64x16384 1000x1000x4096 1000x1000x16384 512x512x16384 64x64x4096 1x8192x8192 8192x1x8192 1x4096x4096 4096x1x4096 1x4096x16384 4096x1x16384 16x4096x16384 4096x16x16384 128x4096x16384 4096x128x16384 8192x64x512 64x8192x512"
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --shapes $thin --repeats 3 --no-progress \
      --variants hgemm_v2_wgmma_tma_128x64:split_k=2 hgemm_v2_wgmma_tma_128x64:split_k=4 hgemm_v2_wgmma_tma_128x64:split_k=8 \
        hgemm_v2_wgmma_tma_64x256:split_k=2 hgemm_v2_wgmma_tma_64x256:split_k=4 hgemm_v2_wgmma_tma_64x256:split_k=8 hgemm_v2_wgmma_tma_64x256:split_k=16 \
      --json $out/${gpu}_tune_tiles_split_fp16.json --markdown $out/${gpu}_tune_tiles_split_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float32 --shapes $thin --repeats 3 --no-progress \
      --variants cm_v14_cp_async_short_tile:split_k=2 cm_v14_cp_async_short_tile:split_k=4 cm_v14_cp_async_short_tile:split_k=8 \
        cm_v14_cp_async_short_tile:split_k=16 cm_v14_cp_async_short_tile:split_k=32 \
      --json $out/${gpu}_tune_tiles_split_fp32.json --markdown $out/${gpu}_tune_tiles_split_fp32.md
    ;;
  targets)  # the target shapes through auto, call and kernel mode, the vendor beside; the odd square settled; A past 2^31
    shapes="16x4096x4096 512x512x16384 8192x8192x512 1000x3000x2000 1x8192x8192 4096x16x4096 4095x4097x4093 17x4096x4096 4096x17x4096 1000x1000x4096 64x4096x4096"
    for dt in 16 32; do
      python3 -m polygemm bench --mode call --device cuda --dtype float$dt --shapes $shapes --repeats 5 --no-progress \
        --json $out/${gpu}_targets_call_fp$dt.json --markdown $out/${gpu}_targets_call_fp$dt.md
      python3 -m polygemm bench --mode call --result new --device cuda --dtype float$dt --shapes $shapes --repeats 5 --no-progress \
        --json $out/${gpu}_targets_call_new_fp$dt.json --markdown $out/${gpu}_targets_call_new_fp$dt.md
      python3 -m polygemm bench --mode kernel --device cuda --dtype float$dt --variants auto --shapes $shapes --repeats 5 --no-progress \
        --json $out/${gpu}_targets_kernel_fp$dt.json --markdown $out/${gpu}_targets_kernel_fp$dt.md
    done
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --variants auto --shapes 4095x4097x4093 --repeats 5 --settle 1 \
      --no-progress --json $out/${gpu}_targets_settled_fp16.json --markdown $out/${gpu}_targets_settled_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --variants auto --shapes 70000x128x32768 --repeats 3 --no-progress \
      --json $out/${gpu}_targets_big_fp16.json --markdown $out/${gpu}_targets_big_fp16.md
    python3 -m polygemm bench --mode call --device cuda --dtype float16 --shapes 70000x128x32768 --repeats 3 --no-progress \
      --json $out/${gpu}_targets_big_call_fp16.json --markdown $out/${gpu}_targets_big_call_fp16.md
    ;;
  tune-split)  # split-K measured (rung + its in-launch reduction), so auto's split candidates anchor on measured splits
    split_shapes="16x4096x4096 2x4096x4096 1x8192x8192 8192x1x8192 16x8192x8192 4096x16x4096 4096x17x4096 32x4096x4096 128x4096x4096 512x512x16384 16x1024x16384 1024x1024x8192 1000x1000x4096 256x4096x8192 1000x3000x2000 16x16x4096 64x64x4096 128x128x4096 512x512x4096 64x64x16384 128x128x16384 64x64x512 128x128x512 4096x64x4096 4096x128x4096 4096x64x16384 128x4096x16384"
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --shapes $split_shapes --repeats 5 --no-progress \
      --variants hgemm_v2_wgmma_tma:split_k=2 hgemm_v2_wgmma_tma:split_k=4 hgemm_v2_wgmma_tma:split_k=8 hgemm_v3_wgmma_pingpong:split_k=2 \
        hgemm_v3_wgmma_pingpong:split_k=4 hgemm_v3_wgmma_pingpong:split_k=8 hgemm_v3_wgmma_pingpong:split_k=16 hgemm_v3_wgmma_pingpong:split_k=32 \
        hgemm_v2_wgmma_tma_128x192:split_k=2 hgemm_v2_wgmma_tma_128x192:split_k=4 hgemm_v1_mma_ldmatrix:split_k=8 \
        hgemm_v2_wgmma_tma_128x128:split_k=2 hgemm_v2_wgmma_tma_128x128:split_k=4 hgemm_v2_wgmma_tma_128x128:split_k=8 \
      --json $out/${gpu}_tune_split_fp16.json --markdown $out/${gpu}_tune_split_fp16.md
    python3 -m polygemm bench --mode kernel --device cuda --dtype float32 --shapes $split_shapes --repeats 5 --no-progress \
      --variants cm_v13_cp_async_narrow_tile:split_k=2 cm_v13_cp_async_narrow_tile:split_k=4 cm_v13_cp_async_narrow_tile:split_k=8 \
        cm_v13_cp_async_narrow_tile:split_k=16 cm_v13_cp_async_narrow_tile:split_k=32 cm_v13_cp_async_narrow_tile:split_k=64 \
      --json $out/${gpu}_tune_split_fp32.json --markdown $out/${gpu}_tune_split_fp32.md
    # a tall product whose A is past 2^31 elements: which tile wastes least of N = 128
    python3 -m polygemm bench --mode kernel --device cuda --dtype float16 --shapes 70000x128x32768 --repeats 3 --no-progress \
      --variants hgemm_v2_wgmma_tma hgemm_v2_wgmma_tma_128x192 hgemm_v3_wgmma_pingpong hgemm_v3_wgmma_pingpong:split_k=4 \
        hgemm_v3_wgmma_pingpong_persistent hgemm_v2_wgmma_tma_128x128 hgemm_v2_wgmma_tma_128x64 hgemm_v2_wgmma_tma_128x128_streamk \
      --json $out/${gpu}_tune_big_fp16.json --markdown $out/${gpu}_tune_big_fp16.md
    ;;
  bench)
    polygemm_() { python3 -m polygemm "$@"; }
    polygemm_ bench --mode kernel --device cuda --dtype float32 --variants all --shapes square odd --repeats 5 \
      --json $out/${gpu}_fp32.json --markdown $out/${gpu}_fp32.md --plot $out/${gpu}_fp32.png
    polygemm_ bench --mode kernel --device cuda --dtype float16 --variants all --shapes square odd --repeats 5 \
      --json $out/${gpu}_fp16.json --markdown $out/${gpu}_fp16.md --plot $out/${gpu}_fp16.png
    polygemm_ bench --mode kernel --device cuda --dtype float16 --variants all --shapes square odd --repeats 5 --settle 1 \
      --json $out/${gpu}_fp16_settled.json --markdown $out/${gpu}_fp16_settled.md
    polygemm_ bench --mode kernel --device cuda --dtype float32 --variants cm_v12_cp_async cm_v13_cp_async_narrow_tile \
      --shapes 4096x4096x4096 8192x8192x8192 4095x4097x4093 1000x3000x2000 --repeats 5 --settle 1 \
      --json $out/${gpu}_fp32_settled.json --markdown $out/${gpu}_fp32_settled.md
    musa_lib && polygemm_ bench --mode kernel --device musa --dtype float16 --variants wmma_s4000 --shapes 1024x1024x1024 4096x4096x4096 4095x4097x4093 --repeats 3 \
      --json $out/${gpu}_musa_cuda_flavor.json --markdown $out/${gpu}_musa_cuda_flavor.md
    ;;
  matrix)
    musa_lib
    python3 -m polygemm matrix --no-progress --json $out/${gpu}.json | tee $out/${gpu}.md
    ;;
  ncu)
    metrics=gpu__time_duration.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,smsp__inst_executed_op_ldsm.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed
    ncu --clock-control none --metrics "$metrics" --csv python3 tools/profile_rungs.py --dtype float32 --shape 2048x2048x2048 \
      cm_v01_naive cm_v02_smem_tiling cm_v03_register_index cm_v04_conflict_free_smem cm_v05_micro4x1 cm_v06_float4 cm_v07_micro4x4 cm_v08_micro8x8 \
      cm_v09_warp_tiling cm_v10_register_prefetch cm_v11_smem_double_buffer cm_v12_cp_async cm_v13_cp_async_narrow_tile \
      rm_v0_global_mem rm_v1_shared_mem rm_v2_thread_workload rm_v3_float4 rm_v4_register_tile rm_v5_register_float4 rm_v6_transpose_a_smem rm_v7_double_buffer \
      > $out/ncu_fp32_ladders.csv
    fp16=$(python3 -c "from polygemm.backends.cuda.variants import kernel_specs as k; print(' '.join(n for n, s in k().items() if s.dtype == 'float16'))")
    ncu --clock-control none --metrics "$metrics" --csv python3 tools/profile_rungs.py --dtype float16 --shape 4096x4096x4096 $fp16 \
      > $out/ncu_fp16.csv
    odd=gpu__time_duration.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed_op_ldsm.sum,smsp__inst_executed_op_ldgsts.sum,launch__registers_per_thread,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
    ncu --clock-control none --metrics "$odd" --csv python3 tools/profile_rungs.py --dtype float16 --shape 4095x4097x4093 hgemm_v1_mma_ldmatrix \
      > $out/ncu_fp16_odd.csv
    ;;
  ceiling)
    python3 -m polygemm ceiling --repeats 5 --json $out/${gpu}_mma_ceiling.json --markdown $out/${gpu}_mma_ceiling.md
    ;;
  hopper)  # the wgmma rungs (each grid) at 4096^3 and 8192^3 and the no-regression shapes, fp16 and bf16,
           # interleaved and settled (kernel) beside cuBLAS, and through polygemm.gemm beside cupy.matmul / torch.matmul
    shapes="4096x4096x4096 8192x8192x8192 1000x3000x2000 8192x8192x512"
    rungs="auto hgemm_v2_wgmma_tma hgemm_v2_wgmma_tma_persistent hgemm_v2_wgmma_tma_cluster2_persistent hgemm_v2_wgmma_tma_streamk hgemm_v2_wgmma_tma_128x128_streamk hgemm_v3_wgmma_pingpong hgemm_v3_wgmma_pingpong_persistent hgemm_v3_wgmma_pingpong_persistent_tma_store"
    for dt in float16 bfloat16; do
      tag=$([ $dt = float16 ] && echo fp16 || echo bf16)
      python3 -m polygemm bench --mode kernel --device cuda --dtype $dt --variants $rungs --shapes $shapes --repeats 5 --no-progress \
        --json $out/${gpu}_hopper_kernel_$tag.json --markdown $out/${gpu}_hopper_kernel_$tag.md
      python3 -m polygemm bench --mode kernel --device cuda --dtype $dt --variants $rungs --shapes $shapes --repeats 5 --settle 1 --no-progress \
        --json $out/${gpu}_hopper_settled_$tag.json --markdown $out/${gpu}_hopper_settled_$tag.md
      python3 -m polygemm bench --mode call --device cuda --dtype $dt --shapes $shapes --repeats 5 --no-progress \
        $([ $dt = bfloat16 ] && echo --array-lib torch) --json $out/${gpu}_hopper_call_$tag.json --markdown $out/${gpu}_hopper_call_$tag.md
    done
    ;;
  small-ncu)  # the launch-sized fp16 shapes under the profiler, our rungs beside cuBLAS's kernels (one launch each)
    M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__cluster_dim_x,sm__cycles_active.avg,gpc__cycles_elapsed.max
    for spec in "4096x16x4096 hgemm_v2_wgmma_tma_128x64 hgemm_v2_wgmma_tma_128x64:split_k=4 skinny_v1_fp16_col cublas" \
                "17x4096x4096 hgemm_v2_wgmma_tma_128x128:split_k=4 hgemm_v3_wgmma_pingpong:split_k=8 skinny_v2_fp16_row cublas" \
                "512x512x16384 hgemm_v2_wgmma_tma_128x128:split_k=8 cublas"; do
      set -- $spec; shape=$1; shift
      ncu --clock-control none --csv --metrics $M python3 tools/profile_rungs.py --dtype float16 --shape $shape "$@" \
        > $out/ncu_small_$shape.csv
    done
    ;;
  sweep)  # the sweep preset (60 shapes) through the raw launch of auto's rung beside cuBLAS, and through
          # polygemm.gemm beside cupy.matmul; the heatmap of the ratio and its geometric mean and worst shape
    for dt in 16 32; do
      for mode in kernel call; do
        python3 -m polygemm bench --mode $mode --device cuda --dtype float$dt --variants auto --shapes sweep --repeats auto \
          --no-progress --json $out/${gpu}_sweep_${mode}_fp$dt.json
      done
      python3 -m polygemm plot $out/${gpu}_sweep_kernel_fp$dt.json $out/${gpu}_sweep_call_fp$dt.json --heatmap \
        -o $out/${gpu}_sweep_fp$dt.png | tee $out/${gpu}_sweep_fp$dt.txt
    done
    ;;
esac
