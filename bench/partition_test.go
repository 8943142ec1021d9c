package main

import (
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// The partition is the same count of nodes for everynode and Kruise
// (Kruise takes no percentage), and each system's strategy decodes as its
// API type with no field unknown; upstream, with no partition, is left
// out.
func TestPartitionStrategy(t *testing.T) {
	for _, s := range []system{everynode, kruise} {
		if p := jsonCopyPanic(partitionStrategy(s, 500)); p != nil {
			t.Fatalf("%s's strategy is no unstructured value: %v", s.name, p)
		}
	}
	conv := runtime.DefaultUnstructuredConverter
	var e everynodev1alpha1.DaemonSetUpdateStrategy
	if err := conv.FromUnstructuredWithValidation(partitionStrategy(everynode, 500), &e, true); err != nil {
		t.Fatalf("as everynode's: %v", err)
	}
	if r := e.RollingUpdate; r == nil || r.Partition == nil || *r.Partition != intstr.FromInt32(500) || r.MaxUnavailable.String() != "10%" {
		t.Errorf("everynode's strategy %+v, want partition 500, maxUnavailable 10%%", r)
	}
	var k kruiseUpdateStrategy
	if err := conv.FromUnstructuredWithValidation(partitionStrategy(kruise, 500), &k, true); err != nil {
		t.Fatalf("as Kruise's: %v", err)
	}
	if r := k.RollingUpdate; r == nil || r.Partition == nil || *r.Partition != 500 || r.Type != "Standard" || r.MaxUnavailable.String() != "10%" {
		t.Errorf("Kruise's strategy %+v, want Standard, partition 500, maxUnavailable 10%%", r)
	}
	got := partitionSystems([]system{upstream, everynode, kruise})
	if len(got) != 2 || got[0] != everynode || got[1] != kruise {
		t.Errorf("partition systems %v, want everynode and kruise", got)
	}
}

// The partition report: one column per system, and everynode's ratio to
// the best of the others only when there are others.
func TestPartitionReportGolden(t *testing.T) {
	c := config{out: t.TempDir(), nodes: 1000, rounds: 1, rev: "v0-test", qps: 50, burst: 100, peers: "kruise"}
	run := func(s system, partial, resume float64, reqs int, past int) *partitionResult {
		return &partitionResult{system: s.name, round: 1, kept: 500, updated: 500, partial: partial, resume: resume, past: past,
			partialTotal: reqs, resumeTotal: reqs, partialReqs: map[string]int{"create pods": 500}, resumeReqs: map[string]int{"delete pods": 500}}
	}
	for name, tc := range map[string]struct {
		systems []system
		runs    []*partitionResult
	}{
		"partition-1.md": {[]system{upstream, everynode}, []*partitionResult{run(everynode, 10, 11, 1000, 0)}},
		"partition-2.md": {[]system{upstream, everynode, kruise}, []*partitionResult{run(everynode, 10, 11, 1000, 0), run(kruise, 12, 12, 1200, 1)}},
	} {
		t.Run(name, func(t *testing.T) {
			md, err := writePartitionReport(c, tc.runs, time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC), tc.systems)
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(md)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, name, string(b))
		})
	}
}
