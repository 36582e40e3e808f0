"""matmul/5's edge tile (../h200-run80/e7.cu) with its L2 policy from other sources.

Writes eA.cu (createpolicy.fractional in the kernel, plain), eB.cu (the policy a
kernel parameter), eC.cu (an immediate: the fractional evict_first encoding),
eD.cu (createpolicy.fractional with a second, evict_first, fraction form) and eE.cu
(eA with the prologue's copies unhinted).
"""
import sys

src = open(sys.argv[1]).read().replace('\n__global__', '\nextern "C" __global__')
start = src.index('__device__ __forceinline__ unsigned long long kf_evict_first_policy() {')
old = src[start:src.index('}\n', start) + 2]


def policy(body):
    return ('__device__ __forceinline__ unsigned long long kf_evict_first_policy() {\n'
            '  unsigned long long pol;\n  ' + body + '\n  return pol;\n}\n')


plain = src.replace(old, policy('asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));'))
open('eA.cu', 'w').write(plain)
param = src.replace(old, '').replace(
    '__kf_bf16* __restrict__ out0) {', '__kf_bf16* __restrict__ out0, const unsigned long long kf_policy) {', 1)
open('eB.cu', 'w').write(param.replace('kf_pol = kf_evict_first_policy();', 'kf_pol = kf_policy;'))
open('eC.cu', 'w').write(src.replace(old, policy('asm("mov.b64 %0, 0x12F0000000000000;" : "=l"(pol));')))
open('eD.cu', 'w').write(src.replace(old, policy(
    'asm volatile("createpolicy.fractional.L2::evict_first.L2::evict_first.b64 %0;" : "=l"(pol));')))
unhinted_prologue = plain.replace('  float acc[kf_MT][kf_NT][4];', '''  auto load_plain = [&](int stage, long long k0) {
    const unsigned sa = sbase + stage * kf_STAGE_BYTES, sb = sa + kf_BM * kf_BK * 2;
    if constexpr (kf_A_KMAJOR) kf_load_tile<kf_BM, kf_BK>(sa, A, lda, m0, k0, M, kend, tid);
    else kf_load_tile<kf_BK, kf_BM>(sa, A, lda, k0, m0, kend, M, tid);
    if constexpr (kf_B_KMAJOR) kf_load_tile<kf_BN, kf_BK>(sb, B, ldb, n0, k0, N, kend, tid);
    else kf_load_tile<kf_BK, kf_BN>(sb, B, ldb, k0, n0, kend, N, tid);
  };
  float acc[kf_MT][kf_NT][4];''', 1)
open('eE.cu', 'w').write(unhinted_prologue.replace(
    'if (st < ktiles) load(st, kbeg + (long long)st * kf_BK);',
    'if (st < ktiles) load_plain(st, kbeg + (long long)st * kf_BK);'))
