package controller

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement/revision"

	"everynode.io/everynode/controller/plan"
)

// reportStop says, once, that v's rollout stopped itself: a Warning event
// and the rollouts_stopped_total metric, on the sync that found it.
func (c *Controller) reportStop(ctx context.Context, v *plan.View) {
	vd := v.Verdict
	if vd == nil || !vd.Fresh || vd.Record == nil {
		return
	}
	rec := vd.Record
	rolloutsStopped.WithLabelValues(v.DS.Namespace, v.DS.Name, string(rec.Action)).Inc()
	what := "paused"
	if rec.Action == everynodev1alpha1.RolloutFailureRollback {
		what = "is rolling back"
	}
	c.recorder.Eventf(v.DS, corev1.EventTypeWarning, everynodev1alpha1.ReasonRolloutFailing, "Rollout %s: %s", what, rec.Message)
	klog.FromContext(ctx).Info("Rollout stopped itself", "daemonset", klog.KObj(v.DS), "action", rec.Action, "message", rec.Message)
}

// rollBack puts the template and node overrides of the revision v's
// verdict names back into the set, as `kubectl everynode rollout undo`
// does: the set then has an earlier template, and the syncs it starts roll
// that out (history reuses the revision). The failure is written to the
// status first, so the syncs of the rolled-back template find it and say
// why the set went back. A template changed meanwhile (a conflict) wins:
// the next sync judges again.
func (c *Controller) rollBack(ctx context.Context, v *plan.View) error {
	ds, to := v.DS, v.Verdict.RollbackTo
	var target *appsv1.ControllerRevision
	for _, r := range v.Old {
		if r.Labels[revision.HashLabel] == to.Hash {
			target = r
			break
		}
	}
	if target == nil {
		return fmt.Errorf("roll back DaemonSet %s/%s: revision %d (%s) is no longer in its history", ds.Namespace, ds.Name, to.Number, to.Hash)
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"rolloutFailure": v.Verdict.Record}})
	if err != nil {
		return err
	}
	if c.sets.everynode() == nil {
		// Unreachable: only rollingUpdate.onFailure rolls back, and apps/v1
		// has no such field.
		return fmt.Errorf("roll back DaemonSet %s/%s: not supported for its kind", ds.Namespace, ds.Name)
	}
	client := c.sets.everynode().EverynodeV1alpha1().DaemonSets(ds.Namespace)
	written, err := client.Patch(ctx, ds.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("record the failed rollout of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	if written.Generation != ds.Generation {
		// The user changed the set since this sync read it; that wins.
		return nil
	}
	back := written.DeepCopy()
	if err := revision.Apply(target.Data.Raw, back); err != nil {
		return fmt.Errorf("roll back DaemonSet %s/%s to revision %d: %w", ds.Namespace, ds.Name, to.Number, err)
	}
	if _, err := client.Update(ctx, back, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("roll back DaemonSet %s/%s to revision %d: %w", ds.Namespace, ds.Name, to.Number, err)
	}
	klog.FromContext(ctx).Info("Rolled back", "daemonset", klog.KObj(ds), "toRevision", to.Number)
	return nil
}
