# Control bits of cuobjdump -sass output: stall cycles, the scoreboard an
# instruction sets on write (wb) and read (rb), the scoreboards it waits on.
# python3 sass_ctl.py FILE.sass FROM_HEX TO_HEX
import re,sys
lines=open(sys.argv[1]).read().split('\n')
out=[]
i=0
while i < len(lines):
    m=re.match(r'\s+/\*([0-9a-f]{4})\*/\s+(.*?)\s*;\s*/\* (0x[0-9a-f]+) \*/',lines[i])
    if m:
        hi=re.search(r'/\* (0x[0-9a-f]+) \*/',lines[i+1]); h=int(hi.group(1),16)
        stall=(h>>41)&0xf; wb=(h>>46)&7; rb=(h>>49)&7; wm=(h>>52)&0x3f
        s=f"{m.group(1)} st{stall:2d} wb{'-' if wb==7 else wb} rb{'-' if rb==7 else rb} wait{[b for b in range(6) if wm>>b&1]}  {m.group(2)}"
        out.append(s); i+=2; continue
    i+=1
a,b=int(sys.argv[2],16),int(sys.argv[3],16)
for s in out:
    if a<=int(s[:4],16)<=b: print(s)
