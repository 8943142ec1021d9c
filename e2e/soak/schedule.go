package soak

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
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

// The generator's constants. A fault's length is drawn from [min, max];
// mean is the mean time between two extra faults of the kind (each kind
// also comes once for sure); a kind of traffic comes on average every
// mean, at least once.
type faultShape struct {
	min, max, mean time.Duration
}

var faultShapes = map[EventKind]faultShape{
	FaultLeaderKill:        {5 * time.Second, 30 * time.Second, 12 * time.Minute},
	FaultFollowerKill:      {5 * time.Second, 30 * time.Second, 12 * time.Minute},
	FaultLeaderStop:        {20 * time.Second, 45 * time.Second, 10 * time.Minute},
	FaultFollowerStop:      {20 * time.Second, 45 * time.Second, 12 * time.Minute},
	FaultAPIServerRestart:  {time.Second, 10 * time.Second, 12 * time.Minute},
	FaultEtcdRestart:       {time.Second, 5 * time.Second, 15 * time.Minute},
	FaultSchedulerRestart:  {5 * time.Second, 5 * time.Second, 10 * time.Minute},
	FaultCARotation:        {30 * time.Second, 60 * time.Second, 20 * time.Minute},
	FaultInFlightBurst:     {5 * time.Second, 15 * time.Second, 10 * time.Minute},
	FaultCrashLoopRevision: {60 * time.Second, 4 * time.Minute, 12 * time.Minute},
}

type trafficShape struct {
	mean     time.Duration
	min, max time.Duration // For, when the kind lasts
}

var trafficShapes = map[EventKind]trafficShape{
	TrafficTemplateChange:  {mean: 30 * time.Second},
	TrafficRolloutUndo:     {mean: 3 * time.Minute},
	TrafficPauseResume:     {mean: 4 * time.Minute, min: 20 * time.Second, max: 90 * time.Second},
	TrafficOrphanRecreate:  {mean: 6 * time.Minute, min: 5 * time.Second, max: 30 * time.Second},
	TrafficSetRecreate:     {mean: 8 * time.Minute, min: 5 * time.Second, max: 30 * time.Second},
	TrafficStrategyChange:  {mean: 4 * time.Minute},
	TrafficSizingChange:    {mean: 5 * time.Minute},
	TrafficOnDeleteRoll:    {mean: 2 * time.Minute},
	TrafficNodeJoin:        {mean: 3 * time.Minute},
	TrafficNodeLeave:       {mean: 4 * time.Minute},
	TrafficNodeUnreachable: {mean: 6 * time.Minute, min: 60 * time.Second, max: 3 * time.Minute},
	TrafficPlainPods:       {mean: 10 * time.Second},
	TrafficDryRun:          {mean: 5 * time.Second},
}

const (
	// MaxConcurrentFaults bounds the faults under way at once, beyond the
	// first of each kind (placed whatever the others do).
	MaxConcurrentFaults = 3
	// InFlightCap is the --max-in-flight the soak runs everynode with,
	// so that a burst of a few hundred callers passes it.
	InFlightCap = 64
)

// margins are when faults may start and must end: a quiet start so the
// first fault finds the sets at work, and a quiet end for the faults'
// aftermath to show before the release (run.go).
func margins(d time.Duration) (from, to time.Duration) {
	m := max(10*time.Second, d/20)
	return m, d - m
}

// Generate makes the schedule of a soak of duration d from seed. It is a
// pure function: the same seed and duration give the same schedule
// (math/rand/v2's PCG; the schedule is certain to be the same when the
// replay is built with the same Go release).
//
// Faults: every kind once, at spread-out times; storms of two or three
// kinds starting within seconds of each other (one per 10 minutes, at
// least one), so faults overlap by construction; more of each kind at
// random (mean faultShapes[k].mean), keeping at most MaxConcurrentFaults
// under way and one of a kind at a time. Every fault ends by d - margin.
//
// Traffic: each kind at least once, then as a Poisson process of its
// mean. Events on one set do not overlap a lasting event on it (pause,
// delete and recreate, a bad revision): those keep the set to themselves.
func Generate(seed int64, d time.Duration) Schedule {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	g := &generator{rng: rng, d: d}
	g.faults()
	g.traffic()
	slices.SortStableFunc(g.events, func(a, b Event) int {
		if c := cmp.Compare(a.At, b.At); c != 0 {
			return c
		}
		return cmp.Compare(a.Kind, b.Kind)
	})
	return Schedule{Seed: seed, Duration: d, Events: g.events}
}

