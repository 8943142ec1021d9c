package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A report is named by its scale alone, so the next run at that scale
// replaces it instead of adding a file per run.
func TestReportBase(t *testing.T) {
	for _, tc := range []struct {
		out   string
		nodes int
		want  string
	}{
		{"bench/results", 1000, filepath.Join("bench", "results", "1000-nodes")},
		{"/tmp/exp", 5000, filepath.Join("/tmp", "exp", "5000-nodes")},
	} {
		if got := reportBase(tc.out, tc.nodes); got != tc.want {
			t.Errorf("reportBase(%q, %d) = %q, want %q", tc.out, tc.nodes, got, tc.want)
		}
	}
	// A run with peers keeps its own file beside the two-system one.
	if got := (config{peers: "kruise"}).peersSuffix(); got != "-peers" {
		t.Errorf("peersSuffix with peers = %q, want -peers", got)
	}
	if got := (config{}).peersSuffix(); got != "" {
		t.Errorf("peersSuffix without peers = %q, want none", got)
	}
}

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

// The budget table gives each phase's parts and, below, only the requests
// whose counts differ between the systems, apps/v1 and everynode.io sets
// counted as one kind.
func TestWriteBudgetTable(t *testing.T) {
	run := func(sys, statusResource string, creates int) *runResult {
		r := &runResult{system: sys}
		r.budgets[1] = &budget{requests: 1000 + creates, idle: 0.01, unspent: 0.1, tail: 0.05, byWhat: map[string]int{
			"create pods": 500 + creates, "delete pods": 500, "update " + statusResource: 3,
		}}
		return r
	}
	var b strings.Builder
	writeBudgetTable(&b, []*runResult{
		run(upstream.name, "daemonsets.apps/status", 0),
		run(everynode.name, "daemonsets.everynode.io/status", 10),
	}, config{qps: 50, burst: 100})
	out := b.String()
	for _, want := range []string{
		"| rolling update, maxUnavailable 10% | requests | 1000 | 1010 | +0.20 |",
		"| rolling update, maxUnavailable 10% | `create pods` | 500 | 510 |",
		"| rollout | requests | – | – | – |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no line %q in\n%s", want, out)
		}
	}
	for _, unwanted := range []string{"`delete pods`", "status`"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("%s is listed though both systems made as many:\n%s", unwanted, out)
		}
	}
}
