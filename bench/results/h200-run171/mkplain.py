# The plain (uncompensated) twin of each picked variant's online pass, as
# row/13 generated it: a hand edit of the row/14 source.
import re
pick=[9,1,10,14,17,19,18,42,33]
lines={l.split()[0]:l for l in open('list_all.txt')}
out=[]
for i in pick:
    src=open(f'v{i}.cu').read()
    name=f'v{i}'
    out.append(lines[name])
    if 'in one pass' not in src: continue
    p=re.sub(r'\{ (a\d+)\[kf_e\] \*= kf_k; (e\d+)\[kf_e\] \*= kf_k; \}', r'\1[kf_e] *= kf_k;', src)
    p,n=re.subn(r'\{\n\s*const float kf_d = (.*?) - (e\d+)\[kf_e\], kf_s = (a\d+)\[kf_e\] \+ kf_d;\n\s*e\d+\[kf_e\] = \(kf_s - a\d+\[kf_e\]\) - kf_d;\n\s*a\d+\[kf_e\] = kf_s;\n\s*\}', lambda m: f'{m.group(3)}[kf_e] += {m.group(1)};', p)
    p=re.sub(r'  (a\d+)\[0\] -= (e\d+)\[0\];\n', '', p)
    p=re.sub(r'(a\d+)\[0\] \+= (a\d+)\[kf_e\] - (e\d+)\[kf_e\];', r'\1[0] += \2[kf_e];', p)
    online=p.split('in one pass')[1].split('kf_team_reduce_ms')[0]
    assert n>=1 and 'kf_s =' not in online and 'e4[kf_e] *=' not in online, i
    open(f'p{i}.cu','w').write(p)
    out.append(lines[name].replace(name,f'p{i}',1).replace('row_reduction{','plain{',1))
open('list.txt','w').write(''.join(out))
