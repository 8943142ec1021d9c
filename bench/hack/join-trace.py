#!/usr/bin/env python3
"""join-trace.py AUDIT_LOG BENCH_LOG: where a join's pods spend the time
after they are made, pod by pod, from kube-apiserver's audit log of a bench
cluster kept with KEEP_CLUSTER=1 (.e2e/kwok/clusters/everynode-bench/logs/
audit.log) and the bench's own output (the "N nodes join (wave i)" lines).

Per system it prints the p50, p90 and mean of: kube-scheduler's binding
(its POST's latency at kube-apiserver), kwok's reaction (binding stored ->
kwok's first status patch of the pod received: the watch event's way to
kwok, kwok's queue and its work), that patch's latency, and the
controller's pod creates (admission included). A join's pods are the
bindings in namespace bench within 5 s of a wave's start; the bench log
gives that start to the second, so the last table (kwok's reaction by the
binding's offset into its wave) is approximate.
"""
import json, re, sys, statistics as st
from datetime import datetime, timedelta
audit, benchlog = sys.argv[1], sys.argv[2]
day = None
waves = []  # (start datetime, system)
for l in open(benchlog):
    m = re.match(r'(\d\d:\d\d:\d\d) \[(A|B) (\w+) r(\d+)\] \d+ nodes join \(wave (\d+)', l)
    if m: waves.append((m.group(1), m.group(3)))
def ts(s): return datetime.strptime(s[:26].rstrip('Z'), '%Y-%m-%dT%H:%M:%S.%f')
bind, patch, create = {}, {}, []
for l in open(audit):
    try:
        e = json.loads(l)
    except ValueError:
        continue  # a line cut short as the log was read
    o = e.get('objectRef') or {}
    if o.get('resource') != 'pods' or o.get('namespace') != 'bench': continue
    r, d = ts(e['requestReceivedTimestamp']), ts(e['stageTimestamp'])
    if day is None: day = r.date()
    sub, name, verb = o.get('subresource', ''), o.get('name', ''), e['verb']
    if sub == 'binding' and verb == 'create': bind[name] = (r, d)
    elif sub == 'status' and verb == 'patch' and name not in patch and 'kwok' in e.get('userAgent', ''):
        patch[name] = (r, d)
    elif sub == '' and verb == 'create': create.append((r, d, e.get('userAgent','')[:20]))
W = [(datetime.combine(day, datetime.strptime(t, '%H:%M:%S').time()), s) for t, s in waves]
res = {}
for name, (br, bd) in bind.items():
    for w0, s in W:
        if w0 <= br <= w0 + timedelta(seconds=5):
            if name in patch and patch[name][0] >= bd:
                pr, pd = patch[name]
                res.setdefault(s, []).append(((bd-br).total_seconds(), (pr-bd).total_seconds(), (pd-pr).total_seconds()))
cres = {}
for r, d, ua in create:
    for w0, s in W:
        if w0 <= r <= w0 + timedelta(seconds=5):
            cres.setdefault(s, []).append((d-r).total_seconds())
def q(xs, p): xs = sorted(xs); return xs[min(len(xs)-1, int(p*len(xs)))]
for s, rows in res.items():
    print(s, len(rows), 'pods')
    for i, n in enumerate(['binding latency', 'kwok reaction (bound -> patch received)', 'kwok patch latency']):
        xs = [r[i]*1000 for r in rows]
        print(f'  {n:42s} p50 {q(xs,.5):6.1f} ms  p90 {q(xs,.9):6.1f}  mean {st.mean(xs):6.1f}')
    xs = [c*1000 for c in cres.get(s, [])]
    if xs: print(f'  {"controller pod create latency":42s} p50 {q(xs,.5):6.1f} ms  p90 {q(xs,.9):6.1f}  mean {st.mean(xs):6.1f}  ({len(xs)})')
print('kwok reaction by the binding\'s offset from the wave start, to the second (p50 ms, n)')
for s in res:
    b = {}
    for name, (br, bd) in bind.items():
        for w0, ss in W:
            if ss == s and w0 <= br <= w0 + timedelta(seconds=5) and name in patch and patch[name][0] >= bd:
                off = (br - w0).total_seconds()
                k = min(int(off / 0.25), 12)
                b.setdefault(k, []).append((patch[name][0] - bd).total_seconds() * 1000)
    print(s, ' '.join(f'{k*0.25:.2f}s:{q(v,.5):.0f}({len(v)})' for k, v in sorted(b.items())))
