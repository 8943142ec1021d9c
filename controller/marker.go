package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"everynode.io/everynode/controller/plan"
	"everynode.io/everynode/placement"
)

// fallBackFromMarker turns the daemon-pod marker off when v shows a pod
// that kube-scheduler left Pending for want of it: the scheduler's
// configuration does not ignore the marker (an upgrade of everynode that
// kept the old configuration, or a scheduler without the extender), and
// with the marker on no new daemon pod of any set would ever schedule.
// Losing the protection it gave ordinary pods against a hung everynode is
// the lesser harm, and is said where it will be read: one Warning event on
// the set, a log line, the DaemonResourceFallback condition on every set
// and the metric everynode_daemon_resource_marker. The stuck pods are
// deleted by the manage step (plan.PlanNode), this sync's if it acts, and
// made again without the marker.
//
// It is once per process (placement.TurnOffDaemonResource), so of the
// syncs that see stuck pods at once only one reports it; every set is then
// synced again, so that each gets the condition and loses
// NodeReadinessGateInactive, which assumed the marker.
func (c *Controller) fallBackFromMarker(ctx context.Context, v *plan.View) {
	if placement.DaemonResource() == "" {
		return
	}
	pod, n := v.StuckForMarker()
	if pod == nil || !placement.TurnOffDaemonResource() {
		return
	}
	ds := v.DS
	msg := plan.DaemonResourceFallbackMessage(placement.ConfiguredDaemonResource())
	klog.FromContext(ctx).Info("kube-scheduler does not ignore the daemon-pod marker: no longer marking daemon pods",
		"daemonset", klog.KObj(ds), "pod", klog.KObj(pod), "stuck", n, "resource", placement.ConfiguredDaemonResource(), "fix", msg)
	seen := fmt.Sprintf("daemon pod %s/%s", pod.Namespace, pod.Name)
	if n > 1 {
		seen += fmt.Sprintf(" and %d more of this set", n-1)
	}
	c.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonStoppedMarkingDaemonPods, "Seen on %s: %s", seen, msg)
	sets, err := c.sets.list(metav1.NamespaceAll)
	if err != nil {
		// A cache list does not fail; the sets get the condition on their
		// next sync all the same.
		klog.FromContext(ctx).Error(err, "List DaemonSets to report the marker's fallback")
		return
	}
	for _, s := range sets {
		c.enqueue(s)
	}
}
