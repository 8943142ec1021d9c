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

WINDOW = timedelta(seconds=5)  # a wave's pods are bound within this of its start


def ts(s):
    return datetime.strptime(s[:26].rstrip('Z'), '%Y-%m-%dT%H:%M:%S.%f')


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


audit, benchlog = sys.argv[1], sys.argv[2]
starts = []  # (HH:MM:SS, system) of each wave
for l in open(benchlog):
    m = re.match(r'(\d\d:\d\d:\d\d) \[[AB] (\w+) r\d+\] \d+ nodes join \(wave', l)
    if m:
        starts.append((m.group(1), m.group(2)))

# From the audit log, per pod of namespace bench: its binding and kwok's
# first status patch (received, stored); and every pod create.
day, bind, patch, creates = None, {}, {}, []
for l in open(audit):
    try:
        e = json.loads(l)
    except ValueError:
        continue  # a line cut short as the log was read
    o = e.get('objectRef') or {}
    if o.get('resource') != 'pods' or o.get('namespace') != 'bench':
        continue
    r, d = ts(e['requestReceivedTimestamp']), ts(e['stageTimestamp'])
    day = day or r.date()
    sub, name, verb = o.get('subresource', ''), o.get('name', ''), e['verb']
    if sub == 'binding' and verb == 'create':
        bind[name] = (r, d)
    elif sub == 'status' and verb == 'patch' and name not in patch and 'kwok' in e.get('userAgent', ''):
        patch[name] = (r, d)
    elif sub == '' and verb == 'create':
        creates.append((r, d))
waves = [(datetime.combine(day, datetime.strptime(t, '%H:%M:%S').time()), s) for t, s in starts]


def wave_of(t):
    """The wave (start, system) whose window holds t, or None."""
    return next(((w0, s) for w0, s in waves if w0 <= t <= w0 + WINDOW), None)


# One record per joined pod whose kwok patch came after its binding.
pods = {}  # system -> [(offset into the wave, binding, reaction, patch) in ms]
for name, (br, bd) in bind.items():
    w = wave_of(br)
    if w and name in patch and patch[name][0] >= bd:
        pr, pd = patch[name]
        ms = lambda a, b: (b - a).total_seconds() * 1000
        pods.setdefault(w[1], []).append((ms(w[0], br), ms(br, bd), ms(bd, pr), ms(pr, pd)))
made = {}  # system -> create latencies in ms
for r, d in creates:
    w = wave_of(r)
    if w:
        made.setdefault(w[1], []).append((d - r).total_seconds() * 1000)


def line(label, xs, extra=''):
    print(f'  {label:42s} p50 {q(xs, .5):6.1f} ms  p90 {q(xs, .9):6.1f}  mean {st.mean(xs):6.1f}{extra}')


for s, rows in pods.items():
    print(s, len(rows), 'pods')
    for i, label in enumerate(['binding latency', 'kwok reaction (bound -> patch received)', 'kwok patch latency'], 1):
        line(label, [r[i] for r in rows])
    if made.get(s):
        line('controller pod create latency', made[s], f'  ({len(made[s])})')
print('kwok reaction by the binding\'s offset from the wave start, to the second (p50 ms, n)')
for s, rows in pods.items():
    by = {}
    for off, _, reaction, _ in rows:
        by.setdefault(min(int(off / 250), 12), []).append(reaction)
    print(s, ' '.join(f'{k * 0.25:.2f}s:{q(v, .5):.0f}({len(v)})' for k, v in sorted(by.items())))
