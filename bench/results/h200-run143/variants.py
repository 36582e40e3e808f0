"""Writes the hand-edited copies of g16.cu that runs 144 and 145 time beside
it (each with its entry renamed kf_entry_<name>). Run in the folder holding
g16.cu (kfuse compile --source of bench/gpu/cases/matmul/gemm_bias_gelu_m16_bf16.json
against kfused --no_gpu, the stream heuristic's variant, entry renamed kf_entry)."""
SOURCES = {}


LEAN_LOAD = '''  const unsigned short* const wbase = B + (kbeg + (long long)warp_k * 32 + 8 * c) * ldb + wcol + 8 * g;
  const unsigned short* const xbase = A + (m0 + g) * lda + kbeg + warp_k * 32 + 8 * c;
  auto load = [&](uint4 (&w)[8], uint4 (&x)[kf_MT], int i) {
    const unsigned short* const wp = wbase + (long long)i * (kf_WK * 32) * ldb;
#pragma unroll
    for (int r = 0; r < 8; ++r)
      asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
          : "=r"(w[r].x), "=r"(w[r].y), "=r"(w[r].z), "=r"(w[r].w) : "l"(wp + r * ldb));
    const unsigned short* const xp = xbase + i * (kf_WK * 32);
#pragma unroll
    for (int mt = 0; mt < kf_MT; ++mt)
      XLOAD
  };
'''


def variant(name, noA=False, nomma=False, noepi=False, rot=None, bias=False, xstream=False, lean=False, wk=None,
            nobias=False, nogelu=False, base='g16.cu'):
    """base: g16.cu (matmul/6's source) or g16n.cu (matmul/7's, entry kf_entry_new)."""
    src = SOURCES.setdefault(base, open(base).read())
    s = src.replace('kf_entry_new', 'kf_entry').replace('kf_entry', 'kf_entry_' + name)
    if nobias:  # the epilogue's bias read as zeros
        s = s.replace('kf_bf2f(in2[ec])', '0.f').replace('kf_bf2f(in2[(ec + 1)])', '0.f')
    if nogelu:  # the epilogue's sum stored without the GELU
        for h in ('0', '1'):
            i = s.index('const float v5_%s = (' % h)
            j = s.index(';\n', i)
            s = s[:i] + 'const float v5_%s = v4_%s' % (h, h) + s[j:]
    if wk:  # wk warps split K (32 * wk threads)
        s = s.replace('kf_WK = 8,', 'kf_WK = %d,' % wk).replace('kf_THREADS = 256,', 'kf_THREADS = %d,' % (32 * wk))
    if lean:  # unpredicated loads from per-thread base pointers; no prefetch past the last batch
        i = s.index('  auto load = [&](uint4 (&w)[8], uint4 (&x)[kf_MT], int i) {')
        j = s.index('  float acc[kf_MT][4][4];')
        xl = ('x[mt] = make_uint4(tid + i, tid * 3 + i, tid * 5, tid * 7);' if noA else
              'asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(x[mt].x), "=r"(x[mt].y), "=r"(x[mt].z), "=r"(x[mt].w) : "l"(xp + mt * 8 * lda));')
        s = s[:i] + LEAN_LOAD.replace('XLOAD', xl) + s[j:]
        s = s.replace('''    for (int d = 0; d < kf_STAGES; ++d) load(w[d], x[d], i0 + kf_STAGES + d);''',
                      '''    if (i0 + kf_STAGES < mine)
#pragma unroll
      for (int d = 0; d < kf_STAGES; ++d) load(w[d], x[d], i0 + kf_STAGES + d);''')
        noA = False
    if noA:  # x's loads replaced by values made from the thread index
        s = s.replace('x[mt] = kf_ldg_cached(A + row * lda + k0 + 8 * c, k0 + 8 * c < kend);',
                      '(void)row; x[mt] = make_uint4(tid + i, tid * 3 + i, tid * 5, tid * 7);')
    if nomma:  # the products replaced by an xor of their operands
        s = s.replace('kf_mma(acc[mt][j], a, b);',
                      'acc[mt][j][0] = __uint_as_float(__float_as_uint(acc[mt][j][0]) ^ a[0] ^ a[1] ^ a[2] ^ a[3] ^ b[0] ^ b[1]);')
    if noepi:  # no split-K sum in shared memory, no epilogue: one store a thread
        i = s.index('  float* const red = reinterpret_cast<float*>(kf_smem);')
        j = s.rindex('}')
        s = s[:i] + '''  float t = 0.f;
#pragma unroll
  for (int mt = 0; mt < kf_MT; ++mt)
#pragma unroll
    for (int j = 0; j < 4; ++j) t += acc[mt][j][0] + acc[mt][j][1] + acc[mt][j][2] + acc[mt][j][3];
  out0[(blockIdx.x * kf_THREADS + tid) % (16 * 8192)] = kf_f2bf(t);
''' + s[j:]
    if rot:  # a warp's steps taken from step blockIdx.x % rot on, wrapping
        s = s.replace('const long long k0 = kbeg + (long long)(warp_k + i * kf_WK) * 32;',
                      'const int ii = i < mine ? (i + (int)(blockIdx.x % ' + str(rot) + ')) % mine : i;\n'
                      '    const long long k0 = kbeg + (long long)(warp_k + ii * kf_WK) * 32;')
    if bias:  # the epilogue's two bias values loaded before the loop
        s = s.replace('  float acc[kf_MT][4][4];',
                      '  const float pb0 = kf_bf2f(in2[n0 + 2 * (tid % 32)]), pb1 = kf_bf2f(in2[n0 + 2 * (tid % 32) + 1]);\n'
                      '  float acc[kf_MT][4][4];', 1)
        s = s.replace('const float r2_0 = kf_bf2f(in2[ec]);', 'const float r2_0 = pb0;', 1)
        s = s.replace('const float r2_1 = kf_bf2f(in2[(ec + 1)]);', 'const float r2_1 = pb1;', 1)
    if xstream:  # x loaded L1::no_allocate, as w is
        s = s.replace('x[mt] = kf_ldg_cached(', 'x[mt] = kf_ldg_stream(')
    open('g16_' + name + '.cu', 'w').write(s)


variant('noA', noA=True)
variant('nomma', nomma=True)
variant('noepi', noepi=True)
variant('bare', noA=True, nomma=True, noepi=True)
variant('rot32', rot=32)
variant('rot4', rot=4)
variant('bias', bias=True)
variant('rotbias', rot=32, bias=True)
variant('xs', xstream=True)
variant('lean', lean=True)
variant('leannoA', lean=True, noA=True)
variant('leanbare', lean=True, noA=True, nomma=True, noepi=True)
variant('w16', wk=16)
variant('leanw16', lean=True, wk=16)
variant('leanw4', lean=True, wk=4)
variant('n_noepi', noepi=True, base='g16n.cu')
variant('n_nobias', nobias=True, base='g16n.cu')
variant('n_nogelu', nogelu=True, base='g16n.cu')
variant('n_sum', nobias=True, nogelu=True, base='g16n.cu')
