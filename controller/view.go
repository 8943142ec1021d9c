package controller

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// reasonNodeGone is the Decision reason for pods whose node no longer exists.
const reasonNodeGone = "node no longer exists"

// nodeState is what one sync knows about one node: whether the set should
// run there and the set's pods that target it.
type nodeState struct {
	name string
	// node is nil when the node is gone but pods still target it.
	node     *corev1.Node
	decision placement.Decision
	// pods are the set's pods for this node except those both finished and
	// being deleted (the kubelet or pod GC is done with them, so are we),
	// oldest first with bound pods before unbound ones, as upstream.
	pods []*corev1.Pod
}

// setView is the snapshot one sync works on: built once, in
// O(nodes + pods of the set), and read by manage, the rolling update and
// the status, which upstream each rebuild.
type setView struct {
	ds   *everynodev1alpha1.DaemonSet
	hash string
	now  time.Time
	// nodes holds every node of the cluster in lister order, then the gone
	// nodes that still hold pods, by name.
	nodes []nodeState
	// allPods is every pod of the set, finished and deleted ones included,
	// so no revision a pod still uses is cleaned up.
	allPods []*corev1.Pod
}

// buildView groups pods by target node and decides eligibility once per
// node. pods must already be filtered to the set's own pods.
func buildView(ds *everynodev1alpha1.DaemonSet, nodes []*corev1.Node, pods []*corev1.Pod, hash string, now time.Time) *setView {
	v := &setView{ds: ds, hash: hash, now: now, allPods: pods, nodes: make([]nodeState, len(nodes), len(nodes)+1)}
	elig := placement.NewEligibility(ds)
	byName := make(map[string]int, len(nodes))
	for i, n := range nodes {
		v.nodes[i] = nodeState{name: n.Name, node: n, decision: elig.ForNode(n)}
		byName[n.Name] = i
	}
	var gone []string
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil && (pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded) {
			continue
		}
		target, ok := placement.TargetNode(pod)
		if !ok {
			continue
		}
		i, ok := byName[target]
		if !ok {
			i = len(v.nodes)
			byName[target] = i
			v.nodes = append(v.nodes, nodeState{name: target, decision: placement.Decision{Reason: reasonNodeGone}})
			gone = append(gone, target)
		}
		v.nodes[i].pods = append(v.nodes[i].pods, pod)
	}
	if len(gone) > 1 {
		tail := v.nodes[len(nodes):]
		sort.Slice(tail, func(i, j int) bool { return tail[i].name < tail[j].name })
	}
	for i := range v.nodes {
		if len(v.nodes[i].pods) > 1 {
			sortPodsOldestFirst(v.nodes[i].pods)
		}
	}
	return v
}

// sortPodsOldestFirst orders a node's pods as upstream's
// podByCreationTimestampAndPhase: bound pods first, then by creation time,
// then by name.
func sortPodsOldestFirst(pods []*corev1.Pod) {
	sort.Slice(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if (a.Spec.NodeName != "") != (b.Spec.NodeName != "") {
			return a.Spec.NodeName != ""
		}
		if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.Name < b.Name
		}
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	})
}

// splitByRevision looks at a node's pods that are not being deleted and
// returns the one made from the update revision and the one made from an
// older revision; ok is false when there are several of either (the manage
// step prunes those first), as upstream findUpdatedPodsOnNode.
func splitByRevision(pods []*corev1.Pod, hash string) (newPod, oldPod *corev1.Pod, ok bool) {
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if placement.IsPodUpdated(pod, hash) {
			if newPod != nil {
				return nil, nil, false
			}
			newPod = pod
		} else {
			if oldPod != nil {
				return nil, nil, false
			}
			oldPod = pod
		}
	}
	return newPod, oldPod, true
}
