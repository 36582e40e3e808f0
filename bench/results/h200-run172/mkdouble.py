# The online pass's lane sums in double (d*), a hand edit of the row/14
# sources (v*), for comparison with Kahan (v*) and plain float (p*).
import re
pick=[1,10,14,17,19,18,42,33]
lines={l.split()[0]:l for l in open('list_all.txt')}
out=[l for l in open('../kh/list.txt') if not l.startswith('d')]
for i in pick:
    s=open(f'v{i}.cu').read()
    m=re.search(r'float (a\d+) = __int_as_float\(0xff800000\), (a\d+)\[(\d+)\], (e\d+)\[\d+\];', s)
    am,a,L,e=m.groups()
    s=s.replace(m.group(0), f'float {am} = __int_as_float(0xff800000); double {a}[{L}];')
    s=s.replace(f'{a}[kf_e] = {e}[kf_e] = 0.f;', f'{a}[kf_e] = 0.0;')
    s=s.replace(f'{{ {a}[kf_e] *= kf_k; {e}[kf_e] *= kf_k; }}', f'{a}[kf_e] *= kf_k;')
    s,n=re.subn(r'\{\n\s*const float kf_d = (.*?) - '+e+r'\[kf_e\], kf_s = '+a+r'\[kf_e\] \+ kf_d;\n\s*'+e+r'\[kf_e\] = \(kf_s - '+a+r'\[kf_e\]\) - kf_d;\n\s*'+a+r'\[kf_e\] = kf_s;\n\s*\}', lambda mm: f'{a}[kf_e] += (double)({mm.group(1)});', s)
    s=s.replace(f'  {a}[0] -= {e}[0];\n','')
    s=s.replace(f'{a}[0] += {a}[kf_e] - {e}[kf_e];', f'{a}[0] += {a}[kf_e];')
    s,k=re.subn(r'kf_team_reduce_ms<(\d+)>\('+am+', '+a+r'\[0\],', lambda mm: f'float kf_sf = (float){a}[0];\n  kf_team_reduce_ms<{mm.group(1)}>({am}, kf_sf,', s)
    s=s.replace(f': {a}[0];', ': kf_sf;')
    assert n>=1 and k==1 and e+'[' not in s, i
    open(f'd{i}.cu','w').write(s)
    out.append(lines[f'v{i}'].replace(f'v{i}',f'd{i}',1).replace('row_reduction{','double{',1))
open('../kh/list.txt','w').write(''.join(out))
