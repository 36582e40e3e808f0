import sys
src, dst, G = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = open(src).read()
def rep(old, new, count=1):
    global s
    assert s.count(old) == count, (old[:80], s.count(old))
    s = s.replace(old, new)
NT = 1024 if 'launch_bounds__(1024)' in s else 512
s = s.replace('__global__ void __launch_bounds__', '''#define KF_LOAD_PIECES(row, p0, p1) { \\
  const long long kf_rb = (row) * 50257LL; \\
  const long long kf_rh = (32 - (row) * kf_W % 32) % 32; \\
  const long long kf_rn = (kf_W - kf_rh) / 4 * 4 * 4; \\
  for (long long kf_p = (p0); kf_p <= (p1) && kf_p * 16384 < kf_rn; ++kf_p) { \\
    const long long kf_o = kf_p * 16384; \\
    const unsigned kf_n1 = static_cast<unsigned>(kf_rn - kf_o < 16384 ? kf_rn - kf_o : 16384); \\
    kf_bar_expect(&kf_bar[kf_p], kf_n1); \\
    kf_bulk_load(reinterpret_cast<char*>(kf_S0) + kf_o, reinterpret_cast<const char*>(in0 + kf_rb + kf_rh) + kf_o, kf_n1, &kf_bar[kf_p]); \\
  } }
__global__ void __launch_bounds__''', 1)
i = s.index('// Full-row outputs.')
head = '#pragma unroll 4\n    for (long long kf_j = kf_lane; kf_j < kf_nv; kf_j += %d) {\n    const long long kf_c = kf_h + kf_j * 4;\n    float h3[4];\n' % NT
k = s.index(head, i)
end = s.index('      if (kf_valid) kf_stv(reinterpret_cast<kf_vec<float, 4>*>(out0 + kf_r * kf_W + kf_c), kf_o0);\n    }\n', k)
endlen = len('      if (kf_valid) kf_stv(reinterpret_cast<kf_vec<float, 4>*>(out0 + kf_r * kf_W + kf_c), kf_o0);\n    }\n')
body = s[k + len(head):end] + '      if (kf_valid) kf_stv(reinterpret_cast<kf_vec<float, 4>*>(out0 + kf_r * kf_W + kf_c), kf_o0);\n'
new = ('    const int kf_np = (int)((kf_nv + %d) / %d);\n' % (NT - 1, NT) +
       '    for (int kf_i = 0; kf_i < kf_np; ++kf_i) {\n    const long long kf_j = kf_lane + %dLL * kf_i;\n' % NT +
       '    if (kf_j < kf_nv) {\n    const long long kf_c = kf_h + kf_j * 4;\n    float h3[4];\n' + body + '    }\n' +
       '    if ((kf_i + 1) %% %d == 0 || kf_i + 1 == kf_np) {\n' % G +
       '      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");\n      __syncthreads();\n' +
       '      if (threadIdx.x == 0 && kf_take < kf_R) KF_LOAD_PIECES(kf_take, (long long)(kf_i / %d) * %d * %d / 1024, (long long)(kf_i + 1) * %d / 1024 - 1);\n' % (G, G, NT, NT) +
       '    }\n    }\n')
s = s[:k] + new + s[end + endlen:]
rep('KF_CHUNKED_LOAD(kf_S0 + kf_sb * 50272LL, in0 + kf_b0 + kf_h, kf_n * 4);', 'KF_LOAD_PIECES(kf_take, kf_np_cur, 15);')
rep('  if (threadIdx.x == 0) kf_rows[(kf_it + 1) % 2] = kf_take;\n', '  const long long kf_np_cur = ((kf_W - (32 - kf_r * kf_W % 32) % 32) / 4 + ' + str(NT - 1) + ') / ' + str(NT) + ' * ' + str(NT) + ' / 1024;\n  if (threadIdx.x == 0) kf_rows[(kf_it + 1) % 2] = kf_take;\n')
open(dst, 'w').write(s)
