package main

import (
	"strings"
	"testing"
	"time"
)

func TestJoinStages(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	nodes := map[string]nodeTimes{
		"a": {created: at(0), untainted: at(100)},
		"b": {created: at(0), untainted: at(200)},
		"c": {created: at(0), untainted: at(50)}, // no pod yet: left out
	}
	pods := map[string]podTimes{
		"a": {seen: at(400), bound: at(500), available: at(900)},
		"b": {seen: at(1200), bound: at(1300), available: at(1400)},
	}
	got := joinStages(nodes, pods)
	want := map[string][len(joinStageNames)]float64{
		"a": {0.1, 0.3, 0.1, 0.4},
		"b": {0.2, 1.0, 0.1, 0.1},
	}
	for i := range joinStageNames {
		if len(got[i]) != 2 {
			t.Fatalf("stage %d: %d values, want 2", i, len(got[i]))
		}
		for _, x := range got[i] {
			if !near(x, want["a"][i]) && !near(x, want["b"][i]) {
				t.Errorf("stage %d: unexpected %v", i, x)
			}
		}
	}
	slow, ok := slowestJoin(nodes, pods)
	if !ok || !strings.HasPrefix(slow, "b 1.40s: node created → taint lifted 0.20s, taint lifted → pod seen 1.00s") {
		t.Errorf("slowestJoin = %q, %v", slow, ok)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
