#!/bin/bash
# run163: where run160's hand-batched bf16 column sum gains over the
# generated kernels. .gpu/cs as in run162, entries.txt from here: reduce/3's
# and run162's batch-8 (256,6) kernels, each also with its ending replaced by
# columns_ending.cu.part (the block's 256 outputs one a thread: the split
# rows' adds, the workspace stores and the last block's slice sums), and
# run160's hand kernel compiled by NVRTC (hand_through_nvrtc.sh).
( cd .gpu/cs && timeout 170 ./cs > $OUT/cs.txt 2>&1; echo "cs rc=$?" )
grep -v "bare read\|L1 split" $OUT/cs.txt
