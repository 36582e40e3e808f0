#!/bin/bash
# SASS of kfuse's looped bf16 RMSNorm 8192 (l16_O), its resident one (o16_O)
# and torch.compile's kernel (t16_8192.cubin), for an offline comparison.
cd "$(dirname "$0")/tr"
cuobjdump=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump | head -1)
$cuobjdump -sass tr4 > $OUT/tr4.sass 2>&1
$cuobjdump -sass t16_8192.cubin > $OUT/t16_8192.sass 2>&1
$cuobjdump -sass t32_4096.cubin > $OUT/t32_4096.sass 2>&1
wc -l $OUT/*.sass
