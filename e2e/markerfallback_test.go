package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"

	"everynode.io/e2e/cluster"
)

// An upgrade that keeps the old kube-scheduler configuration (issue 54):
// kube-scheduler calls the extender for every pod and does not ignore the
// daemon-pod marker, so the first daemon pods stay Pending with
// "Insufficient everynode.io/daemon". everynode sees it, stops marking
// daemon pods (one StoppedMarkingDaemonPods event, the metrics, the
// DaemonResourceFallback condition), deletes the stuck pods (an
// UnschedulableMarkedPod event each) and makes them again without the
// marker, and the set converges. The scheduler is restored and everynode
// restarted afterwards, so later scenarios have the marker on again.
func TestDaemonResourceFallback(t *testing.T) {
	before, err := scrape(t)
	step(t, err)
	if before.sum("everynode_daemon_resource_marker", nil) != 1 {
		// An earlier scenario left everynode without the marker: a new
		// process starts with it on.
		step(t, harness.StartEverynode(bg))
	}
	step(t, harness.RestartScheduler(bg, cluster.WithExtenderForEveryPod))
	t.Cleanup(func() {
		step(t, harness.RestartScheduler(bg, cluster.WithExtender))
		step(t, harness.StartEverynode(bg))
		m, err := scrape(t)
		step(t, err)
		if m.sum("everynode_daemon_resource_marker", nil) != 1 || m.sum("everynode_daemon_resource_fallback", nil) != 0 {
			t.Errorf("after the restart: everynode_daemon_resource_marker %v, everynode_daemon_resource_fallback %v; want 1, 0",
				m.sum("everynode_daemon_resource_marker", nil), m.sum("everynode_daemon_resource_fallback", nil))
		}
	})

	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "fallback-" + randSuffix()}
	nodes := createNodes(t, "fallback", 2, sel)
	created := time.Now()
	createSet(t, simpleSet(ns, "agent", sel))

	marker := corev1.ResourceName(everynodev1alpha1.DefaultDaemonResource)
	eventually(t, settle, "a pod without the marker running on each node", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, func(p *corev1.Pod) string {
			if _, ok := p.Spec.Containers[0].Resources.Limits[marker]; ok {
				return "pod " + p.Name + " still requests the marker"
			}
			return ""
		})
	})
	converged := time.Since(created)

	// The fallback is the process's, not the set's: the first stuck pod
	// of any set turns it, and a set another scenario left (in
	// kube-system, on every node) may be first on the new nodes. So the
	// events are counted cluster-wide, since this scenario began.
	events := func(reason string) []corev1.Event {
		t.Helper()
		list, err := kube.CoreV1().Events("").List(ctx(t), metav1.ListOptions{FieldSelector: "reason=" + reason})
		step(t, err)
		var out []corev1.Event
		for _, e := range list.Items {
			if !e.LastTimestamp.Time.Before(created.Add(-2 * time.Second)) {
				out = append(out, e)
			}
		}
		return out
	}
	var stuck []corev1.Event
	eventually(t, settle, "the events of the fallback", func() (bool, string, error) {
		stuck = events("UnschedulableMarkedPod")
		return len(stuck) > 0 && len(events("StoppedMarkingDaemonPods")) > 0,
			fmt.Sprintf("%d UnschedulableMarkedPod", len(stuck)), nil
	})
	fallback := events("StoppedMarkingDaemonPods")
	if len(fallback) != 1 || fallback[0].Type != corev1.EventTypeWarning || fallback[0].Count > 1 {
		t.Errorf("StoppedMarkingDaemonPods events %+v, want one Warning", fallback)
	}
	for _, want := range []string{"does not ignore", everynodev1alpha1.DefaultDaemonResource, "everynode scheduler-config", `scheduler.daemonResource=""`, "ordinary pods again wait"} {
		if len(fallback) > 0 && !strings.Contains(fallback[0].Message, want) {
			t.Errorf("the fallback event does not say %q: %s", want, fallback[0].Message)
		}
	}
	// Only the pods made before the fallback were stuck: of this set, one a
	// node at most.
	ours := 0
	for _, e := range stuck {
		if e.InvolvedObject.Namespace == ns && e.InvolvedObject.Name == "agent" {
			ours++
		}
	}
	if ours > len(nodes) {
		t.Errorf("%d UnschedulableMarkedPod events of the set for %d nodes: pods made after the fallback carried the marker", ours, len(nodes))
	}
	for _, e := range stuck {
		if !strings.Contains(e.Message, "Insufficient") && !strings.Contains(e.Message, "for want of "+everynodev1alpha1.DefaultDaemonResource) {
			t.Errorf("UnschedulableMarkedPod without its reason: %s", e.Message)
		}
	}

	m, err := scrape(t)
	step(t, err)
	if m.sum("everynode_daemon_resource_marker", nil) != 0 || m.sum("everynode_daemon_resource_fallback", nil) != 1 {
		t.Errorf("everynode_daemon_resource_marker %v, everynode_daemon_resource_fallback %v; want 0, 1",
			m.sum("everynode_daemon_resource_marker", nil), m.sum("everynode_daemon_resource_fallback", nil))
	}
	eventually(t, settle, "the set to converge with DaemonResourceFallback", func() (bool, string, error) {
		ds := getSet(t, ns, "agent")
		c := meta.FindStatusCondition(ds.Status.Conditions, everynodev1alpha1.ConditionDaemonResourceFallback)
		avail := meta.FindStatusCondition(ds.Status.Conditions, everynodev1alpha1.ConditionAvailable)
		ok := c != nil && c.Status == metav1.ConditionTrue && avail != nil && avail.Status == metav1.ConditionTrue &&
			ds.Status.NumberAvailable == int32(len(nodes))
		return ok, fmt.Sprintf("fallback %+v, available %+v", c, avail), nil
	})
	if len(fallback) > 0 {
		t.Logf("%d stuck pods replaced, every node running a pod without the marker %.1fs after the set was created (polled every 0.5 s); fallback event: %s",
			len(stuck), converged.Seconds(), fallback[0].Message)
	}
}
