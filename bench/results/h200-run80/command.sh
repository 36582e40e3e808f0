#!/bin/bash
# matmul/7: evict-first weight copies with the policy passed through shared
# memory. (1) the kernels that faulted as matmul/5 (e1, f1, c1 in run79),
# regenerated (e7, f7, c7), one process each, with e1 as the control;
# c7's output against its unhinted twin; c7's time after the memset.
# (2) SASS: where the hinted LDGSTS take their descriptor. (3) GpuMatmulTest.
cd "$(dirname "$0")/.."
(cd .gpu/h && for k in e1 e7 f7 c7 e10 f10 c10; do timeout 20 ./hh7 $k; done 2>&1; timeout 60 ./hh7 cmp; timeout 60 ./hh7 time) 2>&1 | tee $OUT/faults_time.txt
cuobjdump=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump | head -1)
$cuobjdump -sass .gpu/h/hh7 > $OUT/hh7.sass 2>&1
awk '/Function/{f=$0} /LDGSTS.*desc|R2UR|CCTL|LDS.64|STS.64/{print f": "$0}' $OUT/hh7.sass | sed 's/ \+/ /g' | sort | uniq -c | sort -rn | head -60 > $OUT/ldgsts_desc.txt
head -60 $OUT/ldgsts_desc.txt
b=build/gpu-bundle
export LD_LIBRARY_PATH=$PWD/$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
start=$SECONDS
timeout 320 $b/bin/kfuse_cross_test --gtest_filter='GpuMatmulTest*' >$OUT/gpu_matmul_test.txt 2>&1
echo "GpuMatmulTest rc $? $((SECONDS - start)) s"; grep -E "Failure|FAILED|PASSED|OK \]" $OUT/gpu_matmul_test.txt | head
grep -B2 -A8 Failure $OUT/gpu_matmul_test.txt | head -40
