# run116: the tuned bf16 softmax 4096 kernel (resident=1, rows=4, 32
# threads a row, run114's sm/v26) with its row loads (L), its stores (S) or
# both (LS) marked streaming (ld.global.cs / st.global.cs: L1 and L2
# evict-first, no policy register), against the kernel as generated (P),
# each twice, at 32768 and 20480 rows after a 256 MB memset, beside
# cudaMemcpy of the same bytes (run114's harness, LIST=list_cs2.txt).
#   cd .gpu/rc && SOFTMAX=1 LIST=list_cs2.txt ./rc 32768 20480
# P.cu is the kernel as generated (with the two helpers the variants use);
# L.diff, S.diff and LS.diff are the variants' edits to it.
