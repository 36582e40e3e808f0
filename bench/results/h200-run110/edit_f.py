import sys
src, dst, opts = sys.argv[1], sys.argv[2], sys.argv[3].split(',')
s = open(src).read()
def rep(old, new, count=1):
    global s
    assert s.count(old) == count, (old, s.count(old))
    s = s.replace(old, new)
if 'inv' in opts:
    rep('const float v5 = (h3 / r4);', 'const float v5 = (h3 * (1.f / r4));')
if 'mk' in opts:
    rep('const float v5 = (h3 / r4);', 'const float kf_q = h3 * (1.f / r4); const float v5 = fmaf(fmaf(-kf_q, r4, h3), 1.f / r4, kf_q);')
if 'fast' in opts:
    rep('const float v3 = expf(v2);', 'float v3; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(v3) : "f"(v2 * 1.44269504088896341f));')
if 'chunk' in opts:
    NT = 1024 if 'launch_bounds__(1024)' in s else 512
    rep('__shared__ __align__(8) unsigned long long kf_bar[1];', '__shared__ __align__(8) unsigned long long kf_bar[16];')
    rep('for (int kf_i = 0; kf_i < 1; ++kf_i) kf_bar_init(&kf_bar[kf_i]);', 'for (int kf_i = 0; kf_i < 16; ++kf_i) kf_bar_init(&kf_bar[kf_i]);')
    # loads: one barrier a 16 KB piece
    rep('kf_bar_expect(&kf_bar[kf_i], static_cast<unsigned>(kf_n * 4));\n  kf_bulk_load(kf_S0 + kf_i * 50272LL, in0 + kf_b0 + kf_h, kf_n * 4, &kf_bar[kf_i]);',
        'KF_CHUNKED_LOAD(kf_S0 + kf_i * 50272LL, in0 + kf_b0 + kf_h, kf_n * 4);')
    rep('kf_bar_expect(&kf_bar[kf_sb], static_cast<unsigned>(kf_n * 4));\n  kf_bulk_load(kf_S0 + kf_sb * 50272LL, in0 + kf_b0 + kf_h, kf_n * 4, &kf_bar[kf_sb]);',
        'KF_CHUNKED_LOAD(kf_S0 + kf_sb * 50272LL, in0 + kf_b0 + kf_h, kf_n * 4);')
    s = s.replace('__global__ void __launch_bounds__', '''#define KF_CHUNKED_LOAD(dst, src, bytes) \\
  for (long long kf_o = 0, kf_p = 0; kf_o < (bytes); kf_o += 16384, ++kf_p) { \\
    const unsigned kf_n1 = static_cast<unsigned>((bytes) - kf_o < 16384 ? (bytes) - kf_o : 16384); \\
    kf_bar_expect(&kf_bar[kf_p], kf_n1); \\
    kf_bulk_load(reinterpret_cast<char*>(dst) + kf_o, reinterpret_cast<const char*>(src) + kf_o, kf_n1, &kf_bar[kf_p]); \\
  }
__global__ void __launch_bounds__''', 1)
    rep('  kf_bar_wait(&kf_bar[kf_sb], static_cast<unsigned>(kf_it / 1) & 1u);\n', '')
    # pass 1's loop: the first "for (long long kf_j = kf_lane; kf_j < kf_nv; kf_j += NT) {"
    loop = 'for (long long kf_j = kf_lane; kf_j < kf_nv; kf_j += %d) {\n    const long long kf_c = kf_h + kf_j * 4;\n' % NT
    i = s.index(loop)
    per = 16384 // 16  # vectors a piece
    s = s[:i + len(loop)] + '    kf_bar_wait(&kf_bar[kf_j / %d], static_cast<unsigned>(kf_it) & 1u);\n' % per + s[i + len(loop):]
open(dst, 'w').write(s)
