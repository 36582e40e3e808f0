#!/bin/bash
# run182: M = 64 probes after run180-181 (outputs wrong by design but the
# heuristic's h and pp_b2_x4_d1): run180's ping-pong without x's copies
# (pp_nox: products on x's stale shared memory) and without copies or
# products (pp_nomma_nox), beside pp_b2_x4_d1 and pp_nomma; after a 256 MB
# memset and after reads. Kernels in h200-run181/xs.cu (the NOX flag).
cd .gpu/m64 && timeout 100 ./mmr 2>&1
