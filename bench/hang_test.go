package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// The hang report has one row per variant that ran, the medians over the
// rounds, and the ratio to the no-extender yardstick.
func TestWriteHangReport(t *testing.T) {
	c := config{out: t.TempDir(), nodes: 3, rounds: 2, rev: "test"}
	var runs []*hangResult
	for r := 1; r <= 2; r++ {
		runs = append(runs,
			&hangResult{variant: "no extender", round: r, pods: 50, seconds: 2, attempts: 50, attemptMeanMilli: 1.5},
			&hangResult{variant: "extender, everynode hung", round: r, pods: 50, seconds: 2.2, attempts: 50, attemptMeanMilli: 1.6},
			&hangResult{variant: "extender for every pod, everynode hung", round: r, pods: 50, seconds: 50 + float64(r), attempts: 50, attemptMeanMilli: 1000},
		)
	}
	path, err := writeHangReport(c, runs, time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{
		"| no extender | 50 | 2.00 (2.00–2.00) | 1.00 | 40.0 (40.0–40.0) | 50.0 (50.0–50.0) | 1.50 (1.50–1.50) |",
		"| extender, everynode hung | 50 | 2.20 (2.20–2.20) | 1.10 |",
		"| extender for every pod, everynode hung | 50 | 51.5 (51.0–52.0) | 25.75 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| extender, everynode up |") {
		t.Errorf("a variant that did not run has a row:\n%s", md)
	}
	if !strings.HasSuffix(path, "3-nodes-hang.md") {
		t.Errorf("path %s", path)
	}
}

// Every round runs each variant once, the first one rotating.
func TestHangVariantsRotate(t *testing.T) {
	seen := map[string]bool{}
	for round := 1; round <= len(hangVariants); round++ {
		first := hangVariants[(round-1)%len(hangVariants)].name
		if seen[first] {
			t.Errorf("round %d starts with %q again", round, first)
		}
		seen[first] = true
	}
}
