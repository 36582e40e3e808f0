# run119: what the row counter's zeroing costs the 50257-wide softmax
# (2670 rows): the generated dyn=1 kernels (B0 bf16, F0 f32, and F10) timed
# after a 256 MB memset with the counter's 4-byte cudaMemsetAsync outside the
# timed events (as before) and inside them, before the launch (the suite's
# order: the launcher zeroes the workspace, then launches). run112's harness
# with the ZERO_IN switch (.gpu/px/main.cu):
#   cd .gpu/px && FLUSH_WRITE=1 ./px; FLUSH_WRITE=1 ZERO_IN=1 ./px
