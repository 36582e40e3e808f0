#!/bin/bash
# Where the f32 softmax's error against fp64 comes from, at width 4096:
# acc.cu (nvcc -O3 -arch=sm_90 -o acc acc.cu, the default numerics NVRTC
# also compiles with) runs the register-resident schedule of the tuned
# kernel (256 threads, 16 elements each) with its sum, division and exp in
# other forms, beside eager, on the same torch.randn rows (run.py).
python3 acc/run.py
