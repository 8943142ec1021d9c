package extender

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"everynode.io/everynode/placement"
)

// filterOutcome is a filter decision over a list of candidate node names.
type filterOutcome struct {
	// passed lists the nodes that pass, in input order; it is never nil for
	// a non-nil input, because a nil NodeNames tells the scheduler that
	// every node failed.
	passed []string
	// failed holds a reason for every rejected node, nil when none is.
	// Every reason this extender gives is one preemption cannot fix, so
	// the same map is sent as FailedNodes (for schedulers and users that
	// read only those) and as FailedAndUnresolvableNodes (so the scheduler
	// does not evict pods for nothing).
	failed map[string]string
}

// reject records why node fails, allocating the map on the first rejection
// only so that the common all-pass answer costs nothing.
func (o *filterOutcome) reject(node, reason string, capacity int) {
	if o.failed == nil {
		o.failed = make(map[string]string, capacity)
	}
	o.failed[node] = reason
}

// filterDaemonPod lets a daemon pod pass on its target node only, and only
// if targetReason finds nothing wrong there. It filters names in place: the
// caller owns the decoded request and does not read it afterwards.
func filterDaemonPod(pod *corev1.Pod, names []string, c *cluster) (filterOutcome, error) {
	out := filterOutcome{passed: names[:0]}
	target, ok := placement.TargetNode(pod)
	if !ok {
		reason := reasonNoTarget()
		for _, name := range names {
			out.reject(name, reason, len(names))
		}
		return out, nil
	}
	var elsewhere string // built once, shared by every other node
	for _, name := range names {
		if name == target {
			reason, err := targetReason(pod, target, c)
			if err != nil {
				return filterOutcome{}, err
			}
			if reason == "" {
				out.passed = append(out.passed, name)
			} else {
				out.reject(name, reason, len(names))
			}
			continue
		}
		if elsewhere == "" {
			elsewhere = reasonOtherNode(target)
		}
		out.reject(name, elsewhere, len(names))
	}
	return out, nil
}

// targetReason says why a daemon pod may not go to its target node, or ""
// if it may, from the caches (reasonFrom). A refusal is read again from
// the API server before it is given (cluster.confirm): the caches can
// trail it, and a refusal costs the pod far more than one attempt.
func targetReason(pod *corev1.Pod, target string, c *cluster) (string, error) {
	reason, err := reasonFrom(pod, target, c, c.cached())
	if err != nil || reason == "" {
		return reason, err
	}
	return c.confirm(reason, func(live reader) (string, error) { return reasonFrom(pod, target, c, live) }), nil
}

// reasonFrom says why a daemon pod may not go to its target node, or ""
// if it may, with the set and the node as r reads them: its set must
// still exist, the node must exist and still be eligible for the set, the
// pod must not ask more than the node's allocatable in all
// (spec.nodeSizing with a min above it, say: the scheduler would
// otherwise look for victims to evict, for nothing), and the node must
// hold no other live pod of the set, unless the set surges during a
// rolling update and that pod is of another revision (the old pod stays
// until the new one is available).
func reasonFrom(pod *corev1.Pod, target string, c *cluster, r reader) (string, error) {
	set, setKey, reason, err := controllingSet(pod, r, c.appsSets != nil)
	if err != nil || reason != "" {
		return reason, err
	}
	node, err := r.getNode(target)
	if apierrors.IsNotFound(err) {
		return reasonNodeGone(target), nil
	}
	if err != nil {
		return "", fmt.Errorf("get node %s: %w", target, err)
	}
	// ShouldRun, not ShouldContinueRunning: this pod is not running yet, so
	// an untolerated NoSchedule taint keeps it off as it keeps the
	// controller from creating it.
	if d := placement.NewEligibility(set).ForNode(node); !d.ShouldRun {
		return reasonNotEligible(setKey, d.Reason), nil
	}
	if too := placement.AboveAllocatable(pod, node); len(too) > 0 {
		return reasonAboveAllocatable(setKey, too), nil
	}
	refOf := placement.ControllerRef
	if placement.IsApps(set) {
		refOf = placement.AppsControllerRef
	}
	pods, err := c.daemonPodsOn(target, setKey, refOf)
	if err != nil {
		return "", err
	}
	var others []*corev1.Pod
	for _, other := range pods {
		if samePod(other, pod) || !placement.IsPodActive(other) {
			continue
		}
		if ref := refOf(other); ref.UID != set.UID {
			// A pod of an earlier set of this name, which the garbage
			// collector has yet to delete (or missed, as a soak saw right
			// after a kube-apiserver restart). It is not this set's, as the controller sees it
			// too, and will never be: an orphaning delete orphans every
			// dependent before the old set is gone, and a new set of the
			// name exists only then. Counting it kept the new set's pods
			// off those nodes for good, where upstream's run beside it.
			continue
		}
		others = append(others, other)
	}
	strategy := placement.UpdateStrategy(set)
	allowed := func(others []*corev1.Pod) bool {
		return len(others) == 0 ||
			len(others) == 1 && strategy.AllowsSurge() && placement.RevisionHash(others[0]) != placement.RevisionHash(pod)
	}
	if allowed(others) {
		return "", nil
	}
	if others, err = r.active(others); err != nil {
		return "", err
	}
	if allowed(others) {
		return "", nil
	}
	// Name the first by name: the index returns pods in map order, and a
	// reason that changes between attempts reads like a new problem.
	first := slices.MinFunc(others, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return reasonDuplicate(setKey, types.NamespacedName{Namespace: first.Namespace, Name: first.Name}.String()), nil
}

// filterGated keeps the nodes that no readiness gate holds back. With no
// gate at all (gates is nil) the input comes back as it is, so the path
// every ordinary pod takes is a nil check. Otherwise it is one snapshot
// lookup per node, filtering names in place.
func filterGated(names []string, gates *gateSnapshot) filterOutcome {
	if gates == nil {
		return filterOutcome{passed: names}
	}
	out := filterOutcome{passed: names[:0]}
	for _, name := range names {
		if reason, gated := gates.lookup(name); gated {
			out.reject(name, reason, min(len(gates.reasons), len(names)))
			continue
		}
		out.passed = append(out.passed, name)
	}
	return out
}
