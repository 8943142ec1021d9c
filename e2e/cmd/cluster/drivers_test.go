package main

import (
	"slices"
	"testing"
	"time"

	"everynode.io/e2e/soak"
)

// The drivers read their settings from the environment as the scripts
// they replace did.
func TestEnv(t *testing.T) {
	tests := map[string]struct {
		value    string
		n        int
		badCount bool
		on       bool
	}{
		"unset":    {value: "", n: 7, on: false},
		"one":      {value: "1", n: 1, on: true},
		"zero":     {value: "0", n: 0, on: false},
		"three":    {value: "3", n: 3, on: true},
		"negative": {value: "-1", badCount: true, on: true},
		"word":     {value: "yes", badCount: true, on: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv("X", tc.value)
			n, err := envInt("X", 7)
			if (err != nil) != tc.badCount || (err == nil && n != tc.n) {
				t.Errorf("envInt = %d, %v; want %d (error %t)", n, err, tc.n, tc.badCount)
			}
			if got := envOn("X"); got != tc.on {
				t.Errorf("envOn = %t, want %t", got, tc.on)
			}
		})
	}
	for n, ok := range map[int]bool{1: false, 2: true, 5: true, 6: false} {
		if err := conformanceNodes(n); (err == nil) != ok {
			t.Errorf("conformanceNodes(%d) = %v", n, err)
		}
	}
}

// The soak's settings: a replay takes SEED, DURATION and NODES; the
// smoke run is fixed whatever they say.
func TestSoakOptions(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	t.Setenv("SOAK_SMOKE", "")
	t.Setenv("SOAK_OUT", "")
	t.Setenv("SEED", "")
	t.Setenv("DURATION", "")
	t.Setenv("NODES", "")
	o, err := soakOptions("/repo", now)
	if err != nil || o.Seed != soak.NewSeed(now) || o.Duration != time.Hour || o.Nodes != 500 || o.Out != "/repo/e2e/soak/results" || o.Smoke {
		t.Errorf("defaults: %+v, %v", o, err)
	}
	t.Setenv("SEED", "1234")
	t.Setenv("DURATION", "90m")
	t.Setenv("NODES", "50")
	if o, err := soakOptions("/repo", now); err != nil || o.Seed != 1234 || o.Duration != 90*time.Minute || o.Nodes != 50 {
		t.Errorf("replay: %+v, %v", o, err)
	}
	t.Setenv("SOAK_SMOKE", "1")
	t.Setenv("NODES", "")
	if o, err := soakOptions("/repo", now); err != nil || !o.Smoke || o.Seed != soak.SmokeSeed || o.Duration != soak.SmokeDuration || o.Nodes != 20 || o.Out != "" {
		t.Errorf("smoke: %+v, %v", o, err)
	}
	t.Setenv("SOAK_SMOKE", "")
	for env, v := range map[string]string{"SEED": "x", "DURATION": "10s", "NODES": "2"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, v)
			if _, err := soakOptions("/repo", now); err == nil {
				t.Errorf("%s=%s accepted", env, v)
			}
		})
	}
}

// PEERS names the bench's peers: empty is none (the two-system bench),
// kruise is the one known, and anything else is refused before a
// cluster is made.
func TestBenchPeers(t *testing.T) {
	tests := map[string]struct {
		env     string
		want    []string
		wantErr bool
	}{
		"unset":    {env: "", want: nil},
		"kruise":   {env: "kruise", want: []string{"kruise"}},
		"twice":    {env: "kruise, kruise", want: []string{"kruise"}},
		"trailing": {env: "kruise,", want: []string{"kruise"}},
		"unknown":  {env: "kruise,eds", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := benchPeers(tc.env)
			if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
				t.Errorf("benchPeers(%q) = %v, %v; want %v (error %t)", tc.env, got, err, tc.want, tc.wantErr)
			}
		})
	}
}
