# run117: the f32 50257-wide softmax (2670 rows) with the exact quotient
# guarded: F11 is F10 (Markstein's correction, h * (1/s) then one fma
# residual and one fma) falling back to h / s unless the dividend and the
# first quotient lie in [2^-100, 2^100], as the generator would have to emit
# it. Beside F0 (as generated: h / s) and F10 (unguarded). NVRTC cubins
# (.gpu/px, nvc.cc), run112's harness with F11 added.
#   cd .gpu/px && ./px | grep -E "memcpy32|^F0 |^F10|^F11"    (flush by reads)
#   FLUSH_WRITE=1 ./px | ...                                  (256 MB memset)
