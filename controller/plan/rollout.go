package plan

import (
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"everynode.io/everynode/placement"
)

// hold says why the rolling update leaves a node's old pod alone.
type hold int

// Policy is how one sync's rolling update may replace pods: the
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
type Policy struct {
	onDelete bool
	paused   bool
	// Invalid is why the strategy could not be read; nil when it could.
	Invalid error
	// canary is nil when every node may be updated.
	canary labels.Selector
	// keep is how many nodes the partition keeps on an old revision.
	keep int
	// desired counts the serving nodes that should run the set: the
	// limits scale to them, since the nodes the lifecycle rule skips
	// neither consume nor block the budget (placement.NodeClass).
	desired                  int
	MaxSurge, MaxUnavailable int
}

// newRolloutPolicy reads v's strategy against v's verdict.
func newPolicy(v *View) *Policy {
	s := &v.Strategy
	all, serving := v.desiredCount()
	p := &Policy{desired: serving}
	if !s.RollingUpdate() {
		p.onDelete = true
		return p
	}
	p.paused = s.Paused || (v.Verdict != nil && v.Verdict.stopped)
	var errs []error
	var err error
	if p.MaxSurge, p.MaxUnavailable, err = s.Limits(p.desired); err != nil {
		errs = append(errs, err)
	}
	// The partition counts every node, as the user does: `partition: 2`
	// keeps two nodes old, skipped or not.
	if p.keep, err = s.Kept(all); err != nil {
		errs = append(errs, err)
	}
	if s.NodeSelector != nil {
		if p.canary, err = metav1.LabelSelectorAsSelector(s.NodeSelector); err != nil {
			errs = append(errs, fmt.Errorf("invalid rollingUpdate.nodeSelector: %w", err))
		}
	}
	p.Invalid = errors.Join(errs...)
	return p
}

// keptNodes are the nodes of v the partition keeps on their old revision:
// the highest-named among those that run only an old pod. Choosing among
// the old ones (rather than among all nodes) keeps exactly `partition`
// nodes old when a kept node's pod is recreated new or a node joins, and
// choosing by name makes the choice stable from sync to sync. It is read
// from each view the sync reads, since the manage step may have changed
// which nodes run only an old pod. A node the lifecycle rule skips stays
// old anyway: it counts toward the partition first, so the user's
// `partition` nodes stay old, not more.
func (p *Policy) keptNodes(v *View) map[string]bool {
	if p.keep == 0 || p.onDelete || p.Invalid != nil {
		return nil
	}
	var old []string
	keep := p.keep
	for i := range v.Nodes {
		st := &v.Nodes[i]
		if st.Node == nil {
			continue
		}
		if newPod, oldPod, ok := splitByRevision(st.Pods, v.Hash); ok && oldPod != nil && newPod == nil {
			if st.Phase.Class.Skipped() {
				keep--
				continue
			}
			old = append(old, st.Name)
		}
	}
	if keep <= 0 {
		return nil
	}
	sort.Strings(old)
	kept := make(map[string]bool, keep)
	for _, n := range old[max(0, len(old)-keep):] {
		kept[n] = true
	}
	return kept
}

// holdOf says whether, and why, the rolling update must leave st alone.
func (v *View) holdOf(st *NodeState) hold {
	p := v.Policy
	switch {
	case p.onDelete:
		return holdOnDelete
	case p.Invalid != nil:
		return holdInvalid
	case p.paused:
		return holdPaused
	case st.Phase.Class.Skipped():
		return lifecycleHold[st.Phase.Class]
	case p.canary != nil && st.Node != nil && !p.canary.Matches(labels.Set(st.Node.Labels)):
		return holdCanary
	case v.kept[st.Name]:
		return holdPartition
	}
	return holdNone
}

// halted reports whether the rollout replaces no pod on any node for a
// reason of its own (paused, stopped by its failure policy, or an
// unreadable strategy): its progress deadline does not run.
func (p *Policy) halted() bool { return p.paused || p.Invalid != nil }

// desiredCount is how many nodes should run the set, and how many of
// those serve (placement.NodeClass).
func (v *View) desiredCount() (all, serving int) {
	for i := range v.Nodes {
		if v.Nodes[i].Decision.ShouldRun {
			all++
			if !v.Nodes[i].Phase.Class.Skipped() {
				serving++
			}
		}
	}
	return all, serving
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

// PlanRollingUpdate is upstream's rollingUpdate as a pure function: the old
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
//
// Unlike upstream, a node the lifecycle rule skips (unreachable, leaving,
// shutting down: placement.NodeClass) is left out of both: its pods are
// not replaced, and count neither as unavailable nor as surge, so a few
// dead nodes cannot stall the update of the others.
func PlanRollingUpdate(v *View) (toDelete []*corev1.Pod, toCreate []string, held int) {
	pol := v.Policy
	if pol.onDelete || pol.Invalid != nil {
		return nil, nil, 0
	}
	desired, maxSurge, maxUnavailable := pol.desired, pol.MaxSurge, pol.MaxUnavailable
	available := func(pod *DaemonPod) bool {
		return pod.available(v.DS.Spec.MinReadySeconds, v.Now)
	}
	if maxSurge == 0 {
		numUnavailable := 0
		var candidates []nodePod
		for i := range v.Nodes {
			st := &v.Nodes[i]
			if (!st.Decision.ShouldRun && len(st.Pods) == 0) || st.Phase.Class.Skipped() {
				continue
			}
			newPod, oldPod, ok := splitByRevision(st.Pods, v.Hash)
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
				candidates = append(candidates, nodePod{st.Name, oldPod.Pod})
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
	for i := range v.Nodes {
		st := &v.Nodes[i]
		if (!st.Decision.ShouldRun && len(st.Pods) == 0) || st.Phase.Class.Skipped() {
			continue
		}
		newPod, oldPod, ok := splitByRevision(st.Pods, v.Hash)
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
			case !available(oldPod) && !st.Decision.ShouldRun:
				toDelete = append(toDelete, oldPod.Pod)
			case !available(oldPod):
				toCreate = append(toCreate, st.Name)
			case !st.Decision.ShouldRun:
				shouldNotRun = append(shouldNotRun, nodePod{st.Name, oldPod.Pod})
			default:
				candidates = append(candidates, st.Name)
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

const (
	holdNone hold = iota
	// holdOnDelete: the strategy is OnDelete; only a deleted pod comes back new.
	holdOnDelete
	// holdInvalid: the strategy does not parse (Policy.invalid).
	holdInvalid
	// holdPaused: rollingUpdate.paused, or the rollout stopped itself.
	holdPaused
	// holdCanary: the node does not match rollingUpdate.nodeSelector.
	holdCanary
	// holdPartition: the node is one of the `partition` kept on the old revision.
	holdPartition
	// holdUnreachable, holdLeaving, holdShuttingDown: the lifecycle rule
	// skips the node (placement.NodeClass).
	holdUnreachable
	holdLeaving
	holdShuttingDown
	numHolds
)

// lifecycleHold is the hold of each skipped node class.
var lifecycleHold = [placement.NumNodeClasses]hold{
	placement.NodeUnreachable:  holdUnreachable,
	placement.NodeLeaving:      holdLeaving,
	placement.NodeShuttingDown: holdShuttingDown,
}
