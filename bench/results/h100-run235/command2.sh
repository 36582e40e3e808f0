#!/bin/bash
# run235, second part (the same H100 as command.sh, right after it): the
# tuned times of the six chains, then bench/gpu/dynamic_rows_timing.py.
mkdir -p /tmp/k && xz -dc build/gpu-run235.tar.xz | tar -C /tmp/k -xf -
b=/tmp/k/gpu-run235; r=bench/chains/strided_rows
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
start=$SECONDS
$b/bin/kfused --address=127.0.0.1:7431 --store=/tmp/k/store2.db > $OUT/kfused2.log 2>&1 &
kpid=$!; sleep 3
for f in $r/vocab_strided_softmax_bf16.json examples/padded_vocab_softmax_bf16.json $r/vocab_dense_softmax_bf16.json \
    examples/qk_norm_slice_bf16.json $r/qk_norm_dense_bf16.json $r/transposed_softmax_f32.json; do
  c=$(basename $f .json)
  timeout 25 $b/bin/kfuse --server=127.0.0.1:7431 --timeout=24 tune --mode full --budget 6 --force $f > $OUT/tune_$c.txt 2>&1
  echo "tune rc=$? $((SECONDS - start)) s" >> $OUT/tune_$c.txt
done
KFUSE_SERVER=127.0.0.1:7431 PYTHONPATH=$PWD/.gpu/pysite timeout 100 python3 bench/gpu/dynamic_rows_timing.py \
  > $OUT/dynamic_rows_timing.txt 2>&1
echo "dynamic rows timing rc=$? $((SECONDS - start)) s" >> $OUT/dynamic_rows_timing.txt
kill $kpid
for c in qk_norm_slice_bf16 qk_norm_dense_bf16 vocab_strided_softmax_bf16 padded_vocab_softmax_bf16 \
    vocab_dense_softmax_bf16 transposed_softmax_f32; do
  echo "== $c"; grep -E "^plan|^state|variant|roofline|tune rc" $OUT/tune_$c.txt
done
cat $OUT/dynamic_rows_timing.txt
