package main

import (
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// testdata/audit.log is a kept cluster's log made up for the tools: two
// join waves (upstream's at 12:00:10, everynode's at 12:00:40, as
// testdata/bench.log says) with pods left out of the trace for each
// reason, a torn line, and an in-place update from 12:01:00. The expected
// output is what bench/hack/join-trace.py, which join-trace replaces,
// printed for these two files.
func TestJoinTraceCmd(t *testing.T) {
	const want = `upstream 5 pods
  binding latency                            p50   30.0 ms  p90   45.0  mean   30.8
  kwok reaction (bound -> patch received)    p50   75.0 ms  p90  120.0  mean   77.2
  kwok patch latency                         p50   18.0 ms  p90   31.0  mean   19.0
  controller pod create latency              p50   31.0 ms  p90   52.0  mean   37.3  (5)
everynode 4 pods
  binding latency                            p50   27.0 ms  p90   40.0  mean   26.8
  kwok reaction (bound -> patch received)    p50   50.0 ms  p90  101.0  mean   56.2
  kwok patch latency                         p50   14.0 ms  p90   22.0  mean   14.5
  controller pod create latency              p50   61.0 ms  p90   72.5  mean   60.1  (4)
kwok reaction by the binding's offset from the wave start, to the second (p50 ms, n)
upstream 0.00s:40(1) 0.25s:61(1) 0.50s:90(1) 1.25s:120(1) 3.00s:75(1)
everynode 0.00s:50(2) 0.75s:44(1) 2.00s:101(1)
`
	var out strings.Builder
	if err := joinTraceCmd([]string{filepath.Join("testdata", "audit.log"), filepath.Join("testdata", "bench.log")}, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	for name, args := range map[string][]string{
		"no arguments":   nil,
		"no bench log":   {"testdata/audit.log"},
		"one too many":   {"testdata/audit.log", "testdata/bench.log", "x"},
		"bench log none": {"testdata/audit.log", "testdata/audit.log"},
	} {
		t.Run(name, func(t *testing.T) {
			err := joinTraceCmd(args, &strings.Builder{})
			if err == nil {
				t.Fatal("no error")
			}
			if usage := len(args) != 2; usage != errors.Is(err, errUsage) {
				t.Errorf("error %v; a usage error: %v", err, usage)
			}
		})
	}
}

func TestReadWaveStarts(t *testing.T) {
	log := `12:00:02 [A upstream r1] rollout on 1000 nodes
12:00:10 [A upstream r1] 50 nodes join (wave 1 of 6)
09:05:59 [B everynode r12] 500 nodes join (wave 6 of 6)
12:00:11 [scheduler no-extender] 50 nodes join (wave 1 of 6)
 12:00:12 [A upstream r1] 50 nodes join (wave 2 of 6)
`
	got, err := readWaveStarts(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	want := []waveStart{
		{clock: 12*time.Hour + 10*time.Second, system: "upstream"},
		{clock: 9*time.Hour + 5*time.Minute + 59*time.Second, system: "everynode"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("starts %+v, want %+v", got, want)
	}
}

// A pod is in a join when it was bound within 5 s of its wave's start and
// kwok's first status patch of it came after the binding was stored.
func TestJoinTraceKeeps(t *testing.T) {
	day := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	waves := []waveStart{{clock: 12 * time.Hour, system: "upstream"}}
	at := func(ms int) time.Time { return day.Add(12*time.Hour + time.Duration(ms)*time.Millisecond) }
	ev := func(verb, ua, ns, name, sub string, received, done int) auditEvent {
		return auditEvent{Verb: verb, UserAgent: ua, RequestReceivedTimestamp: at(received), StageTimestamp: at(done),
			ObjectRef: &auditObjectRef{Resource: "pods", Subresource: sub, Namespace: ns, Name: name}}
	}
	const kwok, sched = "kwok-controller/v0.8.0", "kube-scheduler/v1.35.0"
	bind := func(name string, received, done int) auditEvent {
		return ev("create", sched, "bench", name, "binding", received, done)
	}
	patch := func(name string, received, done int) auditEvent {
		return ev("patch", kwok, "bench", name, "status", received, done)
	}
	tests := map[string]struct {
		events []auditEvent
		want   []joinedPod
	}{
		"bound and patched in the wave": {
			events: []auditEvent{bind("a", 300, 320), patch("a", 400, 410)},
			want:   []joinedPod{{name: "a", offset: 300, binding: 20, reaction: 80, patched: 10}},
		},
		"the first patch counts": {
			events: []auditEvent{bind("a", 300, 320), patch("a", 400, 410), patch("a", 900, 950)},
			want:   []joinedPod{{name: "a", offset: 300, binding: 20, reaction: 80, patched: 10}},
		},
		"the last binding counts": {
			events: []auditEvent{bind("a", 100, 120), bind("a", 300, 320), patch("a", 400, 410)},
			want:   []joinedPod{{name: "a", offset: 300, binding: 20, reaction: 80, patched: 10}},
		},
		"at the window's end": {
			events: []auditEvent{bind("a", 5000, 5020), patch("a", 5100, 5110)},
			want:   []joinedPod{{name: "a", offset: 5000, binding: 20, reaction: 80, patched: 10}},
		},
		"bound after the window":   {events: []auditEvent{bind("a", 5001, 5020), patch("a", 5100, 5110)}},
		"bound before the wave":    {events: []auditEvent{bind("a", -1, 20), patch("a", 100, 110)}},
		"never patched":            {events: []auditEvent{bind("a", 300, 320)}},
		"patched before stored":    {events: []auditEvent{bind("a", 300, 320), patch("a", 319, 330)}},
		"patched by another":       {events: []auditEvent{bind("a", 300, 320), ev("patch", "everynode/v0", "bench", "a", "status", 400, 410)}},
		"in another namespace":     {events: []auditEvent{ev("create", sched, "other", "a", "binding", 300, 320), ev("patch", kwok, "other", "a", "status", 400, 410)}},
		"an update, not the patch": {events: []auditEvent{bind("a", 300, 320), ev("update", kwok, "bench", "a", "status", 400, 410)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			j := newJoinPods()
			for _, e := range tc.events {
				j.add(e)
			}
			if got := j.trace(waves).pods["upstream"]; !closePods(got, tc.want) {
				t.Errorf("pods %+v, want %+v", got, tc.want)
			}
		})
	}
}

// closePods compares pods to the microsecond: their figures are float
// milliseconds.
func closePods(a, b []joinedPod) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-3 }
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].name != b[i].name || !near(a[i].offset, b[i].offset) || !near(a[i].binding, b[i].binding) ||
			!near(a[i].reaction, b[i].reaction) || !near(a[i].patched, b[i].patched) {
			return false
		}
	}
	return true
}
