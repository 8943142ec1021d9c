package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// hold says why the rolling update leaves a node's old pod alone.
type hold int

const (
	holdNone hold = iota
	// holdOnDelete: the strategy is OnDelete; only a deleted pod comes back new.
	holdOnDelete
	// holdPaused: rollingUpdate.paused.
	holdPaused
	// holdCanary: the node does not match rollingUpdate.nodeSelector.
	holdCanary
	// holdPartition: the node is one of the `partition` kept on the old revision.
	holdPartition
)

// rolloutPolicy holds everynode's additions to upstream's rolling update:
// which nodes it may replace pods on. Nodes without a pod are not its
// business: the manage step always creates the newest revision there.
type rolloutPolicy struct {
	onDelete bool
	paused   bool
	// canary is nil when every node may be updated.
	canary labels.Selector
	// kept are the nodes partition keeps on their old revision.
	kept map[string]bool
}

// newRolloutPolicy reads the policy of v's set. The partition keeps the
// highest-named nodes among those that still run only an old pod: choosing
// among the old ones (rather than among all nodes) keeps exactly
// `partition` nodes old when a kept node's pod is recreated new or a node
// joins, and choosing by name makes the choice stable from sync to sync.
func newRolloutPolicy(v *setView, desired int) (*rolloutPolicy, error) {
	s := &v.strategy
	if !s.RollingUpdate() {
		return &rolloutPolicy{onDelete: true}, nil
	}
	// A rollout paused by its failure policy holds like one paused by hand.
	p := &rolloutPolicy{paused: s.Paused || (v.verdict != nil && v.verdict.stopped)}
	if s.NodeSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(s.NodeSelector)
		if err != nil {
			return nil, fmt.Errorf("invalid rollingUpdate.nodeSelector: %w", err)
		}
		p.canary = sel
	}
	keep, err := s.Kept(desired)
	if err != nil || keep == 0 {
		return p, err
	}
	var old []string
	for i := range v.nodes {
		st := &v.nodes[i]
		if st.node == nil {
			continue
		}
		if newPod, oldPod, ok := splitByRevision(st.pods, v.hash); ok && oldPod != nil && newPod == nil {
			old = append(old, st.name)
		}
	}
	sort.Strings(old)
	p.kept = make(map[string]bool, keep)
	for _, n := range old[max(0, len(old)-keep):] {
		p.kept[n] = true
	}
	return p, nil
}

// holdOf says whether, and why, the rolling update must leave st alone.
func (p *rolloutPolicy) holdOf(st *nodeState) hold {
	switch {
	case p.onDelete:
		return holdOnDelete
	case p.paused:
		return holdPaused
	case p.canary != nil && st.node != nil && !p.canary.Matches(labels.Set(st.node.Labels)):
		return holdCanary
	case p.kept[st.name]:
		return holdPartition
	}
	return holdNone
}

// desiredCount is how many nodes should run the set.
func (v *setView) desiredCount() int {
	n := 0
	for i := range v.nodes {
		if v.nodes[i].decision.ShouldRun {
			n++
		}
	}
	return n
}

// nodePod is a pod and the node it is for, to sort choices by node name.
type nodePod struct {
	node string
	pod  *corev1.Pod
}

func sortedPods(in []nodePod, n int) []*corev1.Pod {
	sort.Slice(in, func(i, j int) bool { return in[i].node < in[j].node })
	out := make([]*corev1.Pod, 0, n)
	for _, np := range in[:n] {
		out = append(out, np.pod)
	}
	return out
}

