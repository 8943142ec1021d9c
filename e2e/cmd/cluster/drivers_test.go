package main

import "testing"

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
