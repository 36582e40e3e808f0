#!/bin/bash
# run139: (1) the cross-entropy row kernel (row/12's tuned variant) beside
# hand-written relatives that change one thing each (.gpu/ce/main.cu), a
# contiguous read of the same 268 MB, and an ATen trace's nll_loss of
# _log_softmax as row/12 and row/13 generate it; after a flush by reads and
# by a 256 MB memset. (2) Nsight Compute on four of them. (3) GpuReduceTest
# with row/13 (picks of computed values). (4) The reduce suite's two
# cross-entropy cases.
# The harness is ce/ here (main.cu; gen.cuh, old.cu and new.cu are
# kfuse compile --source output), copied to .gpu/ce for the run.
cd "$(dirname "$0")/.."
start=$SECONDS
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
(cd .gpu/ce && nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o ce main.cu old.cu new.cu 2>&1 | grep -i error)
echo "== flush by reads"; (cd .gpu/ce && timeout 90 ./ce) 2>&1 | tee $OUT/ce_reads.txt
echo "== flush by memset"; (cd .gpu/ce && FLUSH_WRITE=1 timeout 90 ./ce) 2>&1 | tee $OUT/ce_memset.txt
echo "harness done at $((SECONDS - start)) s"
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio
(cd .gpu/ce && NCU=1 timeout 150 ncu --clock-control none --kernel-name regex:'kf_row_0e56|u4_hint_nomath|v8_t512_u4_nc_persist|read_all' --metrics $M ./ce > $OUT/ncu.txt 2>&1)
echo "ncu rc=$? at $((SECONDS - start)) s"; grep -E "kf_row|ce_|read_all|duration|bytes|pct|ratio|inst_exec" $OUT/ncu.txt | grep -v "^==" | head -70
(cd .gpu/ce && cuobjdump -sass -fun kf_row_0e56f9b54fa9 ce > $OUT/gen.sass 2>&1)
timeout 200 $b/bin/kfuse_cross_test --gtest_filter="GpuReduce*" > $OUT/gpu_tests.log 2>&1
echo "GpuReduceTest rc=$? at $((SECONDS - start)) s"; grep -E "OK \]|FAILED|Failure" $OUT/gpu_tests.log | head -10
grep -B2 -A12 "Failure" $OUT/gpu_tests.log | head -40
CASES=cross_entropy_bf16,nll_log_softmax_bf16 SUITES=reduce BUDGET=8 SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=150 timeout 200 bash bench/gpu/run.sh $b > $OUT/reduce_run.log 2>&1
echo "reduce suite rc=$? at $((SECONDS - start)) s"
grep -E "FAILED|WRONG|rror" $OUT/reduce_run.log | head
grep -E '^\| [a-z]' $OUT/reduce_run.log | cut -d'|' -f2-9,12-14
rm -f $OUT/run.log $OUT/plans-and-manifests.tar.gz
ls $OUT; echo "total $((SECONDS - start)) s"
