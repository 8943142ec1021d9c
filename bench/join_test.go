package main

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func TestJoinStages(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	nodes := map[string]nodeTimes{
		"a": {created: at(0), ready: at(60), untainted: at(100)},
		"b": {created: at(0), ready: at(150), untainted: at(200)},
		"c": {created: at(0), ready: at(20), untainted: at(50)}, // no pod yet: left out
	}
	pods := map[string]podTimes{
		"a": {seen: at(400), bound: at(500), available: at(900)},
		"b": {seen: at(1200), bound: at(1300), available: at(1400)},
	}
	got := joinStages(nodes, pods)
	want := map[string][len(joinStageNames)]float64{
		"a": {0.06, 0.04, 0.3, 0.1, 0.4},
		"b": {0.15, 0.05, 1.0, 0.1, 0.1},
	}
	for i := range joinStageNames {
		if len(got[i]) != 2 {
			t.Fatalf("stage %d: %d values, want 2", i, len(got[i]))
		}
		for _, x := range got[i] {
			if !near(x, want["a"][i]) && !near(x, want["b"][i]) {
				t.Errorf("stage %d: unexpected %v", i, x)
			}
		}
	}
	slow, ok := slowestJoin(nodes, pods)
	if !ok || !strings.HasPrefix(slow, "b 1.40s: node created → node Ready 0.15s, node Ready → taint lifted 0.05s, taint lifted → pod seen 1.00s") {
		t.Errorf("slowestJoin = %q, %v", slow, ok)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestReadyWaiter(t *testing.T) {
	fw := watch.NewFake()
	r := newReadyWaiter([]string{"a", "b", "c"})
	go r.run(fw.ResultChan())
	node := func(name string, ready corev1.ConditionStatus) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if ready != "" {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
		}
		return n
	}
	fw.Add(node("a", ""))                      // created without a condition
	fw.Modify(node("a", corev1.ConditionTrue)) // kwok took it on
	fw.Modify(node("b", corev1.ConditionFalse))
	fw.Modify(node("other", corev1.ConditionTrue)) // not a joining node

	if _, err := r.wait(context.Background(), "a", 5*time.Second); err != nil {
		t.Fatalf("a: %v", err)
	}
	if _, err := r.wait(context.Background(), "other", time.Second); err == nil {
		t.Error("wait for a node that is not joining: no error")
	}
	if _, err := r.wait(context.Background(), "b", 10*time.Millisecond); err == nil || !strings.Contains(err.Error(), "not Ready") {
		t.Errorf("b (NotReady) = %v, want a timeout", err)
	}
	fw.Stop()
	if _, err := r.wait(context.Background(), "c", 5*time.Second); err == nil || !strings.Contains(err.Error(), "watch") {
		t.Errorf("c after the watch ended = %v, want an error naming the watch", err)
	}
	if _, err := r.wait(context.Background(), "a", 5*time.Second); err != nil {
		t.Errorf("a after the watch ended: %v (it was Ready before)", err)
	}
}
