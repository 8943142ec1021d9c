package plan

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement/revision"
)

// InPlaceRule says whether a pod of an old revision can be moved to the
// update revision in place. It decodes each old revision at most once per
// sync, and only for sets that update in place.
//
// Whether the pod has the in-place readiness gate does not matter. One
// without it (made before the set updated in place, or under a policy
// that gave it none) is patched without one: it counts as unavailable
// until its new containers are ready, as under Never; recreating it to
// get the gate would undo what the user asked for, an update in place,
// for every pod of a set switched to InPlaceIfPossible in the same edit
// as its images. One with a gate the policy does not close is patched
// with the gate left as it is (Strategy.ClosesGate).
type InPlaceRule struct {
	ds *everynodev1alpha1.DaemonSet
	// revs are the set's old revisions by hash; verdicts the answers so far.
	revs     map[string]*appsv1.ControllerRevision
	verdicts map[string]bool
}

// NewInPlaceRule returns the rule for v's set, nil when the set does not
// update in place.
func NewInPlaceRule(v *View) *InPlaceRule {
	if !v.Strategy.InPlace() {
		return nil
	}
	r := &InPlaceRule{ds: v.DS, revs: make(map[string]*appsv1.ControllerRevision, len(v.Old)), verdicts: map[string]bool{}}
	for _, rev := range v.Old {
		r.revs[rev.Labels[revision.HashLabel]] = rev
	}
	return r
}

// allows reports whether pod can be updated in place: it is on a node and
// its revision differs from the update revision in images only. A pod of
// a revision no longer kept (history limit) is recreated: there is
// nothing to compare it with.
func (r *InPlaceRule) allows(ctx context.Context, pod *DaemonPod) bool {
	if r == nil || pod.Spec.NodeName == "" {
		return false
	}
	ok, seen := r.verdicts[pod.Hash]
	if !seen {
		if rev := r.revs[pod.Hash]; rev != nil {
			var err error
			if ok, err = revision.InPlaceTo(rev.Data.Raw, r.ds); err != nil {
				klog.FromContext(ctx).V(2).Info("Cannot read revision; recreating its pods", "revision", klog.KObj(rev), "err", err)
			}
		}
		r.verdicts[pod.Hash] = ok
	}
	return ok
}

// SplitInPlace takes from toDelete (the old pods the rolling update
// replaces) those the rule lets it update in place.
func SplitInPlace(ctx context.Context, v *View, rule *InPlaceRule, toDelete []*corev1.Pod) (stillDelete []*corev1.Pod, toUpdate []*DaemonPod) {
	if rule == nil || len(toDelete) == 0 {
		return toDelete, nil
	}
	chosen := make(map[*corev1.Pod]bool, len(toDelete))
	for _, p := range toDelete {
		chosen[p] = true
	}
	for i := range v.Pods {
		p := v.Pods[i]
		if chosen[p.Pod] && rule.allows(ctx, p) {
			toUpdate = append(toUpdate, p)
			delete(chosen, p.Pod)
		}
	}
	for _, p := range toDelete {
		if chosen[p] {
			stillDelete = append(stillDelete, p)
		}
	}
	return stillDelete, toUpdate
}

// PlanGateOpenings returns the pods whose in-place gate the controller
// should set True: gated pods whose condition is missing (new pods: no
// kubelet sets it) or False, that are not in the middle of an in-place
// update, and that the rolling update is not about to update: pods of the
// update revision, or old pods it holds (paused, partition, canary,
// OnDelete). An old pod whose gate is False and that the rollout will
// update anyway (a patch that failed after its gate closed) stays closed.
func PlanGateOpenings(v *View) []*DaemonPod {
	var out []*DaemonPod
	for i := range v.Nodes {
		st := &v.Nodes[i]
		for j := range st.Pods {
			p := st.Pods[j]
			if !p.Gated || p.gateOpen() || p.deleting || (p.InPlace != nil && !p.inPlaceDone) {
				continue
			}
			if p.updated(v.Hash) || v.holdOf(st) != holdNone {
				out = append(out, p)
			}
		}
	}
	return out
}

// PlanGateClosings returns the pods whose in-place gate the controller
// should close although their patch has gone out: pods updating in place
// (their new containers not all ready yet), gate open, that the gate
// policy closes the gate of now (Strategy.ClosesGate). Under IfServed
// that is a pod patched while no EndpointSlice listed it that one lists
// now (listed reads the slices; it is called only under IfServed and only
// for these pods). The gate cannot stop what the patch started, and
// traffic may have reached containers the kubelet stopped before the
// controller saw the slice; closed now, it takes the pod out of the
// endpoints before the kubelet would (a stopped container turns not ready
// only once it has stopped, one not yet stopped not at all), and keeps it
// out until its new containers are ready: PlanGateOpenings opens it then.
// A pod whose new containers have all started is past what the gate
// guards: one that turns not ready later (a crash, a probe) is the
// kubelet's to report, and closing its gate then only held it out of
// service once its containers recovered, with a message about an
// EndpointSlice under any policy (the soak's s07-inplace).
func PlanGateClosings(v *View, listed func(*corev1.Pod) bool) []*DaemonPod {
	if v.Gated == 0 || !v.Strategy.InPlace() {
		return nil
	}
	var out []*DaemonPod
	for _, p := range v.Pods {
		if !p.Gated || !p.gateIsOpen || p.deleting || p.InPlace == nil || p.inPlaceStarted {
			continue
		}
		if v.Strategy.ClosesGate(true, v.Strategy.GateNeedsListing() && listed(p.Pod)) {
			out = append(out, p)
		}
	}
	return out
}