type generator struct {
	rng *rand.Rand
	d   time.Duration
	// events are those placed so far: faults first, then traffic kind by
	// kind, a later kind avoiding the sets an earlier one holds.
	events []Event
}

func (g *generator) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(g.rng.Int64N(int64(hi-lo)+1))
}

func (g *generator) length(k EventKind) time.Duration {
	s := faultShapes[k]
	// Whole seconds: timelines print seconds.
	return g.between(s.min, s.max).Round(time.Second)
}

// setFree reports whether set s is free in [from, to]: no lasting event
// on it then, and, if [from, to] is itself a lasting event's, no event
// on it at all.
func (g *generator) setFree(s int, from, to time.Duration) bool {
	return !slices.ContainsFunc(g.events, func(e Event) bool {
		return e.Set == s && (e.For > 0 || to > from) && from <= e.End() && e.At <= to
	})
}

// pickSet picks a set of the catalog that ok accepts and that is free in
// [from, to]; -1 when none is.
func (g *generator) pickSet(ok func(SetSpec) bool, from, to time.Duration) int {
	var candidates []int
	for i, s := range Catalog() {
		if ok(s) && g.setFree(i, from, to) {
			candidates = append(candidates, i)
		}
	}
	if len(candidates) == 0 {
		return -1
	}
	return candidates[g.rng.IntN(len(candidates))]
}

// underWay is the most faults under way at one moment of [from, to).
func (g *generator) underWay(from, to time.Duration) int {
	// The count only rises at from or at a fault's start.
	points := []time.Duration{from}
	for _, e := range g.events {
		if e.Kind.IsFault() && from < e.At && e.At < to {
			points = append(points, e.At)
		}
	}
	n := 0
	for _, p := range points {
		c := 0
		for _, e := range g.events {
			if e.Kind.IsFault() && e.At <= p && p < e.End() {
				c++
			}
		}
		n = max(n, c)
	}
	return n
}

// kindWithin reports whether a fault of kind k is under way at some
// moment of [from, to).
func (g *generator) kindWithin(k EventKind, from, to time.Duration) bool {
	return slices.ContainsFunc(g.events, func(e Event) bool { return e.Kind == k && e.At < to && from < e.End() })
}

// place adds fault k at at if it fits: one of a kind at a time (with 5 s
// between), at most limit under way (0: no limit), within the margins,
// and (for a bad revision) a free set. It reports whether it did.
func (g *generator) place(k EventKind, at time.Duration, limit int) bool {
	lo, hi := margins(g.d)
	// A fault longer than half the window (a short smoke run) is cut
	// to that.
	e := Event{At: at, Kind: k, For: min(g.length(k), ((hi - lo) / 2).Round(time.Second)), Set: -1}
	if e.End() > hi {
		e.At = hi - e.For
	}
	if e.At < lo {
		return false
	}
	if g.kindWithin(k, e.At-5*time.Second, e.End()+5*time.Second) {
		return false
	}
	if limit > 0 && g.underWay(e.At, e.End()) >= limit {
		return false
	}
	switch k {
	case FaultCrashLoopRevision:
		e.Set = g.pickSet(SetSpec.Rolling, e.At, e.End())
		if e.Set < 0 {
			return false
		}
	case FaultInFlightBurst:
		e.N = InFlightCap * (2 + g.rng.IntN(3))
	}
	g.events = append(g.events, e)
	return true
}

