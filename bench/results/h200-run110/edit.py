import sys, re
src, dst, sel = sys.argv[1], sys.argv[2], sys.argv[3]
s = open(src).read()
poly = open('poly.h').read()
s = s.replace('struct kf_sum_op', poly + '#define KF_P(e) (' + sel + ')\nstruct kf_sum_op', 1)
# pass 1 (vector loop only: the first occurrence)
old = 'for (int kf_e = 0; kf_e < 8; ++kf_e) a4[kf_e] += kf_exp_fast((kf_y[kf_e] - a1));'
assert s.count(old) == 1
s = s.replace(old, 'for (int kf_e = 0; kf_e < 8; ++kf_e) a4[kf_e] += KF_P(kf_e) ? kf_exp_poly((kf_y[kf_e] - a1)) : kf_exp_fast((kf_y[kf_e] - a1));')
# pass 2
i = s.index('__device__ __forceinline__ void kf_out(')
j = s.index('}\n', i) + 2
fn = s[i:j]
s = s[:j] + fn.replace('kf_out(', 'kf_out_p(').replace('kf_exp_fast', 'kf_exp_poly') + s[j:]
old = 'kf_out(x0[kf_e], r1, r4, kf_y0);'
k = s.index(old)
s = s[:k] + 'if (KF_P(kf_e)) kf_out_p(x0[kf_e], r1, r4, kf_y0); else kf_out(x0[kf_e], r1, r4, kf_y0);' + s[k+len(old):]
open(dst, 'w').write(s)
