"""Writes the hand-edited copies of g16.cu that runs 144 and 145 time beside
it (each with its entry renamed kf_entry_<name>). Run in the folder holding
g16.cu (kfuse compile --source of bench/gpu/cases/matmul/gemm_bias_gelu_m16_bf16.json
against kfused --no_gpu, the stream heuristic's variant, entry renamed kf_entry)."""
src = open('g16.cu').read()


def variant(name, noA=False, nomma=False, noepi=False, rot=None, bias=False, xstream=False):
    s = src.replace('kf_entry', 'kf_entry_' + name)
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
