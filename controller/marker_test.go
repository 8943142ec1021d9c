package controller

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// A scheduler that does not ignore the marker: the sync that sees the
// first stuck pod turns the marker off (one Warning event, on that set),
// deletes the stuck pods (one Warning each), and the next syncs make them
// again without the marker. Every set gets DaemonResourceFallback, and a
// gated set loses NodeReadinessGateInactive, which assumed the marker.
func TestMarkerFallback(t *testing.T) {
	placement.SetDaemonResource(everynodev1alpha1.DefaultDaemonResource)
	t.Cleanup(func() { placement.SetDaemonResource("") })
	marker := corev1.ResourceName(everynodev1alpha1.DefaultDaemonResource)
	f := newFixture(t)
	addNodes(f, 2)
	ds := newSet("agent")
	other := newSet("gated")
	other.Spec.NodeReadinessGate = true
	f.add(ds, other)
	for _, s := range []*everynodev1alpha1.DaemonSet{ds, other} {
		f.mustSync(s)
		for _, p := range f.podCreates() {
			if _, ok := p.Spec.Containers[0].Resources.Requests[marker]; !ok {
				t.Fatalf("pod for %s made without the marker while it is on", p.Annotations[everynodev1alpha1.AnnotationTargetNode])
			}
		}
	}
	f.syncCaches()
	f.mustSync(other)
	f.syncCaches()
	if c := meta.FindStatusCondition(f.set(other).Status.Conditions, everynodev1alpha1.ConditionNodeReadinessGateInactive); c == nil {
		t.Fatal("the gated set lacks NodeReadinessGateInactive with the marker on")
	}
	f.events()

	// Only ds's pods are seen stuck; the other set's pods are fine.
	var stuck []string
	for _, name := range markStuck(t, f) {
		if strings.HasPrefix(name, ds.Name+"-") {
			stuck = append(stuck, name)
		} else {
			p, err := f.kube.CoreV1().Pods(ds.Namespace).Get(f.ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p.Status.Conditions = nil
			f.update(p)
		}
	}
	f.queue.drain()
	f.mustSync(ds)
	if placement.DaemonResource() != "" || !placement.DaemonResourceFallback() {
		t.Fatalf("marker %q after a stuck pod, want it off", placement.DaemonResource())
	}
	if got := f.podDeletes(); !reflect.DeepEqual(got, stuck) {
		t.Errorf("deleted %q, want the stuck pods %q", got, stuck)
	}
	if queued := f.queue.drain(); len(queued) < 2 {
		t.Errorf("queued %q after the fallback, want every set", queued)
	}
	var fallback, deleted, notIgnored int
	for _, e := range f.events() {
		switch {
		case strings.HasPrefix(e, "Warning "+ReasonStoppedMarkingDaemonPods):
			fallback++
			for _, want := range []string{"does not ignore", "everynode scheduler-config", `scheduler.daemonResource=""`, "ordinary pods again wait"} {
				if !strings.Contains(e, want) {
					t.Errorf("fallback event %q does not say %q", e, want)
				}
			}
		case strings.HasPrefix(e, "Warning "+ReasonUnschedulableMarkedPod):
			deleted++
		case strings.HasPrefix(e, "Warning "+everynodev1alpha1.ReasonDaemonResourceNotIgnored):
			notIgnored++
		}
	}
	if fallback != 1 || deleted != len(stuck) || notIgnored != 0 {
		t.Errorf("%d %s, %d %s, %d %s events; want 1, %d, 0", fallback, ReasonStoppedMarkingDaemonPods,
			deleted, ReasonUnschedulableMarkedPod, notIgnored, everynodev1alpha1.ReasonDaemonResourceNotIgnored, len(stuck))
	}

	f.syncCaches()
	f.mustSync(ds)
	created := f.podCreates()
	if len(created) != len(stuck) {
		t.Fatalf("created %d pods after the deletes, want %d", len(created), len(stuck))
	}
	for _, p := range created {
		if _, ok := p.Spec.Containers[0].Resources.Requests[marker]; ok {
			t.Errorf("pod for %s made again with the marker", p.Annotations[everynodev1alpha1.AnnotationTargetNode])
		}
	}
	f.syncCaches()
	f.mustSync(other)
	f.syncCaches()
	f.mustSync(ds)
	for _, s := range []*everynodev1alpha1.DaemonSet{ds, other} {
		conds := f.set(s).Status.Conditions
		c := meta.FindStatusCondition(conds, everynodev1alpha1.ConditionDaemonResourceFallback)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != everynodev1alpha1.ReasonDaemonResourceNotIgnored {
			t.Errorf("set %s: DaemonResourceFallback %+v, want True", s.Name, c)
		}
		if c := meta.FindStatusCondition(conds, everynodev1alpha1.ConditionNodeReadinessGateInactive); c != nil {
			t.Errorf("set %s keeps NodeReadinessGateInactive after the fallback: %s", s.Name, c.Message)
		}
	}
	if hasEvent(f.events(), "Warning "+ReasonStoppedMarkingDaemonPods) {
		t.Error("a second fallback event")
	}

	// A new process (SetDaemonResource) starts with the marker on and no
	// condition.
	placement.SetDaemonResource(everynodev1alpha1.DefaultDaemonResource)
	f.mustSync(ds)
	f.syncCaches()
	if c := meta.FindStatusCondition(f.set(ds).Status.Conditions, everynodev1alpha1.ConditionDaemonResourceFallback); c != nil {
		t.Errorf("DaemonResourceFallback stays with the marker on: %+v", c)
	}
}
