package main

import (
	"reflect"
	"testing"
)

// The counter is read at seven bounds; the join runs from the maxSurge
// update's end, while the settling before each update belongs to no phase.
func TestPhaseDeltas(t *testing.T) {
	at := [7]map[string]float64{
		{"pods": 1, "nodes": 2},              // rollout starts
		{"pods": 3, "nodes": 2},              // rollout ends
		{"pods": 5, "nodes": 2},              // maxUnavailable starts (2 closed while settling)
		{"pods": 5, "nodes": 2},              // maxUnavailable ends
		{"pods": 5, "nodes": 2, "events": 1}, // maxSurge starts
		nil,                                  // maxSurge ends: the scrape failed
		{"pods": 9, "nodes": 3, "events": 1}, // join ends
	}
	got := phaseDeltas(at)
	want := [4]map[string]float64{{"pods": 2}, {}, nil, nil}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("phaseDeltas = %v, want %v", got, want)
	}
	if s := fmtCount(got[1], "pods") + fmtCount(got[2], "pods"); s != "0–" {
		t.Errorf("fmtCount of an empty phase and an unread one = %q, want %q", s, "0–")
	}
}
