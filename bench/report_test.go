package main

import (
	"strings"
	"testing"
)

// The CPU table is one row per process and one column pair (plus ratio) per
// span; a row with a cell too few or too many shifts every figure after it
// under the wrong heading.
func TestWriteCPUTable(t *testing.T) {
	run := func(sys string, rollout, join, whole float64) *runResult {
		return &runResult{
			system:     sys,
			rolloutCPU: map[string]float64{"everynode": rollout, total: rollout * 10},
			joinCPU:    map[string]float64{"everynode": join, total: join * 10},
			runCPU:     map[string]float64{"everynode": whole, total: whole * 10},
			quietWait:  5,
		}
	}
	var b strings.Builder
	writeCPUTable(&b, []*runResult{
		run(upstream.name, 1, 0.5, 4),
		run(everynode.name, 3, 0.25, 8),
	})

	var header string
	rows := map[string]string{}
	for _, line := range strings.Split(b.String(), "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		if header == "" {
			header = line
			continue
		}
		rows[strings.TrimSpace(strings.Split(line, "|")[1])] = line
		if got, want := strings.Count(line, "|"), strings.Count(header, "|"); got != want {
			t.Errorf("row %q has %d cell borders, the header %d", line, got, want)
		}
	}
	// process | rollout A, B, ratio | join A, B, ratio | run A, B, ratio
	if got, want := rows["everynode"], "| everynode | 1.00 | 3.00 | 3.00 | 0.50 | 0.25 | 0.50 | 4.00 | 8.00 | 2.00 |"; got != want {
		t.Errorf("everynode row:\n got %s\nwant %s", got, want)
	}
	if _, ok := rows["total"]; !ok {
		t.Errorf("no total row in\n%s", b.String())
	}
}
