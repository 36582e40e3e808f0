# run112: run110-111's 50257-wide softmax trial (2670 rows) with the kernels
# compiled by NVRTC as the service compiles them (sm_90a, --std=c++17), from
# sources the committed row/11 generator wrote (.gpu/rows/gen rebuilt), the
# trial's edits re-applied; loaded as cubins by the px harness (run110's
# main.cu with a cubin loader).
#   cd .gpu/px && ./px > $OUT/px_nvrtc.txt; FLUSH_WRITE=1 ./px > $OUT/px_nvrtc_memset.txt
# Each kernel twice per file; medians of 20 after 3 warm-ups.
