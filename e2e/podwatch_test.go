package e2e

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// watchPods lists ns's pods, hands the list to begin (if not nil), then
// hands see every pod event from that list's resourceVersion on, in order,
// on one goroutine: a watch misses nothing between two polls (a pod created
// and deleted at once, a status that held for a moment). stop ends the
// watch and returns once see has had its last event, so what begin and see
// kept may then be read without a lock. stop is safe to call twice
// (t.Cleanup calls it too).
func watchPods(t *testing.T, ns string, begin func([]corev1.Pod), see func(watch.EventType, *corev1.Pod)) (stop func()) {
	t.Helper()
	list, err := kube.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := kube.CoreV1().Pods(ns).Watch(ctx(t), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	if begin != nil {
		begin(list.Items)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				see(ev.Type, p)
			}
		}
	}()
	stop = func() {
		w.Stop()
		<-done
	}
	t.Cleanup(stop)
	return stop
}
