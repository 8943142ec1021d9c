package soak

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"time"
)

// Generate: the schedule drawn from a seed, a pure function of it and
// of the run's length.

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
