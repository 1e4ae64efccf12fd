# Usage: python3 sym.py SITES_FILE BINARY  (ranks the call sites count_cycle wrote, per cycle)
import subprocess,sys,collections,re
rows=[l.split() for l in open(sys.argv[1])]
addrs=[r[0] for r in rows]
out=subprocess.run(['addr2line','-e',sys.argv[2],'-f','-i','-C','-p']+addrs,capture_output=True,text=True).stdout
# each address's output: first line, then lines beginning with ' (inlined by)'
groups=[];cur=None
for l in out.split('\n'):
    if not l: continue
    if l.lstrip().startswith('(inlined by)'): cur.append(l)
    else:
        cur=[l]; groups.append(cur)
agg=collections.Counter()
for (a,n),g in zip(rows,groups):
    loc=None
    for l in g:
        m=re.search(r'((?:lib|count_cycle\.cpp|bench)[^ ]*?:\d+)',l.replace('/work/main/build-dev/../','').replace('/work/wt-hotpath/build-dev/../','').replace('count_cycle.cpp','count_cycle.cpp'))
        if m: loc=m.group(1); break
    agg[loc or g[-1][-80:]]+=float(n)
tot=sum(agg.values())
print(f"total attributed {tot:.2f}")
for k,v in agg.most_common(45): print(f"{v:7.2f}  {k}")
