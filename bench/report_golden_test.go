package main

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// updateGolden rewrites the reports under testdata from the code as it
// is: `go test -run Golden -update-golden`, then read the diff.
var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/*.md from the current report code")

// fixtureRun is one run of system sys with every figure the report reads
// set from k, so each system's cells differ and a cell under the wrong
// heading shows.
func fixtureRun(sys string, round int, k float64) *runResult {
	h := hist{buckets: map[float64]float64{0.01: 10 * k, 0.1: 20 * k, math.Inf(1): 20 * k}, sum: 0.5 * k, count: 20 * k}
	r := &runResult{
		system: sys, round: round,
		rollout: 10 * k, updateMaxUnavailable: 20 * k, updateMaxSurge: 30 * k, joinP50: 1 * k, joinP99: 2 * k,
		podsMade: 1000, controllerReqs: int(1500 * k), apiserverReqs: 9000 * k,
		cpuSeconds: 12 * k, rssMB: 80 * k, quietWait: 3,
		bindingsPerSecond: 100 / k,
		schedSLI:          h, joinSchedSLI: h, admission: h,
		controllerByVerb: map[string]int{"create pods": int(600 * k), "delete pods": 500},
		apiserverByVerb:  map[string]float64{"POST pods ": 600 * k},
		rolloutCPU:       map[string]float64{"kube-apiserver": 5 * k, total: 20 * k},
		joinCPU:          map[string]float64{"kube-apiserver": 1 * k, total: 4 * k},
		runCPU:           map[string]float64{"kube-apiserver": 9 * k, total: 40 * k},
		series:           []point{{t: 1 * k, n: 1}, {t: 2 * k, n: 2}},
		kwokWatchesCut:   [4]int{0, 1, 0, 0},
		watchersClosed:   [4]map[string]float64{{}, {"pods": 1}, {}, nil},
		podWatchesCut:    [4]map[string]int{nil, {"kwok-controller": 1}, nil, nil},
		joinUnscheduled:  2,
	}
	for i := range r.joinStages {
		r.joinStages[i] = []float64{0.1 * k * float64(i+1), 0.2 * k * float64(i+1)}
	}
	r.rolloutStages = [2][]float64{{0.3 * k, 0.4 * k}, {0.5 * k}}
	for i := range r.budgets {
		r.budgets[i] = &budget{requests: int(100 * k), idle: 0.1 * k, unspent: 0.2, tail: 0.3 * k,
			byWhat: map[string]int{"create pods": int(50 * k), "delete pods": 50}}
	}
	return r
}

// checkGolden compares got with testdata/name, or rewrites it.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("report differs from %s (go test -run Golden -update-golden, then read the diff):\n%s", path, got)
	}
}

// The two-system report (no peers) stays as it was before Kruise joined
// the bench, byte for byte: testdata/report-2.md was written by the code
// before the change.
func TestReportGoldenTwoSystems(t *testing.T) {
	c := config{out: t.TempDir(), nodes: 1000, rounds: 2, rev: "v0-test", qps: 50, burst: 100, join: 50, joinWaves: 6,
		kcmControllers: "daemonset-controller", kwokPodWorkers: 32, kwokNodeWorkers: 32}
	runs := []*runResult{
		fixtureRun(upstream.name, 1, 1), fixtureRun(everynode.name, 1, 0.5),
		fixtureRun(upstream.name, 2, 1.2), fixtureRun(everynode.name, 2, 0.6),
	}
	sched := []*schedResult{{scheduler: noExtenderName, pods: 1000, podsPerSec: 200, sliP99Milli: 30}, {scheduler: "default-scheduler", pods: 1000, podsPerSec: 180, sliP99Milli: 35}}
	md, _, err := writeReport(c, runs, sched, time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "report-2.md", string(b))
}

// The in-place report without Kruise's variant stays as it was.
func TestInPlaceReportGoldenTwoSystems(t *testing.T) {
	c := config{out: t.TempDir(), nodes: 1000, rounds: 1, rev: "v0-test", qps: 50, burst: 100, kwokStartDelay: true}
	runs := []*inPlaceResult{
		{variant: inPlaceVariants[0].name, round: 1, update: 40, total: 2100, podsMade: 1000, requests: map[string]int{"create pods": 1000, "delete pods": 1000}},
		{variant: inPlaceVariants[1].name, round: 1, update: 30, total: 3010, requests: map[string]int{"patch pods": 1000, "patch pods/status": 2000}},
		{variant: inPlaceVariants[2].name, round: 1, update: 25, total: 1005, requests: map[string]int{"patch pods": 1000}},
	}
	md, err := writeInPlaceReport(c, runs, time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "inplace-2.md", string(b))
}

// With Kruise, the report has a column per system and everynode's ratio
// to the best of the other two: upstream's figures are the fixture's
// doubled, Kruise's at 0.4 of upstream's, so Kruise is the best peer on
// every lower-is-better figure and everynode (half of upstream's) misses
// its targets against it, which the bold must show.
func TestReportGoldenThreeSystems(t *testing.T) {
	c := config{out: t.TempDir(), nodes: 1000, rounds: 2, rev: "v0-test", qps: 50, burst: 100, join: 50, joinWaves: 6,
		kcmControllers: "daemonset-controller", kwokPodWorkers: 32, kwokNodeWorkers: 32, peers: "kruise"}
	runs := []*runResult{
		fixtureRun(upstream.name, 1, 1), fixtureRun(everynode.name, 1, 0.5), fixtureRun(kruise.name, 1, 0.4),
		fixtureRun(upstream.name, 2, 1.2), fixtureRun(everynode.name, 2, 0.6), fixtureRun(kruise.name, 2, 0.48),
	}
	md, _, err := writeReport(c, runs, nil, time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "report-3.md", string(b))
}

// The in-place report with Kruise's variant gains a column: each of
// everynode's in-place variants over Kruise's in-place update.
func TestInPlaceReportGoldenThreeSystems(t *testing.T) {
	c := config{out: t.TempDir(), nodes: 1000, rounds: 1, rev: "v0-test", qps: 50, burst: 100, kwokStartDelay: true, peers: "kruise"}
	name := func(key string) string {
		for _, v := range inPlaceVariants {
			if v.key == key {
				return v.name
			}
		}
		t.Fatalf("no variant %s", key)
		return ""
	}
	runs := []*inPlaceResult{
		{variant: name("upstream"), round: 1, update: 40, total: 2100, podsMade: 1000, requests: map[string]int{"create pods": 1000, "delete pods": 1000}},
		{variant: name("gate"), round: 1, update: 30, total: 3010, requests: map[string]int{"patch pods": 1000, "patch pods/status": 2000}},
		{variant: name("nogate"), round: 1, update: 25, total: 1005, requests: map[string]int{"patch pods": 1000}},
		{variant: name("ifserved"), round: 1, update: 26, total: 1006, requests: map[string]int{"patch pods": 1000}},
		{variant: name("served"), round: 1, update: 27, total: 1206, requests: map[string]int{"patch pods": 1000, "patch pods/status": 200}},
		{variant: name("kruise"), round: 1, update: 32, total: 3050, requests: map[string]int{"patch pods": 1000, "update pods/status": 2000}},
	}
	md, err := writeInPlaceReport(c, runs, time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "inplace-3.md", string(b))
}

// Every row of every table in the reports has as many cells as its
// header: a cell too few or too many shifts the figures after it under
// the wrong system.
func TestGoldenTablesAreRectangular(t *testing.T) {
	for _, name := range []string{"report-2.md", "report-3.md", "inplace-2.md", "inplace-3.md", "partition-1.md", "partition-2.md"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		header := -1
		for i, line := range strings.Split(string(b), "\n") {
			switch {
			case !strings.HasPrefix(line, "|"):
				header = -1
			case header < 0:
				header = strings.Count(line, "|")
			case strings.Count(line, "|") != header:
				t.Errorf("%s:%d has %d cell borders, its header %d: %s", name, i+1, strings.Count(line, "|"), header, line)
			}
		}
	}
}

// The best of the other systems is the lowest median, the highest for a
// rate, and a system that measured nothing (NaN) is left out.
func TestBestMedian(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		medians      []float64
		higherBetter bool
		want         float64
	}{
		{[]float64{3, 2}, false, 2},
		{[]float64{3, 2}, true, 3},
		{[]float64{nan, 2}, false, 2},
		{[]float64{nan, nan}, false, nan},
	} {
		got := bestMedian(tc.medians, tc.higherBetter)
		if got != tc.want && !(math.IsNaN(got) && math.IsNaN(tc.want)) {
			t.Errorf("bestMedian(%v, %t) = %v, want %v", tc.medians, tc.higherBetter, got, tc.want)
		}
	}
	if !(figure{unit: "pods/s"}).higherBetter() || (figure{unit: "s"}).higherBetter() {
		t.Error("only rates are higher-is-better")
	}
}
