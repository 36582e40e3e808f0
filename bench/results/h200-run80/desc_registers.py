import re,sys
lines=open(sys.argv[1]).read().split('\n')
funcs={}
cur=None
for l in lines:
    m=re.search(r'Function : (\S+)',l)
    if m: cur=m.group(1); funcs[cur]=[]; continue
    m=re.search(r'/\*([0-9a-f]{4,})\*/\s+(.*?);',l)
    if m and cur: funcs[cur].append((m.group(1),m.group(2).strip()))
for f,ins in funcs.items():
    written=set(); bad=[]; uses={}
    for addr,t in ins:
        t2=re.sub(r'^@!?U?P\w+\s+','',t)
        op=t2.split()[0] if t2 else ''
        ops=t2[len(op):].strip()
        for m in re.finditer(r'desc\[(UR\d+)\]',t2):
            r=int(m.group(1)[2:])
            uses.setdefault(r,0); uses[r]+=1
            if r not in written or r+1 not in written: bad.append((addr,t2))
        dst=ops.split(',')[0].strip() if ops else ''
        m=re.match(r'UR(\d+)$',dst)
        if m and not op.startswith(('LDGSTS','STS','LDS','STG','LDG')):
            r=int(m.group(1)); written.add(r)
            if '.64' in op or op.startswith(('ULDC.64','UMOV.64','UIMAD.WIDE','ULEA.HI')) : written.add(r+1)
            if op.startswith('UIMAD.WIDE') or op.startswith('UIADD3.64'): written.add(r+1)
    print(f[:40], 'desc uses', uses, 'suspicious', len(bad))
    for b in bad[:4]: print('   ', b)
