set -e
# Variants of reduce/4's column sums (reduce4_column_sum_*.cu here): batch size,
# launch bounds and the bf16 unpacking edited in; compiled by nvc (NVRTC,
# sm_90a: bench/results/sass-matmul5/nvc.cc); cuobjdump (the
# nvidia-cuda-cuobjdump wheel) counts the loads issued before the first add.
mk() { # name src batch bounds extract
  local n=$1 s=$2 b=$3 lb=$4 ex=$5
  sed -e "s/__launch_bounds__(256, 4)/__launch_bounds__($lb)/" -e "s/kf_r0 + 56 < kf_hi; kf_r0 += 64/kf_r0 + $(( (b-1)*8 )) < kf_hi; kf_r0 += $((b*8))/" \
      -e "s/kf_v0\[8\];/kf_v0[$b];/" -e "s/kf_u < 8;/kf_u < $b;/" $s > v_$n.cu
  if [ "$ex" = w ]; then
    sed -i 's/const float x0 = kf_bf2f(kf_v0\[kf_u\].v\[kf_e\]);/const unsigned kf_w = reinterpret_cast<const unsigned*>(\&kf_v0[kf_u])[kf_e >> 1]; const float x0 = __uint_as_float((kf_e \& 1) ? (kf_w \& 0xffff0000u) : (kf_w << 16));/' v_$n.cu
    grep -q "kf_w >> \|kf_e >> 1" v_$n.cu
  fi
  LD_LIBRARY_PATH=/usr/local/cuda/lib64 ./nvc v_$n.cu v_$n.cubin 2>&1 | grep -o "Used [0-9]* registers" | tr '\n' ' '
  /tmp/tr/x/nvidia/cu13/bin/cuobjdump -sass v_$n.cubin > v_$n.sass
  echo "$n: $(awk '/LDG.E.128/{c++} /FADD/{if(c>0){print c; exit}}' v_$n.sass) loads before first add; $(grep -c 'LDG.E.128' v_$n.sass) vec loads"
}
mk b8lb4 reduce4_column_sum_bf16.cu 8 "256, 4" -
mk b8lb6 reduce4_column_sum_bf16.cu 8 "256, 6" -
mk b8lb5 reduce4_column_sum_bf16.cu 8 "256, 5" -
mk b4lb4 reduce4_column_sum_bf16.cu 4 "256, 4" -
mk b4lb1 reduce4_column_sum_bf16.cu 4 "256" -
mk b8lb4w reduce4_column_sum_bf16.cu 8 "256, 4" w
mk b8lb1w reduce4_column_sum_bf16.cu 8 "256" w
mk b4lb1w reduce4_column_sum_bf16.cu 4 "256" w
mk f_b8lb4 reduce4_column_sum_f32.cu 8 "256, 4" -
mk f_b4lb4 reduce4_column_sum_f32.cu 4 "256, 4" -
mk f_b4lb1 reduce4_column_sum_f32.cu 4 "256" -
