package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"

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
	// holdInvalid: the strategy does not parse (rolloutPolicy.invalid).
	holdInvalid
	// holdPaused: rollingUpdate.paused, or the rollout stopped itself.
	holdPaused
	// holdCanary: the node does not match rollingUpdate.nodeSelector.
	holdCanary
	// holdPartition: the node is one of the `partition` kept on the old revision.
	holdPartition
	numHolds
)

// rolloutPolicy is how one sync's rolling update may replace pods: the
// strategy's limits scaled to the nodes that should run the set, and
// everynode's additions to upstream (pause, the canary selector, the
// partition). A sync builds it once, after the verdict, since a rollout
// stopped by its failure policy holds like one paused by hand; the rolling
// update, the gate openings and the status all read this one.
//
// A strategy that does not parse (a maxSurge, maxUnavailable or partition
// that is no number or percentage, a canary selector that does not
// convert) holds every old pod, as a pause does. Validation refuses such a
// strategy, so only a set stored around it gets here; then Progressing is
// False with reason InvalidUpdateStrategy, and the sync returns the error
// so it is retried with backoff. Nodes without a pod are not the policy's
// business: the manage step creates the update revision there regardless.
type rolloutPolicy struct {
	onDelete bool
	paused   bool
	// invalid is why the strategy could not be read; nil when it could.
	invalid error
	// canary is nil when every node may be updated.
	canary labels.Selector
	// keep is how many nodes the partition keeps on an old revision.
	keep                     int
	desired                  int
	maxSurge, maxUnavailable int
}

// newRolloutPolicy reads v's strategy against v's verdict.
func newRolloutPolicy(v *setView) *rolloutPolicy {
	s := &v.strategy
	p := &rolloutPolicy{desired: v.desiredCount()}
	if !s.RollingUpdate() {
		p.onDelete = true
		return p
	}
	p.paused = s.Paused || (v.verdict != nil && v.verdict.stopped)
	var errs []error
	var err error
	if p.maxSurge, p.maxUnavailable, err = s.Limits(p.desired); err != nil {
		errs = append(errs, err)
	}
	if p.keep, err = s.Kept(p.desired); err != nil {
		errs = append(errs, err)
	}
	if s.NodeSelector != nil {
		if p.canary, err = metav1.LabelSelectorAsSelector(s.NodeSelector); err != nil {
			errs = append(errs, fmt.Errorf("invalid rollingUpdate.nodeSelector: %w", err))
		}
	}
	p.invalid = errors.Join(errs...)
	return p
}

// keptNodes are the nodes of v the partition keeps on their old revision:
// the highest-named among those that run only an old pod. Choosing among
// the old ones (rather than among all nodes) keeps exactly `partition`
// nodes old when a kept node's pod is recreated new or a node joins, and
// choosing by name makes the choice stable from sync to sync. It is read
// from each view the sync reads, since the manage step may have changed
// which nodes run only an old pod.
func (p *rolloutPolicy) keptNodes(v *setView) map[string]bool {
	if p.keep == 0 || p.onDelete || p.invalid != nil {
		return nil
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
	kept := make(map[string]bool, p.keep)
	for _, n := range old[max(0, len(old)-p.keep):] {
		kept[n] = true
	}
	return kept
}

// holdOf says whether, and why, the rolling update must leave st alone.
func (v *setView) holdOf(st *nodeState) hold {
	p := v.policy
	switch {
	case p.onDelete:
		return holdOnDelete
	case p.invalid != nil:
		return holdInvalid
	case p.paused:
		return holdPaused
	case p.canary != nil && st.node != nil && !p.canary.Matches(labels.Set(st.node.Labels)):
		return holdCanary
	case v.kept[st.name]:
		return holdPartition
	}
	return holdNone
}

// halted reports whether the rollout replaces no pod on any node for a
// reason of its own (paused, stopped by its failure policy, or an
// unreadable strategy): its progress deadline does not run.
func (p *rolloutPolicy) halted() bool { return p.paused || p.invalid != nil }

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
// pods to delete and the nodes to create a new pod on, within the policy's
// maxSurge and maxUnavailable, skipping the nodes it holds; held counts the outdated
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
func planRollingUpdate(v *setView) (toDelete []*corev1.Pod, toCreate []string, held int) {
	pol := v.policy
	if pol.onDelete || pol.invalid != nil {
		return nil, nil, 0
	}
	desired, maxSurge, maxUnavailable := pol.desired, pol.maxSurge, pol.maxUnavailable
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
				if v.holdOf(st) != holdNone {
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
			if v.holdOf(st) != holdNone {
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
// allows it. A strategy that does not parse replaces nothing
// (rolloutPolicy).
func (c *Controller) rollingUpdate(ctx context.Context, v *setView) error {
	if v.policy.invalid != nil {
		return nil
	}
	maxSurge, maxUnavailable := v.policy.maxSurge, v.policy.maxUnavailable
	toDelete, toCreate, held := planRollingUpdate(v)
	var toUpdate []*daemonPod
	if maxSurge == 0 {
		// With surge a new pod runs beside the old one: nothing to patch.
		// Validation keeps maxSurge 0 for sets that update in place.
		toDelete, toUpdate = splitInPlace(ctx, v, newInPlaceRule(v), toDelete)
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
	err := errors.Join(c.updateInPlace(ctx, v, toUpdate), c.syncNodes(ctx, v.ds, toDelete, toCreate, v.hash))
	c.state.budgetBound(key, retry)
	// Everything planned went out and the limits hold the rest back: the
	// next step waits for a pod to turn ready, so that event syncs at once.
	c.state.awaitReady(key, held > 0 && retry == 0 && err == nil)
	if retry > 0 && err == nil {
		c.enqueueAfter(v.ds, retry)
	}
	return err
}
