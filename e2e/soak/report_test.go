package soak

import (
	"strings"
	"testing"
	"time"
)

func TestReport(t *testing.T) {
	sched := Generate(3, 10*time.Minute)
	r := &Result{Seed: 3, Duration: 10 * time.Minute, Nodes: 50, Start: t0, End: t0.Add(10 * time.Minute), Schedule: sched,
		Faults: []FaultRecord{
			{Event: Event{Kind: FaultLeaderStop, For: 30 * time.Second, Set: -1}, Start: t0.Add(time.Minute), End: t0.Add(91 * time.Second), Target: "replica 1 (pid 42)"},
			{Event: Event{Kind: FaultFollowerKill, Set: -1}, Start: t0.Add(2 * time.Minute), Skipped: "no follower"},
		},
		Traffic: map[EventKind]*TrafficStats{TrafficPlainPods: {Scheduled: 3, Done: 2, Failed: 1, Errors: map[string]int{"timeout": 1},
			Examples: map[string]string{"timeout": "10:03:00 creating pods:\n  context deadline exceeded"}}},
		Admission:  map[string]int{"ordinary pods created": 20},
		Violations: []Violation{{At: t0.Add(3 * time.Minute), Invariant: InvDuplicate, Set: "s00-mu1", Message: "node n1 holds 2 live pods", Objects: []string{"pod a", "pod b"}}},
		Converge:   Convergence{LastFaultEnd: t0.Add(9 * time.Minute), Released: t0.Add(10 * time.Minute), Converged: t0.Add(12 * time.Minute), Bound: 5 * time.Minute, Slowest: "s00-mu1"},
		Trends:     Trends(series(0, 1, t0, 10*time.Minute, 50<<20, 10<<20, 100, 10)),
		Plot:       "soak.svg",
	}
	md := r.Markdown()
	for _, want := range []string{
		"# everynode soak: seed 3, 10m0s, 50 nodes",
		"FAIL: 1 invariant violations",
		"`make soak SEED=3 DURATION=10m0s NODES=50`",
		"| 1 | never two live pods of a set on a node, except a surge pair, and never more than maxSurge of those | 1 |",
		"duplicate-pod set s00-mu1: node n1 holds 2 live pods [pod a, pod b]",
		"all 20 converged (observedGeneration current, updated = desired = available) 3m0s after the last fault",
		"| leader-stop | ",
		"| plain-pods | ",
		"timeout 1",
		"- plain-pods, timeout, first: 10:03:00 creating pods: context deadline exceeded",
		"![RSS, heap in use and goroutines](soak.svg)",
		"1:00  leader-stop replica 1 (pid 42) until 1:31",
		"2:00  follower-kill (skipped: no follower)",
		"| s19-apps-mu1 | apps/v1, RollingUpdate maxUnavailable 1, pool a |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	r.Smoke = true
	if r.Replay() != "make soak-smoke" {
		t.Errorf("smoke replay %q", r.Replay())
	}
}
