#!/usr/bin/env bash
# ncu evidence for the wgmma epilogues (run from the repository root on the GPU machine):
#   docs/benchmarks/epilogue_ncu.sh OUT.csv [SHAPE] [CONFIG...]
# One launch per build of docs/benchmarks/epilogue_bench.py (--profile), kernels named hgemm*
# only; metrics the installed ncu does not know are left out (listed on stderr).
set -uo pipefail
out=${1:?output csv}; shape=${2:-4096x4096x4096}; shift 2 || shift $#
configs=("$@"); [ ${#configs[@]} -gt 0 ] || configs=(v2_e0_g8 v2_e1_g8 v2_e1_g4 v2_e2_g4_noepi v3s4_e0_g8 v3s6_e1_g4 v3s6_e2_g4_noepi)
want=(gpu__time_duration.sum sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active
      sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active sm__throughput.avg.pct_of_peak_sustained_elapsed
      dram__throughput.avg.pct_of_peak_sustained_elapsed lts__t_sectors_op_write.sum smsp__inst_executed_op_global_st.sum
      l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum
      smsp__inst_executed_op_shared_st.sum launch__registers_per_thread)
known=$(ncu --query-metrics 2>/dev/null | awk '{print $1}')
keep=()
for m in "${want[@]}"; do
  base=${m%%.*}
  if grep -qx "$base" <<<"$known"; then keep+=("$m"); else echo "ncu does not know $base: left out" >&2; fi
done
metrics=$(IFS=,; echo "${keep[*]}")
ncu --clock-control none -k regex:hgemm --metrics "$metrics" --csv \
  python3 docs/benchmarks/epilogue_bench.py --profile "$shape" "${configs[@]}" > "$out"
