package main

import (
	"fmt"
	"reflect"
	"testing"
)

func TestUnreachableNodesSpreadByName(t *testing.T) {
	var names []string
	for i := 99; i >= 0; i-- {
		names = append(names, fmt.Sprintf("node-%03d", i))
	}
	if got, want := unreachableNodes(names, 0.02), []string{"node-025", "node-075"}; !reflect.DeepEqual(got, want) {
		t.Errorf("2%% of 100: %v, want %v", got, want)
	}
	if got := unreachableNodes(names[:10], 0.02); len(got) != 1 {
		t.Errorf("2%% of 10: %v, want one node", got)
	}
	if got := len(unreachableNodes(make5000(), 0.02)); got != 100 {
		t.Errorf("2%% of 5,000: %d nodes, want 100", got)
	}
}

func make5000() []string {
	out := make([]string, 5000)
	for i := range out {
		out[i] = fmt.Sprintf("node-%06d", i)
	}
	return out
}