// planRollingUpdate is upstream's rollingUpdate as a pure function: the old
// pods to delete and the nodes to create a new pod on, within maxSurge and
// maxUnavailable, skipping the nodes pol holds; held counts the outdated
// pods those limits leave for a later step, which a pod turning ready
// lets go. Where upstream picks among candidates in map order, this picks
// them by node name.
//
// Without surge: an old pod that is not available is replaced at once (it
// costs no availability); then available old pods are deleted while fewer
// than maxUnavailable nodes are unavailable, and the manage step creates
// their replacements.
//
// With surge: a new pod is created next to an old one on up to maxSurge
// nodes (at once where the old one is unavailable); the old pod is deleted
// when the new one is available.
func planRollingUpdate(v *setView, pol *rolloutPolicy, desired, maxSurge, maxUnavailable int) (toDelete []*corev1.Pod, toCreate []string, held int) {
	available := func(pod *daemonPod) bool {
		return pod.available(v.ds.Spec.MinReadySeconds, v.now)
	}
	if maxSurge == 0 {
		numUnavailable := 0
		var candidates []nodePod
		for i := range v.nodes {
			st := &v.nodes[i]
			if !st.decision.ShouldRun && len(st.pods) == 0 {
				continue
			}
			newPod, oldPod, ok := splitByRevision(st.pods, v.hash)
			switch {
			case !ok:
				// The manage step prunes the extra pods first.
				numUnavailable++
			case (oldPod == nil) == (newPod == nil):
				// Nothing yet, or both: manage creates or deletes.
				numUnavailable++
			case newPod != nil:
				if !available(newPod) {
					numUnavailable++
				}
			default:
				oldAvailable := available(oldPod)
				if !oldAvailable {
					numUnavailable++
				}
				if pol.holdOf(st) != holdNone {
					continue
				}
				if !oldAvailable {
					toDelete = append(toDelete, oldPod.Pod)
					continue
				}
				candidates = append(candidates, nodePod{st.name, oldPod.Pod})
			}
		}
		remaining := min(max(maxUnavailable-numUnavailable, 0), len(candidates))
		return append(toDelete, sortedPods(candidates, remaining)...), nil, len(candidates) - remaining
	}

	var (
		numSurge, numAvailable int
		shouldNotRun           []nodePod
		candidates             []string
	)
	for i := range v.nodes {
		st := &v.nodes[i]
		if !st.decision.ShouldRun && len(st.pods) == 0 {
			continue
		}
		newPod, oldPod, ok := splitByRevision(st.pods, v.hash)
		if !ok {
			numSurge++
			continue
		}
		if oldPod != nil {
			if available(oldPod) {
				numAvailable++
			}
		} else if newPod != nil && available(newPod) {
			numAvailable++
		}
		switch {
		case oldPod == nil:
			// Manage creates here.
		case newPod == nil:
			if pol.holdOf(st) != holdNone {
				continue
			}
			switch {
			case !available(oldPod) && !st.decision.ShouldRun:
				toDelete = append(toDelete, oldPod.Pod)
			case !available(oldPod):
				toCreate = append(toCreate, st.name)
			case !st.decision.ShouldRun:
				shouldNotRun = append(shouldNotRun, nodePod{st.name, oldPod.Pod})
			default:
				candidates = append(candidates, st.name)
			}
		default:
			// Surged already: finish once the new pod is available. This is
			// done even when paused, so no node is left with two pods.
			if !available(newPod) {
				numSurge++
				continue
			}
			toDelete = append(toDelete, oldPod.Pod)
		}
	}
	// With surge the owner expects full availability: a node that no longer
	// should run the set loses its available old pod only once another
	// node's new pod is available.
	if deletable := numAvailable - desired; deletable > 0 {
		toDelete = append(toDelete, sortedPods(shouldNotRun, min(deletable, len(shouldNotRun)))...)
	}
	remaining := min(max(maxSurge-numSurge, 0), len(candidates))
	sort.Strings(candidates)
	return toDelete, append(toCreate, candidates[:remaining]...), len(candidates) - remaining
}

// upTo returns the first n of s, at most all, and what is left of n.
func upTo[T any](s []T, n int) ([]T, int) {
	k := min(len(s), n)
	return s[:k], n - k
}

// rollingUpdate replaces old pods within the limits of the strategy,
// updating them in place where the strategy asks for it and their revision
// allows it (old are the set's older revisions).
func (c *Controller) rollingUpdate(ctx context.Context, v *setView, old []*appsv1.ControllerRevision) error {
	desired := v.desiredCount()
	maxSurge, maxUnavailable, err := v.strategy.Limits(desired)
	if err != nil {
		return err
	}
	pol, err := newRolloutPolicy(v, desired)
	if err != nil {
		return err
	}
	toDelete, toCreate, held := planRollingUpdate(v, pol, desired, maxSurge, maxUnavailable)
	var toUpdate []*daemonPod
	if maxSurge == 0 {
		// With surge a new pod runs beside the old one: nothing to patch.
		// Validation keeps maxSurge 0 for sets that update in place.
		toDelete, toUpdate = splitInPlace(ctx, v, newInPlaceRule(v, old), toDelete)
	}
	// At most burstReplicas of each a sync, as syncNodes and updateInPlace
	// send; and behind every request for a node without a pod, of any set:
	// only as many as the budget has free tokens now go, deletes first,
	// the rest when a batch of tokens is free again.
	toDelete, _ = upTo(toDelete, c.burstReplicas)
	toUpdate, _ = upTo(toUpdate, c.burstReplicas)
	toCreate, _ = upTo(toCreate, c.burstReplicas)
	key := cache.MetaObjectToName(v.ds)
	free, retry := c.state.free(key, len(toDelete)+len(toUpdate)+len(toCreate))
	toDelete, free = upTo(toDelete, free)
	toUpdate, free = upTo(toUpdate, free)
	toCreate, _ = upTo(toCreate, free)
	if len(toDelete) > 0 || len(toCreate) > 0 || len(toUpdate) > 0 || retry > 0 {
		klog.FromContext(ctx).V(4).Info("Rolling update step", "daemonset", klog.KObj(v.ds),
			"maxSurge", maxSurge, "maxUnavailable", maxUnavailable, "delete", len(toDelete), "create", len(toCreate), "inPlace", len(toUpdate), "waitForTokens", retry)
	}
	err = errors.Join(c.updateInPlace(ctx, v, toUpdate), c.syncNodes(ctx, v.ds, toDelete, toCreate, v.hash))
	c.state.budgetBound(key, retry)
	// Everything planned went out and the limits hold the rest back: the
	// next step waits for a pod to turn ready, so that event syncs at once.
	c.state.awaitReady(key, held > 0 && retry == 0 && err == nil)
	if retry > 0 && err == nil {
		c.enqueueAfter(v.ds, retry)
	}
	return err
}
