package controller

import (
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// reasonNodeGone is the Decision reason for pods whose node no longer exists.
const reasonNodeGone = "node no longer exists"

// daemonPod is one pod of the set with what every step of a sync asks
// about it read once: manage, the rolling update and the status each ask
// about every pod, and re-reading its labels and scanning its conditions
// for each question would cost more than the questions themselves (see
// BenchmarkSync). The embedded pod is the informer's object: read it,
// never modify it.
type daemonPod struct {
	*corev1.Pod
	// hash is the pod's controller-revision-hash label.
	hash string
	// deleting and phase copy the pod's deletion timestamp being set and
	// its phase: every sync asks both of every pod, and reading them here
	// spares a read of the pod (podMemo).
	deleting bool
	phase    corev1.PodPhase
	// selected is whether the set's selector matches the pod's labels: a
	// pod it does not is released (releasePods).
	selected bool
	// isReady is whether the pod's Ready condition is True, and
	// readySince its last transition. Copied, like gateIsOpen and
	// gateSince, so the status's pass over every pod reads no pod.
	isReady    bool
	readySince time.Time
	// gated is whether the pod has the in-place readiness gate, gateCond
	// its condition (nil if none yet), gateIsOpen whether that is True.
	gated      bool
	gateCond   *corev1.PodCondition
	gateIsOpen bool
	gateSince  time.Time
	// inPlace is the pod's in-place update to its current revision, nil if
	// it was not updated in place; inPlaceDone and inPlaceAt say whether
	// the new containers run and are ready, and since when
	// (placement.InPlaceDone).
	inPlace     *placement.InPlaceUpdate
	inPlaceDone bool
	inPlaceAt   time.Time
}

func newDaemonPod(pod *corev1.Pod) daemonPod {
	p := daemonPod{Pod: pod, hash: placement.RevisionHash(pod), deleting: pod.DeletionTimestamp != nil, phase: pod.Status.Phase}
	if c := placement.ReadyCondition(pod); placement.ConditionReady(c) {
		p.isReady, p.readySince = true, c.LastTransitionTime.Time
	}
	if placement.HasInPlaceGate(pod) {
		p.gated, p.gateCond = true, placement.InPlaceGateCondition(pod)
		if placement.ConditionReady(p.gateCond) {
			p.gateIsOpen, p.gateSince = true, p.gateCond.LastTransitionTime.Time
		}
	}
	if u, ok := placement.InPlaceUpdateOf(pod); ok {
		p.inPlace = &u
		p.inPlaceDone, p.inPlaceAt = placement.InPlaceDone(pod, &u)
	}
	return p
}

// updated is placement.IsPodUpdated.
func (p *daemonPod) updated(hash string) bool { return placement.IsRevisionUpdated(p.hash, hash) }

// active is placement.IsPodActive.
func (p *daemonPod) active() bool { return !p.deleting && !p.finished() }

// done reports a pod both finished and being deleted: the kubelet or pod
// GC is done with it, so is the view (nodeState.pods).
func (p *daemonPod) done() bool { return p.deleting && p.finished() }

func (p *daemonPod) finished() bool {
	return p.phase == corev1.PodSucceeded || p.phase == corev1.PodFailed
}

// ready is placement.IsPodReady.
func (p *daemonPod) ready() bool { return p.isReady }

// gateOpen reports whether the pod's in-place gate, if it has one, is True.
func (p *daemonPod) gateOpen() bool { return !p.gated || p.gateIsOpen }

// updatingInPlace reports whether an in-place update of the pod has not
// finished: its new containers do not all run and are ready yet, or its
// gate is still closed. The pod's Ready condition may not show it yet (the
// kubelet has not seen the patch, or the gate's condition), but it is
// unavailable from the moment the controller acts.
func (p *daemonPod) updatingInPlace() bool {
	return (p.inPlace != nil && !p.inPlaceDone) || !p.gateOpen()
}

// available is placement.IsPodAvailable, and not updating in place
// (availableAt).
func (p *daemonPod) available(minReadySeconds int32, now time.Time) bool {
	at, ok := p.availableAt(minReadySeconds)
	return ok && (minReadySeconds == 0 || at.Before(now))
}

// availableAt is placement.AvailableAt for a pod not updating in place.
// After an in-place update, minReadySeconds counts from the latest of the
// Ready transition, the gate opening and the new containers' start.
func (p *daemonPod) availableAt(minReadySeconds int32) (time.Time, bool) {
	// placement.ConditionAvailableAt on the copied condition.
	if !p.isReady || (minReadySeconds > 0 && p.readySince.IsZero()) || p.updatingInPlace() {
		return time.Time{}, false
	}
	minReady := time.Duration(minReadySeconds) * time.Second
	at := p.readySince.Add(minReady)
	if p.inPlace != nil && p.inPlaceAt.Add(minReady).After(at) {
		at = p.inPlaceAt.Add(minReady)
	}
	if p.gated && p.gateSince.Add(minReady).After(at) {
		at = p.gateSince.Add(minReady)
	}
	return at, true
}

// nodeState is what one sync knows about one node: whether the set should
// run there and the set's pods that target it.
type nodeState struct {
	name string
	// node is nil when the node is gone but pods still target it.
	node     *corev1.Node
	decision placement.Decision
	// pods are the set's pods for this node except those both finished and
	// being deleted (the kubelet or pod GC is done with them, so are we),
	// oldest first with bound pods before unbound ones, as upstream. It is
	// a window on setView.pods: never append to it.
	pods []*daemonPod
}

// setView is the snapshot one sync works on: built once, in
// O(nodes + pods of the set), and read by manage, the rolling update and
// the status, which upstream each rebuild.
type setView struct {
	ds       *everynodev1alpha1.DaemonSet
	strategy placement.Strategy
	hash     string
	now      time.Time
	// nodes holds every node of the cluster in the snapshot's order, then
	// the gone nodes that still hold pods, by name.
	nodes []nodeState
	// pods is every pod of the set except those both finished and being
	// deleted, grouped by node in the order of nodes (each node's window
	// is its nodeState.pods), then the pods that name no node. They are
	// the memo's (podMemo), shared with the next sync: never modify one.
	pods []*daemonPod
	// allPods is every pod of the set, finished and deleted ones included,
	// so no revision a pod still uses is cleaned up.
	allPods []*corev1.Pod
	// gated counts the pods with the in-place readiness gate: a set with
	// none has no gate to open (openGates).
	gated int
	// from and memo are what the view was read from, for reading it
	// again after the manage step (Controller.reread).
	from *nodeSnapshot
	memo *podMemo

	// The sync's history, set by the sync before it decides: old are the
	// set's revisions other than the update revision, revisions the number
	// of each revision by hash.
	old       []*appsv1.ControllerRevision
	revisions map[string]int64
	// acts is whether the sync acts on the set's current spec: every pod
	// change it asked for earlier shows in the cache. One that does not
	// only reports what it knows, and creates on nodes with no pod.
	acts bool

	// The sync's decisions (decide), made once on its first view and
	// carried to the views it reads after: verdict is the rollout against
	// its failure policy, policy the rollout policy under that verdict.
	// kept is the policy's partition in this view (rolloutPolicy.keptNodes).
	verdict *verdict
	policy  *rolloutPolicy
	kept    map[string]bool
}

// decide makes the decisions every later step of the sync reads: the
// verdict first, since a rollout stopped by its failure policy holds like
// a paused one, then the rollout policy.
func (v *setView) decide() {
	v.verdict = judge(v)
	v.policy = newRolloutPolicy(v)
	v.kept = v.policy.keptNodes(v)
}

// carry gives v, read again later in the same sync, the history and the
// decisions of the sync's first view: the sync decides once.
func (v *setView) carry(first *setView) {
	v.old, v.revisions, v.acts = first.old, first.revisions, first.acts
	v.verdict, v.policy = first.verdict, first.policy
	v.kept = v.policy.keptNodes(v)
}

// buildView groups pods by target node and decides eligibility once per
// node. pods must already be filtered to the set's own pods. The pods are
// grouped by a counting sort into one slice, so a sync allocates the same
// few slices at any size instead of one per node.
func buildView(ds *everynodev1alpha1.DaemonSet, nodes []*corev1.Node, pods []*corev1.Pod, hash string, now time.Time) *setView {
	return viewOf(ds, newNodeSnapshot(nodes), pods, (*podMemo)(nil).forSelector(labels.Everything()), hash, now)
}

// viewOf is buildView on the set's memo: the pods' facts and the nodes'
// decisions are derived only where the memo has none yet.
func viewOf(ds *everynodev1alpha1.DaemonSet, nodes *nodeSnapshot, pods []*corev1.Pod, memo *podMemo, hash string, now time.Time) *setView {
	v := &setView{ds: ds, strategy: placement.UpdateStrategy(ds), hash: hash, now: now, allPods: pods, from: nodes, memo: memo, nodes: make([]nodeState, len(nodes.nodes), len(nodes.nodes)+1)}
	decisions := memo.decisions(ds, nodes)
	for i, n := range nodes.nodes {
		v.nodes[i] = nodeState{name: n.Name, node: n, decision: decisions[i]}
	}
	facts := memo.facts(pods)

	// The node index of each pod: skip (deleted and finished), unknown
	// until the gone nodes are placed, or none (names no node).
	const skip, gone, none = -1, -2, -3
	at := make([]int32, len(pods))
	var goneNames []string
	for j, f := range facts {
		at[j] = skip
		if f.done() {
			continue
		}
		switch i, known := f.nodeAt(nodes); {
		case f.target == "":
			at[j] = none
		case known:
			at[j] = i
		default:
			at[j] = gone
			goneNames = append(goneNames, f.target)
		}
	}
	if len(goneNames) > 0 {
		sort.Strings(goneNames)
		goneAt := make(map[string]int32, len(goneNames))
		for _, name := range goneNames {
			if _, ok := goneAt[name]; !ok {
				goneAt[name] = int32(len(v.nodes))
				v.nodes = append(v.nodes, nodeState{name: name, decision: placement.Decision{Reason: reasonNodeGone}})
			}
		}
		for j := range at {
			if at[j] == gone {
				at[j] = goneAt[facts[j].target]
			}
		}
	}

	// Counting sort by node index; the pods that name no node go last.
	last := int32(len(v.nodes))
	start := make([]int32, len(v.nodes)+2)
	for j := range at {
		if at[j] == none {
			at[j] = last
		}
		if at[j] >= 0 {
			start[at[j]+1]++
		}
	}
	for i := 1; i < len(start); i++ {
		start[i] += start[i-1]
	}
	v.pods = make([]*daemonPod, start[len(start)-1])
	for j, i := range at {
		if i >= 0 {
			v.pods[start[i]] = &facts[j].daemonPod
			if v.pods[start[i]].gated {
				v.gated++
			}
			start[i]++
		}
	}
	// start[i] is now where node i's window ends, and so where i+1's begins.
	from := int32(0)
	for i := range v.nodes {
		to := start[i]
		if to > from {
			v.nodes[i].pods = v.pods[from:to:to]
			if to-from > 1 {
				sortPodsOldestFirst(v.nodes[i].pods)
			}
		}
		from = to
	}
	return v
}

// sortPodsOldestFirst orders a node's pods as upstream's
// podByCreationTimestampAndPhase: bound pods first, then by creation time,
// then by name.
func sortPodsOldestFirst(pods []*daemonPod) {
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
func splitByRevision(pods []*daemonPod, hash string) (newPod, oldPod *daemonPod, ok bool) {
	for _, pod := range pods {
		if pod.deleting {
			continue
		}
		if pod.updated(hash) {
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