func (g *generator) faults() {
	lo, hi := margins(g.d)
	span := hi - lo
	// Every kind once, each in its own slice of the run, in a random order.
	kinds := slices.Clone(FaultKinds)
	g.rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	for i, k := range kinds {
		slot := span / time.Duration(len(kinds))
		at := lo + slot*time.Duration(i) + time.Duration(g.rng.Int64N(int64(slot)+1))
		// A first placement that collides with its own kind cannot
		// happen (one of each so far); try later slots' times if the
		// end margin pushes it out.
		for try := 0; try < 10 && !g.place(k, at, 0); try++ {
			at = lo + time.Duration(g.rng.Int64N(int64(span)+1))
		}
	}
	// Storms: two or three kinds within 5 s of each other.
	storms := max(1, int(g.d/(10*time.Minute)))
	for range storms {
		at := g.between(lo, hi)
		n := 2 + g.rng.IntN(2)
		perm := g.rng.Perm(len(FaultKinds))
		placed := 0
		for _, p := range perm {
			if placed == n {
				break
			}
			if g.place(FaultKinds[p], at+g.between(0, 5*time.Second), MaxConcurrentFaults) {
				placed++
			}
		}
	}
	// More of each kind, as a Poisson process per kind.
	for _, k := range FaultKinds {
		mean := faultShapes[k].mean
		for t := lo + g.exp(mean); t < hi; t += g.exp(mean) {
			g.place(k, t, MaxConcurrentFaults)
		}
	}
}

// exp is an exponential interval of mean m, whole seconds, at least one.
func (g *generator) exp(m time.Duration) time.Duration {
	d := time.Duration(g.rng.ExpFloat64() * float64(m))
	return max(time.Second, d.Round(time.Second))
}

// trafficSets says which sets a kind of traffic may act on; nil for the
// kinds that act on none.
var trafficSets = map[EventKind]func(SetSpec) bool{
	TrafficTemplateChange: func(SetSpec) bool { return true },
	TrafficRolloutUndo:    func(SetSpec) bool { return true },
	TrafficPauseResume:    SetSpec.Pausable,
	TrafficOrphanRecreate: func(SetSpec) bool { return true },
	// Not a set another depends on: its dependents' new pods would wait.
	TrafficSetRecreate:    func(s SetSpec) bool { return s.Name != "s00-mu1" && s.Name != "s16-apps" },
	TrafficStrategyChange: SetSpec.Limited,
	TrafficSizingChange:   func(s SetSpec) bool { return s.Sizing },
	TrafficOnDeleteRoll:   func(s SetSpec) bool { return s.OnDelete },
}

func (g *generator) traffic() {
	lo, hi := margins(g.d)
	for _, k := range TrafficKinds {
		shape := trafficShapes[k]
		var times []time.Duration
		// Once for sure, somewhere in the run; then the process.
		times = append(times, g.between(lo, hi))
		for t := g.exp(shape.mean); t < g.d; t += g.exp(shape.mean) {
			times = append(times, t)
		}
		for _, t := range times {
			e := Event{At: t, Kind: k, Set: -1}
			if shape.max > 0 {
				e.For = min(g.between(shape.min, shape.max), g.d/2).Round(time.Second)
				if e.End() > g.d {
					e.At = max(0, g.d-e.For)
				}
			}
			if ok := trafficSets[k]; ok != nil {
				e.Set = g.pickSet(ok, e.At, e.End())
				if e.Set < 0 {
					continue
				}
			}
			switch k {
			case TrafficTemplateChange:
				e.Arg = g.rng.IntN(2)
			case TrafficStrategyChange:
				e.Arg = 10 * g.rng.IntN(6) // partition 0-50%
			case TrafficSizingChange:
				e.Arg = g.rng.IntN(len(SizingFractions))
			case TrafficOnDeleteRoll:
				e.N = 1 + g.rng.IntN(10)
			case TrafficNodeJoin:
				e.N = 1 + g.rng.IntN(5)
			case TrafficNodeLeave, TrafficNodeUnreachable:
				e.N = 1 + g.rng.IntN(3)
			case TrafficPlainPods:
				e.N = 1 + g.rng.IntN(10)
			case TrafficDryRun:
				e.N = 5 + g.rng.IntN(16)
			}
			g.events = append(g.events, e)
		}
	}
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
