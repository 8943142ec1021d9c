#!/usr/bin/env python3
"""inplace-window.py AUDIT_LOG START END: what bounds an in-place update,
from kube-apiserver's audit log of a bench cluster kept with KEEP_CLUSTER=1
(.e2e/kwok/clusters/everynode-bench/logs/audit.log). START and END are the
update's window in UTC (RFC 3339), from the bench's "rolling update of the
image" and "update N s" lines.

Per pod: everynode's image patch, then kwok's two status writes after it
(kubelet-step, e2e/kwok: the container waiting with the new image, then
running and ready). Prints how long each step took, how many pods were
patched but not running again over time (at maxUnavailable the budget
bounds the update, below it the client QPS or the controller), and how
soon after a pod ran again everynode sent its next patch: the controller's
own share of each wave while the budget bounds the update.

For the ungated variant only: with the gate, everynode's gate writes and
kwok's Ready flip (kubelet-gates) come between, and "running" is not yet
available. The helpers ts and q are join-trace.py's, not shared: that
script parses timestamps to datetimes, this one to seconds."""
import bisect
import json
import sys
from datetime import datetime


def ts(s):
    return datetime.fromisoformat(s.replace('Z', '+00:00')).timestamp()


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def main(log, start, end):
    t0, t1 = ts(start), ts(end)
    patch, kwok = {}, {}
    with open(log) as f:
        for line in f:
            e = json.loads(line)
            t = ts(e['stageTimestamp'])
            o = e.get('objectRef') or {}
            if t < t0 or t > t1 or o.get('resource') != 'pods' or e['verb'] not in ('patch', 'update'):
                continue
            ua, name, sub = e.get('userAgent', ''), o.get('name'), o.get('subresource', '')
            if ua.startswith('everynode/') and sub == '':
                patch.setdefault(name, t)
            elif ua.startswith('kwok') and sub == 'status':
                kwok.setdefault(name, []).append(t)
    rows = []
    for name, tp in patch.items():
        after = sorted(x for x in kwok.get(name, []) if x >= tp)
        if len(after) >= 2:
            rows.append((tp, after[0], after[1]))
    if not rows:
        sys.exit('no pod patched by everynode and restarted by kwok in that window')
    rows.sort()
    print(f'pods patched {len(patch)}, restarted by kwok after the patch {len(rows)}')
    for what, xs in (('patch to stopped', [k1 - tp for tp, k1, _ in rows]),
                     ('stopped to running', [k2 - k1 for _, k1, k2 in rows]),
                     ('patch to running', [k2 - tp for tp, _, k2 in rows])):
        print(f'{what:19s} p50 {q(xs, .5):.2f} s  p90 {q(xs, .9):.2f}  max {max(xs):.2f}')
    first, last = rows[0][0], max(r[2] for r in rows)
    samples, t = [], first
    while t <= last:
        samples.append(sum(1 for tp, _, k2 in rows if tp <= t < k2))
        t += 0.5
    print('patched, not running, every 0.5 s:', ' '.join(map(str, samples)))
    running = sorted(r[2] for r in rows)
    react = []
    for tp, _, _ in rows:
        i = bisect.bisect_right(running, tp) - 1
        if i >= 0:
            react.append(tp - running[i])
    if react:
        print(f'patch after the latest restart: p50 {q(react, .5):.2f} s  p90 {q(react, .9):.2f}')
    print(f'first patch {first - t0:.2f} s into the window, last pod running {last - first:.2f} s after it')


if __name__ == '__main__':
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
