# run114: RMSNorm (bf16, width 4096, rows symbolic, the 32768 bucket), every
# variant of its space compiled by NVRTC (sm_90a) and timed at 32768 and
# 20480 rows after a 256 MB memset (the tuner's and do_bench's flush),
# beside cudaMemcpy of the same bytes at both counts; outputs against fp64 on
# 7 sampled rows at each count.
# Built here:
#   (cd build && c++ -O1 -std=c++17 -I.. -I. ../.gpu/rc/gen2.cc -o ../.gpu/rc/gen2 <codegen libs>)
#   cd .gpu/rc && KIND=rms ./gen2 bf16 4096 32768 32768 20480 > list.txt
#   for f in v*.cu; do ./nvc $f ${f%.cu}.cubin; done
#   nvcc -O2 -arch=sm_90a -std=c++17 -o rc main.cu -lcuda
# On the H200: cd .gpu/rc && ./rc 32768 20480 | tee $OUT/rc_rms_bf16_4096.txt
# The same for softmax (bf16, width 4096): list_sm.txt, the harness's
# reference switched by SOFTMAX=1 (main.cu here is that later version):
#   mkdir sm && cd sm && KIND=softmax ../gen2 bf16 4096 32768 32768 20480 > ../list_sm.txt (paths prefixed sm/)
#   cd .gpu/rc && SOFTMAX=1 LIST=list_sm.txt ./rc 32768 20480 | tee $OUT/rc_softmax_bf16_4096.txt
