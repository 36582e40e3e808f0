#!/bin/bash
# name params
set -e
: > list.txt
while read name params; do
  ./gen 64 "$params" > $name.cu 2> $name.log || { cat $name.log; continue; }
  entry=$(awk '/^LAUNCH/{print $2}' $name.log)
  sed -i "s/$entry/kf_entry_$name/" $name.cu
  read smem gx gy gz bx by bz <<<"$(awk '/^LAUNCH/{print $3,$4,$5,$6,$7,$8,$9}' $name.log)"
  ./nvc $name.cu $name.cubin 2> $name.ptxas || { echo "$name: nvrtc failed"; head $name.ptxas; continue; }
  echo "$name kf_entry_$name $smem $gx $gy $bx $(head -1 $name.log | cut -d' ' -f1)" >> list.txt
  echo "$name: $(grep -o 'Used [0-9]* registers' $name.ptxas) $(grep -o '[0-9]* bytes spill stores' $name.ptxas)"
done <<'L'
h
s64w4k2 stream=1,bm=64,bn=256,bk=32,wm=1,wn=4,wk=2,stages=1,group=1,splitk=4,cluster=1
s64w2k4 stream=1,bm=64,bn=128,bk=32,wm=1,wn=2,wk=4,stages=1,group=1,splitk=2,cluster=1
s64w8k1 stream=1,bm=64,bn=512,bk=32,wm=1,wn=8,wk=1,stages=1,group=1,splitk=8,cluster=1
s64w1k8 stream=1,bm=64,bn=64,bk=32,wm=1,wn=1,wk=8,stages=1,group=1,splitk=1,cluster=0
s32w2k4 stream=1,bm=32,bn=128,bk=32,wm=1,wn=2,wk=4,stages=2,group=1,splitk=1,cluster=0
s32w4k2 stream=1,bm=32,bn=256,bk=32,wm=1,wn=4,wk=2,stages=2,group=1,splitk=2,cluster=1
s32w1k8 stream=1,bm=32,bn=64,bk=32,wm=1,wn=1,wk=8,stages=2,group=1,splitk=1,cluster=0
L
cat list.txt
