#!/bin/bash
# Inductor's rms_norm kernels (source, PTX) where torch.compile beats ours.
# inductor_kernels.txt: an excerpt (grep) of the generated Triton source:
# a looped reduction (triton_red_), 16 warps, the row loaded evict_last,
# then again evict_first with the weight evict_last, plain stores.
cd "$(dirname "$0")/.."
export TRITON_CACHE_DIR=/tmp/tc TORCHINDUCTOR_CACHE_DIR=/tmp/ic TORCH_LOGS=output_code
timeout 300 python3 .gpu/inductor_rms.py > $OUT/inductor.txt 2>&1
grep -E "torch.compile|def triton|XBLOCK|RBLOCK|num_warps|tl.load|tl.store|grid" $OUT/inductor.txt | head -60
cd /tmp/tc && tar czf $OUT/triton_cache.tgz . && ls -R /tmp/tc | grep -E "ptx|json" | head
