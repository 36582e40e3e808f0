#!/bin/bash
# Few-row products: do 132 strips (N = 8448) stream at 128's rate per byte;
# the dirty-L2 penalty (memset flush) per kernel, and its DRAM writes (ncu).
cd "$(dirname "$0")/.."
echo "== flush by reads"; (cd .gpu/mm && timeout 60 ./mmb) 2>&1 | tee $OUT/mm_read.txt
echo "== flush by writes"; (cd .gpu/mm && FLUSH_WRITE=1 timeout 60 ./mmb) 2>&1 | tee $OUT/mm_write.txt
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
echo "== ncu $ncu (memset flush, no cache control)"
(cd .gpu/mm && FLUSH_WRITE=1 REPS=2 timeout 150 $ncu --cache-control none --clock-control none -k regex:'kf_entry|read_' \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum \
  ./mmb) 2>&1 | grep -E "kf_entry|read_|flush|duration|dram__|lts__|==" | tee $OUT/ncu.txt | tail -150
