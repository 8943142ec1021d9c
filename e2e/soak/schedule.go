package soak

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// What happens in a soak, and when: a pure function of the seed and the
// duration (Generate), so that a run that broke an invariant is replayed
// with `make soak SEED=<n> DURATION=<d>`. The cluster's own timing still
// differs between two runs of one schedule (which replica leads when a
// fault fires, how far a rollout got); the schedule is what is the same.

// EventKind is one kind of traffic or fault.
type EventKind string

// The faults. Each lasts Event.For: how long a process stays down or
// stopped, how long kube-apiserver or etcd stays away, how long a burst
// or a bad revision lasts.
const (
	// FaultLeaderKill: kill -9 of the replica that holds the Lease; it
	// is started again For later.
	FaultLeaderKill EventKind = "leader-kill"
	// FaultFollowerKill: kill -9 of the replica that does not.
	FaultFollowerKill EventKind = "follower-kill"
	// FaultLeaderStop: SIGSTOP of the leader for For, past its Lease
	// (15 s), then SIGCONT.
	FaultLeaderStop EventKind = "leader-stop"
	// FaultFollowerStop: SIGSTOP of the follower, then SIGCONT.
	FaultFollowerStop EventKind = "follower-stop"
	// FaultAPIServerRestart: kube-apiserver stopped, away For, started.
	FaultAPIServerRestart EventKind = "apiserver-restart"
	// FaultEtcdRestart: etcd stopped, away For, started.
	FaultEtcdRestart EventKind = "etcd-restart"
	// FaultSchedulerRestart: kube-scheduler restarted (For is the time
	// the restart is given in the schedule; it takes what it takes).
	FaultSchedulerRestart EventKind = "scheduler-restart"
	// FaultCARotation: a rotation of everynode's self-signed CA asked for
	// on its Secret; For later kube-scheduler is restarted to read the
	// new bundle, as it reads its extender CA file once.
	FaultCARotation EventKind = "ca-rotation"
	// FaultInFlightBurst: N concurrent dry-run set creates through
	// kube-apiserver for For, N a multiple of everynode's --max-in-flight.
	FaultInFlightBurst EventKind = "inflight-burst"
	// FaultCrashLoopRevision: set Set gets an image that crash-loops
	// (tag crash-loop-…); For later a good image follows.
	FaultCrashLoopRevision EventKind = "crash-loop-revision"
)

// The traffic.
const (
	// TrafficTemplateChange: a new template for Set: a new image when Arg
	// is even (in place where the set allows), a new env value when odd.
	TrafficTemplateChange EventKind = "template-change"
	// TrafficRolloutUndo: `kubectl everynode rollout undo` (or stock
	// `kubectl rollout undo` for apps/v1) of Set.
	TrafficRolloutUndo EventKind = "rollout-undo"
	// TrafficPauseResume: `rollout pause` of Set, `rollout resume` For later.
	TrafficPauseResume EventKind = "pause-resume"
	// TrafficOrphanRecreate: Set deleted with --cascade=orphan, made again
	// For later from the same spec: it must adopt its pods and revisions.
	TrafficOrphanRecreate EventKind = "orphan-recreate"
	// TrafficSetRecreate: Set deleted (cascade), made again For later.
	TrafficSetRecreate EventKind = "set-recreate"
	// TrafficStrategyChange: the partition (Arg percent) or the canary's
	// pool of Set moves.
	TrafficStrategyChange EventKind = "strategy-change"
	// TrafficSizingChange: the nodeSizing fraction of Set moves
	// (SizingFractions[Arg]): pods resized in place.
	TrafficSizingChange EventKind = "sizing-change"
	// TrafficOnDeleteRoll: N old pods of OnDelete set Set deleted by hand.
	TrafficOnDeleteRoll EventKind = "ondelete-roll"
	// TrafficNodeJoin: N new kwok nodes.
	TrafficNodeJoin EventKind = "node-join"
	// TrafficNodeLeave: N nodes tainted as leaving, then deleted.
	TrafficNodeLeave EventKind = "node-leave"
	// TrafficNodeUnreachable: N nodes cut off from kube-apiserver for For
	// (the ValidatingAdmissionPolicy of e2e/lifecycle_test.go), then healed.
	TrafficNodeUnreachable EventKind = "node-unreachable"
	// TrafficPlainPods: N ordinary pods created, bound, deleted.
	TrafficPlainPods EventKind = "plain-pods"
	// TrafficDryRun: N server-side dry-run creates, of sets (through
	// everynode's webhooks) and of ordinary pods (never through them).
	TrafficDryRun EventKind = "dry-run"
)

// FaultKinds are all the faults, in the order reports list them.
var FaultKinds = []EventKind{
	FaultLeaderKill, FaultFollowerKill, FaultLeaderStop, FaultFollowerStop,
	FaultAPIServerRestart, FaultEtcdRestart, FaultSchedulerRestart,
	FaultCARotation, FaultInFlightBurst, FaultCrashLoopRevision,
}

