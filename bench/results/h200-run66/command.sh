#!/bin/bash
# matmul/5 (B tiles one CTA reads copied evict-first): the whole matmul
# suite in one run; the 50257-wide softmax's bulk copies with and without
# an evict-first hint (.gpu/rows/rb, generated source), after both
# flushes; Nsight Compute on the bf16 kernel as it is (row/5's).
# .gpu/rows/rb: h200-run61/main.cu with its second kernels relabelled
# "evict-first copies", built with nvcc -O3 -arch=sm_90a -std=c++17; its
# kernels from rows_gen.cc (`gen bf16 -4096 50257 'grid=132,resident=3,
# rows=1,stages=2,threads=512,vec=8'`, f32: stages=1, vec=4) with the hint,
# and the same source with kf_bulk_load<false> as row/5's.
cd "$(dirname "$0")/.."
(cd .gpu/rows && timeout 100 ./rb 2670; FLUSH_WRITE=1 timeout 100 ./rb 2670) 2>&1 | tee $OUT/rows.txt
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
(cd .gpu/rows && FLUSH_WRITE=1 timeout 120 $ncu --cache-control none -k regex:kf_entry -c 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
  ./rb 2670) > $OUT/rows_ncu.txt 2>&1
grep -E "Throughput|Busy|Stall|Issued|Eligible|Active Warps|Duration|Elapsed|Bandwidth|Hit" $OUT/rows_ncu.txt | head -40
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
SUITES=matmul SKIP_TESTS=1 TESTS_RESERVE=0 SECONDS_TOTAL=380 bash bench/gpu/run.sh $b > $OUT/suite.log 2>&1
grep -vE '^\{"case"' $OUT/suite.log | tail -14
cp bench/results/$(date +%F)-matmul.md bench/results/$(date +%F)-matmul.json $OUT/ 2>/dev/null
ls $OUT
