package soak

import (
	"reflect"
	"testing"
	"time"
)

func TestScheduleIsAFunctionOfSeedAndDuration(t *testing.T) {
	a, b := Generate(42, time.Hour), Generate(42, time.Hour)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two schedules of seed 42 differ:\n%s\n%s", a.Describe(), b.Describe())
	}
	if c := Generate(43, time.Hour); reflect.DeepEqual(a.Events, c.Events) {
		t.Errorf("seeds 42 and 43 gave the same schedule")
	}
	if c := Generate(42, 30*time.Minute); reflect.DeepEqual(a.Events, c.Events) {
		t.Errorf("one hour and 30 minutes gave the same schedule")
	}
}

// Every kind of fault and traffic comes in an hour's schedule, whatever
// the seed, and in the smoke's three minutes too.
func TestEveryKindComes(t *testing.T) {
	runs := map[string]struct {
		seed int64
		d    time.Duration
	}{
		"hour seed 1":   {1, time.Hour},
		"hour seed 7":   {7, time.Hour},
		"hour seed 123": {123, time.Hour},
		"smoke":         {SmokeSeed, SmokeDuration},
	}
	for name, r := range runs {
		t.Run(name, func(t *testing.T) {
			s := Generate(r.seed, r.d)
			c := s.Counts()
			for _, k := range append(append([]EventKind{}, FaultKinds...), TrafficKinds...) {
				if c[k] == 0 {
					t.Errorf("no %s in the schedule:\n%s", k, s.Describe())
				}
			}
		})
	}
}

// Faults overlap: each hour has storms of two or three kinds at once.
func TestFaultsOverlap(t *testing.T) {
	for _, seed := range []int64{1, 2, 3, 99, 2026} {
		for _, d := range []time.Duration{time.Hour, SmokeDuration} {
			s := Generate(seed, d)
			if n := len(s.Overlaps()); n == 0 {
				t.Errorf("seed %d, %s: no two faults overlap:\n%s", seed, d, s.Describe())
			}
		}
	}
	s := Generate(5, time.Hour)
	if n := len(s.Overlaps()); n < 6 {
		t.Errorf("seed 5, an hour: %d overlapping pairs, want at least 6 (six storms)", n)
	}
}

// The schedule keeps its own rules: sorted; faults inside the margins;
// one fault of a kind at a time; events on sets only on sets they fit;
// lasting events on a set alone on it; traffic within the duration.
func TestScheduleRules(t *testing.T) {
	cat := Catalog()
	for _, seed := range []int64{1, 8, 64, 4096} {
		for _, d := range []time.Duration{time.Hour, 10 * time.Minute, SmokeDuration} {
			s := Generate(seed, d)
			lo, hi := margins(d)
			for i, e := range s.Events {
				if i > 0 && e.At < s.Events[i-1].At {
					t.Fatalf("seed %d: events out of order at %d: %s after %s", seed, i, e, s.Events[i-1])
				}
				if e.At < 0 || e.End() > d {
					t.Errorf("seed %d, %s: %s is outside the run", seed, d, e)
				}
				if e.Kind.IsFault() && (e.At < lo || e.End() > hi) {
					t.Errorf("seed %d, %s: fault %s outside [%s, %s]", seed, d, e, lo, hi)
				}
				if ok := trafficSets[e.Kind]; ok != nil && (e.Set < 0 || !ok(cat[e.Set])) {
					t.Errorf("seed %d: %s acts on a set it does not fit", seed, e)
				}
				if e.Kind == FaultCrashLoopRevision && (e.Set < 0 || !cat[e.Set].Rolling()) {
					t.Errorf("seed %d: %s on a set that does not roll", seed, e)
				}
				for _, o := range s.Events[i+1:] {
					if o.At >= e.End() {
						continue
					}
					if e.Kind.IsFault() && o.Kind == e.Kind {
						t.Errorf("seed %d: two %s at once: %s and %s", seed, e.Kind, e, o)
					}
					if e.For > 0 && e.Set >= 0 && o.Set == e.Set {
						t.Errorf("seed %d: %s while %s holds the set", seed, o, e)
					}
				}
			}
			if last := s.LastFaultEnd(); last > hi || last == 0 {
				t.Errorf("seed %d, %s: last fault over at %s, want within (0, %s]", seed, d, last, hi)
			}
		}
	}
}

// A SIGSTOP lasts past the leader's Lease (15 s), so that the other
// replica takes over while the stopped one still thinks it leads.
func TestStopsOutlastTheLease(t *testing.T) {
	for _, e := range Generate(11, time.Hour).Faults() {
		if (e.Kind == FaultLeaderStop || e.Kind == FaultFollowerStop) && e.For <= 15*time.Second {
			t.Errorf("%s: not past the 15 s Lease", e)
		}
		if e.Kind == FaultInFlightBurst && e.N <= InFlightCap {
			t.Errorf("%s: %d callers do not pass the cap of %d", e, e.N, InFlightCap)
		}
	}
}

func TestEventString(t *testing.T) {
	e := Event{At: 61 * time.Second, Kind: FaultCrashLoopRevision, For: 90 * time.Second, Set: 2}
	if got, want := e.String(), "1:01 crash-loop-revision set=s02-surge1 for=1m30s"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got := fmtOffset(time.Hour + 2*time.Minute + 3*time.Second); got != "1:02:03" {
		t.Errorf("fmtOffset = %q", got)
	}
}