// TrafficKinds are all the kinds of traffic, in report order.
var TrafficKinds = []EventKind{
	TrafficTemplateChange, TrafficRolloutUndo, TrafficPauseResume,
	TrafficOrphanRecreate, TrafficSetRecreate, TrafficStrategyChange,
	TrafficSizingChange, TrafficOnDeleteRoll, TrafficNodeJoin,
	TrafficNodeLeave, TrafficNodeUnreachable, TrafficPlainPods, TrafficDryRun,
}

// IsFault reports whether k is a fault.
func (k EventKind) IsFault() bool { return slices.Contains(FaultKinds, k) }

// Event is one thing the soak does. Which fields matter depends on Kind
// (see the kinds); Set is -1 when no set is involved.
type Event struct {
	// At is when it starts, from the start of the schedule.
	At time.Duration `json:"at"`
	// Kind is what it is.
	Kind EventKind `json:"kind"`
	// For is how long it lasts; 0 for what is over at once.
	For time.Duration `json:"for,omitempty"`
	// Set is the index in Catalog() of the set it acts on, or -1.
	Set int `json:"set"`
	// N is a count: nodes, pods, requests, concurrent callers.
	N int `json:"n,omitempty"`
	// Arg is a kind's own parameter (see the kinds).
	Arg int `json:"arg,omitempty"`
}

// End is when the event is over.
func (e Event) End() time.Duration { return e.At + e.For }

// String is the event in one line, for timelines.
func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", fmtOffset(e.At), e.Kind)
	if e.Set >= 0 {
		fmt.Fprintf(&b, " set=%s", setName(e.Set))
	}
	if e.N > 0 {
		fmt.Fprintf(&b, " n=%d", e.N)
	}
	if e.Arg != 0 {
		fmt.Fprintf(&b, " arg=%d", e.Arg)
	}
	if e.For > 0 {
		fmt.Fprintf(&b, " for=%s", e.For.Round(time.Second))
	}
	return b.String()
}

func setName(i int) string {
	c := Catalog()
	if i < 0 || i >= len(c) {
		return fmt.Sprintf("#%d", i)
	}
	return c[i].Name
}

// fmtOffset is an offset as m:ss (or h:mm:ss).
func fmtOffset(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%d:%02d", m, s)
}

// Schedule is a whole soak's events, sorted by At.
type Schedule struct {
	Seed     int64         `json:"seed"`
	Duration time.Duration `json:"duration"`
	Events   []Event       `json:"events"`
}

// Faults are the schedule's faults, in order.
func (s Schedule) Faults() []Event {
	var out []Event
	for _, e := range s.Events {
		if e.Kind.IsFault() {
			out = append(out, e)
		}
	}
	return out
}

// LastFaultEnd is when the last fault is over (0 without faults).
func (s Schedule) LastFaultEnd() time.Duration {
	var end time.Duration
	for _, e := range s.Faults() {
		end = max(end, e.End())
	}
	return end
}

// Overlaps are the pairs of faults of different kinds that are under way
// at the same moment.
func (s Schedule) Overlaps() [][2]Event {
	f := s.Faults()
	var out [][2]Event
	for i := range f {
		for j := i + 1; j < len(f); j++ {
			if f[j].At >= f[i].End() {
				continue
			}
			if f[i].Kind != f[j].Kind {
				out = append(out, [2]Event{f[i], f[j]})
			}
		}
	}
	return out
}

// Counts are the schedule's events by kind.
func (s Schedule) Counts() map[EventKind]int {
	out := map[EventKind]int{}
	for _, e := range s.Events {
		out[e.Kind]++
	}
	return out
}

// Describe sums the schedule up in a few lines: counts of faults and
// traffic by kind, overlaps, and the last fault's end.
func (s Schedule) Describe() string {
	var b strings.Builder
	c := s.Counts()
	fmt.Fprintf(&b, "seed %d, %s: %d events\n  faults:", s.Seed, s.Duration, len(s.Events))
	for _, k := range FaultKinds {
		fmt.Fprintf(&b, " %s %d", k, c[k])
	}
	b.WriteString("\n  traffic:")
	for _, k := range TrafficKinds {
		fmt.Fprintf(&b, " %s %d", k, c[k])
	}
	fmt.Fprintf(&b, "\n  %d overlapping pairs of faults; last fault over at %s\n", len(s.Overlaps()), fmtOffset(s.LastFaultEnd()))
	return b.String()
}

// NewSeed is a seed for a run that was given none: from the clock, so
// two runs differ, and printed so the run can be replayed.
func NewSeed(now time.Time) int64 {
	return now.UnixNano() % math.MaxInt32
}

// The smoke run (`make soak-smoke`): a fixed seed over three minutes, so
// that `make check` runs the same schedule every time.
const (
	SmokeSeed     int64 = 59
	SmokeDuration       = 3 * time.Minute
)
