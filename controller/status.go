package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/controller/pacing"
	"everynode.io/everynode/controller/plan"
	"everynode.io/everynode/placement"
)

// updateStatus computes the status and writes it through the status
// subresource if it changed: at once when the change is one a reader waits
// for, otherwise when the pacer allows (the sync is requeued for the
// rest). A conflict is not retried here with a fresh GET, as
// upstream does: the cache soon holds the newer set, and the requeued sync
// writes over it.
func (c *Controller) updateStatus(ctx context.Context, v *plan.View) error {
	ds := v.DS
	report := plan.ComputeStatus(v)
	status := report.Status
	warnSkipped := plan.SetWebhooksSkipped(&status, ds, c.webhookSkipped[ds.Namespace], metav1.NewTime(v.Now))
	warnGate := plan.SetReadinessGateInactive(&status, ds, placement.ReadinessGateMode(), metav1.NewTime(v.Now))
	plan.SetDaemonResourceFallback(&status, placement.DaemonResourceFallback(), placement.ConfiguredDaemonResource(), metav1.NewTime(v.Now))
	warnOrder := plan.SetStartOrderBroken(&status, c.resolveStartOrder(ds).problem, metav1.NewTime(v.Now))
	// What this kind never stores must not count as a change.
	status = c.sets.project(status)
	if report.AtRest {
		// Whatever creates the set needs next (a node joining, a new
		// revision) starts a new wave, at one pod.
		c.state.startSlow(cache.MetaObjectToName(ds))
	}
	if !report.Recheck.IsZero() {
		// The extra second absorbs clock skew, as upstream's for a pod
		// turning available.
		c.enqueueAfter(ds, report.Recheck.Sub(v.Now)+time.Second)
	}
	if apiequality.Semantic.DeepEqual(ds.Status, status) {
		return nil
	}
	if !urgentStatusChange(&ds.Status, &status) {
		if wait := c.state.statusWriteDelay(ds, v.Now); wait > 0 {
			// Look again within the usual interval: the budget may have a
			// spare token by then.
			c.enqueueAfter(ds, min(wait, pacing.StatusWriteInterval))
			return nil
		}
	}
	toUpdate := ds.DeepCopy()
	toUpdate.Status = status
	written, err := c.sets.writeStatus(ctx, toUpdate)
	if apierrors.IsConflict(err) {
		c.state.conflicted(ds)
		return fmt.Errorf("update status of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, errStatusConflict)
	}
	if err != nil {
		return fmt.Errorf("update status of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	c.state.wrote(ds, written, v.Now)
	if warnSkipped != nil && meta.FindStatusCondition(ds.Status.Conditions, everynodev1alpha1.ConditionWebhooksSkipped) == nil {
		// Once, when the condition appears, not on every write.
		c.recorder.Event(ds, corev1.EventTypeWarning, warnSkipped.Reason, warnSkipped.Message)
	}
	if old := meta.FindStatusCondition(ds.Status.Conditions, everynodev1alpha1.ConditionStartOrderBroken); warnOrder != nil && (old == nil || old.Reason != warnOrder.Reason) {
		c.recorder.Event(ds, corev1.EventTypeWarning, warnOrder.Reason, warnOrder.Message)
	}
	if warnGate != nil && meta.FindStatusCondition(ds.Status.Conditions, everynodev1alpha1.ConditionNodeReadinessGateInactive) == nil {
		c.recorder.Event(ds, corev1.EventTypeWarning, warnGate.Reason, warnGate.Message)
	}
	if m := plan.MarkerNotIgnoredAppeared(&ds.Status, &status); m != nil && !placement.DaemonResourceFallback() {
		// After the fallback, StoppedMarkingDaemonPods said it, once.
		c.recorder.Event(ds, corev1.EventTypeWarning, m.Reason, m.Message)
	}
	klog.FromContext(ctx).V(4).Info("Updated DaemonSet status", "daemonset", klog.KObj(ds),
		"desired", status.DesiredNumberScheduled, "available", status.NumberAvailable, "updated", status.UpdatedNumberScheduled)
	return nil
}
