package main

import (
	"fmt"
	"slices"
	"testing"
)

func TestServedNodes(t *testing.T) {
	var names []string
	for i := 24; i >= 0; i-- { // not in order: the choice must not depend on the list's
		names = append(names, fmt.Sprintf("kwok-node-%02d", i))
	}
	got := servedNodes(names)
	want := []string{"kwok-node-00", "kwok-node-10", "kwok-node-20"}
	if !slices.Equal(got, want) {
		t.Errorf("servedNodes = %v, want %v", got, want)
	}
}
