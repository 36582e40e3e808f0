#!/bin/bash
# Generates the split-bulk trial kernels (dynamic rows) with ../rows/gen6.
set -e
g=../rows/gen6
gen() { $g $2 -2670 50257 "$3" 2>>gen.log | sed 's/extern "C" __global__/__global__/; s/kf_row_[0-9a-f]*(/kf_entry(/' > $1.cu; }
: > gen.log
gen B0 bf16 'resident=3,stages=2,grid=132,threads=512,vec=8,rows=1'
gen B1 bf16 'resident=3,split=2,stages=4,grid=66,threads=512,vec=8,rows=1'
gen B2 bf16 'resident=3,split=2,stages=3,grid=66,threads=512,vec=8,rows=1'
gen B3 bf16 'resident=3,split=2,stages=2,grid=132,threads=512,vec=8,rows=1'
gen B4 bf16 'resident=3,split=4,stages=4,grid=66,threads=256,vec=8,rows=1'
gen B5 bf16 'resident=3,split=4,stages=4,grid=66,threads=512,vec=8,rows=1'
gen F0 f32 'resident=3,stages=1,grid=132,threads=512,vec=4,rows=1'
gen F1 f32 'resident=3,split=2,stages=2,grid=66,threads=512,vec=4,rows=1'
gen F2 f32 'resident=3,split=4,stages=2,grid=66,threads=512,vec=4,rows=1'
gen F3 f32 'resident=3,split=4,stages=4,grid=33,threads=512,vec=4,rows=1'
gen F4 f32 'resident=3,split=2,stages=1,grid=132,threads=512,vec=4,rows=1'
cat gen.log
