package plan

import (
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// reasonNodeGone is the Decision reason for pods whose node no longer exists.
const reasonNodeGone = "node no longer exists"

// DaemonPod is one pod of the set with what every step of a sync asks
// about it read once: manage, the rolling update and the status each ask
// about every pod, and re-reading its labels and scanning its conditions
// for each question would cost more than the questions themselves (see
// BenchmarkSync). The embedded pod is the informer's object: read it,
// never modify it.
type DaemonPod struct {
	*corev1.Pod
	// Hash is the pod's controller-revision-Hash label.
	Hash string
	// deleting and phase copy the pod's deletion timestamp being set and
	// its phase: every sync asks both of every pod, and reading them here
	// spares a read of the pod (PodMemo).
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
	// Gated is whether the pod has the in-place readiness gate, gateCond
	// its condition (nil if none yet), gateIsOpen whether that is True.
	Gated      bool
	GateCond   *corev1.PodCondition
	gateIsOpen bool
	gateSince  time.Time
	// InPlace is the pod's in-place update to its current revision, nil if
	// it was not updated in place; inPlaceDone and inPlaceAt say whether
	// the new containers run and are ready, and since when
	// (placement.InPlaceDone); inPlaceStarted whether the kubelet has
	// started them, ready or not (placement.InPlaceStarted).
	InPlace        *placement.InPlaceUpdate
	inPlaceDone    bool
	inPlaceStarted bool
	inPlaceAt      time.Time
	// StartGated is whether the pod holds the start-after scheduling gate
	// (spec.startAfter).
	StartGated bool
	// markerStuck is whether the scheduler left the pod Pending for want
	// of the daemon-pod marker it requests (placement.StuckForDaemonResource
	// with markerName).
	markerStuck bool
}

func newDaemonPod(pod *corev1.Pod) DaemonPod {
	p := DaemonPod{Pod: pod, Hash: placement.RevisionHash(pod), deleting: pod.DeletionTimestamp != nil, phase: pod.Status.Phase}
	if c := placement.ReadyCondition(pod); placement.ConditionReady(c) {
		p.isReady, p.readySince = true, c.LastTransitionTime.Time
	}
	if placement.HasInPlaceGate(pod) {
		p.Gated, p.GateCond = true, placement.InPlaceGateCondition(pod)
		if placement.ConditionReady(p.GateCond) {
			p.gateIsOpen, p.gateSince = true, p.GateCond.LastTransitionTime.Time
		}
	}
	if u, ok := placement.InPlaceUpdateOf(pod); ok {
		p.InPlace = &u
		p.inPlaceDone, p.inPlaceAt = placement.InPlaceDone(pod, &u)
		p.inPlaceStarted = p.inPlaceDone || placement.InPlaceStarted(pod, &u)
	}
	p.StartGated = placement.HasStartGate(pod)
	if p.phase == corev1.PodPending {
		p.markerStuck = placement.StuckForDaemonResource(pod, markerName())
	}
	return p
}

// updated is placement.IsPodUpdated.
func (p *DaemonPod) updated(hash string) bool { return placement.IsRevisionUpdated(p.Hash, hash) }

// active is placement.IsPodActive.
func (p *DaemonPod) active() bool { return !p.deleting && !p.finished() }

// done reports a pod both finished and being deleted: the kubelet or pod
// GC is done with it, so is the view (NodeState.pods).
func (p *DaemonPod) done() bool { return p.deleting && p.finished() }

func (p *DaemonPod) finished() bool {
	return p.phase == corev1.PodSucceeded || p.phase == corev1.PodFailed
}

// ready is placement.IsPodReady.
func (p *DaemonPod) ready() bool { return p.isReady }

// gateOpen reports whether the pod's in-place gate, if it has one, is True.
func (p *DaemonPod) gateOpen() bool { return !p.Gated || p.gateIsOpen }

// updatingInPlace reports whether an in-place update of the pod has not
// finished: its new containers do not all run and are ready yet, or its
// gate is still closed. The pod's Ready condition may not show it yet (the
// kubelet has not seen the patch, or the gate's condition), but it is
// unavailable from the moment the controller acts.
func (p *DaemonPod) updatingInPlace() bool {
	return (p.InPlace != nil && !p.inPlaceDone) || !p.gateOpen()
}

// available is placement.IsPodAvailable, and not updating in place
// (availableAt).
func (p *DaemonPod) available(minReadySeconds int32, now time.Time) bool {
	at, ok := p.availableAt(minReadySeconds)
	return ok && (minReadySeconds == 0 || at.Before(now))
}

// availableAt is placement.AvailableAt for a pod not updating in place.
// After an in-place update, minReadySeconds counts from the latest of the
// Ready transition, the gate opening and the new containers' start.
func (p *DaemonPod) availableAt(minReadySeconds int32) (time.Time, bool) {
	// placement.ConditionAvailableAt on the copied condition.
	if !p.isReady || (minReadySeconds > 0 && p.readySince.IsZero()) || p.updatingInPlace() {
		return time.Time{}, false
	}
	minReady := time.Duration(minReadySeconds) * time.Second
	at := p.readySince.Add(minReady)
	if p.InPlace != nil && p.inPlaceAt.Add(minReady).After(at) {
		at = p.inPlaceAt.Add(minReady)
	}
	if p.Gated && p.gateSince.Add(minReady).After(at) {
		at = p.gateSince.Add(minReady)
	}
	return at, true
}

// StuckForMarker returns the first of the set's pods that kube-scheduler
// left Pending for want of the daemon-pod marker
// (placement.StuckForDaemonResource), and how many there are: while the
// marker is on, the sign that the scheduler does not ignore it, and the
// pods the manage step deletes once it is off (PlanNode).
func (v *View) StuckForMarker() (first *corev1.Pod, n int) {
	for _, p := range v.Pods {
		if p.markerStuck {
			if first == nil {
				first = p.Pod
			}
			n++
		}
	}
	return first, n
}

// NodeState is what one sync knows about one node: whether the set should
// run there and the set's pods that target it.
type NodeState struct {
	Name string
	// Node is nil when the Node is gone but pods still target it.
	Node     *corev1.Node
	Decision placement.Decision
	// Phase is the node's lifecycle class for the set (View.Lifecycle);
	// serving for a gone node.
	Phase placement.NodePhase
	// Pods are the set's Pods for this node except those both finished and
	// being deleted (the kubelet or pod GC is done with them, so are we),
	// oldest first with bound Pods before unbound ones, as upstream. It is
	// a window on View.Pods: never append to it.
	Pods []*DaemonPod
}

// View is the snapshot one sync works on: built once, in
// O(nodes + pods of the set), and read by manage, the rolling update and
// the status, which upstream each rebuild.
type View struct {
	DS       *everynodev1alpha1.DaemonSet
	Strategy placement.Strategy
	// Lifecycle is the set's node lifecycle rule (placement.Lifecycle).
	Lifecycle placement.Lifecycle
	Hash      string
	Now       time.Time
	// Nodes holds every node of the cluster in the snapshot's order, then
	// the gone Nodes that still hold pods, by name.
	Nodes []NodeState
	// Pods is every pod of the set except those both finished and being
	// deleted, grouped by node in the order of nodes (each node's window
	// is its NodeState.Pods), then the Pods that name no node. They are
	// the memo's (PodMemo), shared with the next sync: never modify one.
	Pods []*DaemonPod
	// AllPods is every pod of the set, finished and deleted ones included,
	// so no revision a pod still uses is cleaned up.
	AllPods []*corev1.Pod
	// Gated counts the pods with the in-place readiness gate: a set with
	// none has no gate to open (openGates).
	Gated int
	// StartGated counts the pods with the start-after scheduling gate: a
	// set with none has no gate to remove (PlanUngates).
	StartGated int
	// from and memo are what the view was read from, for reading it
	// again after the manage step (Again).
	from *NodeSnapshot
	memo *PodMemo

	// The sync's history (Decide): Old are the set's revisions other than
	// the update revision, revisions the number of each revision by hash.
	Old       []*appsv1.ControllerRevision
	revisions map[string]int64
	// Acts is whether the sync Acts on the set's current spec: every pod
	// change it asked for earlier shows in the cache. One that does not
	// only reports what it knows, and creates on nodes with no pod.
	Acts bool

	// The sync's decisions (Decide), made once on its first view and
	// carried to the views it reads after: verdict is the rollout against
	// its failure policy, policy the rollout policy under that verdict.
	// kept is the policy's partition in this view (Policy.keptNodes).
	Verdict *Verdict
	Policy  *Policy
	kept    map[string]bool
	// sizing is the view's resize plan, once asked for (Sizing).
	sizing *ResizePlan
}

// Decide makes, once, the decisions every later step of the sync reads:
// the verdict first, since a rollout stopped by its failure policy holds
// like a paused one, then the rollout policy. cur is the set's update
// revision and old its others; acts says whether the sync acts on the
// set's current spec (every pod change it asked for earlier shows in the
// cache).
func (v *View) Decide(cur *appsv1.ControllerRevision, old []*appsv1.ControllerRevision, acts bool) {
	v.Old, v.revisions, v.Acts = old, revisionNumbers(cur, old), acts
	v.Verdict = judge(v)
	v.Policy = newPolicy(v)
	v.kept = v.Policy.keptNodes(v)
}

// Again is the view of the same sync read again over pods, the set's pods
// as the cache shows them now: on the same nodes and memo, with the first
// view's history and decisions (the sync decides once). Only the
// partition's kept nodes are read anew: they depend on the pods.
func (v *View) Again(pods []*corev1.Pod, now time.Time) *View {
	w := NewView(v.DS, v.from, pods, v.memo, v.Hash, now)
	w.Old, w.revisions, w.Acts = v.Old, v.revisions, v.Acts
	w.Verdict, w.Policy = v.Verdict, v.Policy
	w.kept = w.Policy.keptNodes(w)
	return w
}

// NewView groups pods, the set's own, by target node and decides
// eligibility once per node, on the set's memo: the pods' facts and the
// nodes' decisions are derived only where the memo has none yet. The pods
// are grouped by a counting sort into one slice, so a sync allocates the
// same few slices at any size instead of one per node.
func NewView(ds *everynodev1alpha1.DaemonSet, nodes *NodeSnapshot, pods []*corev1.Pod, memo *PodMemo, hash string, now time.Time) *View {
	v := &View{DS: ds, Strategy: placement.UpdateStrategy(ds), Lifecycle: placement.NodeLifecycleOf(ds), Hash: hash, Now: now, AllPods: pods, from: nodes, memo: memo, Nodes: make([]NodeState, len(nodes.nodes), len(nodes.nodes)+1)}
	decisions := memo.decisions(ds, nodes)
	for i, n := range nodes.nodes {
		v.Nodes[i] = NodeState{Name: n.Name, Node: n, Decision: decisions[i], Phase: v.Lifecycle.Classify(n, now)}
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
				goneAt[name] = int32(len(v.Nodes))
				v.Nodes = append(v.Nodes, NodeState{Name: name, Decision: placement.Decision{Reason: reasonNodeGone}})
			}
		}
		for j := range at {
			if at[j] == gone {
				at[j] = goneAt[facts[j].target]
			}
		}
	}

	// Counting sort by node index; the pods that name no node go last.
	last := int32(len(v.Nodes))
	start := make([]int32, len(v.Nodes)+2)
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
	v.Pods = make([]*DaemonPod, start[len(start)-1])
	for j, i := range at {
		if i >= 0 {
			v.Pods[start[i]] = &facts[j].DaemonPod
			if v.Pods[start[i]].Gated {
				v.Gated++
			}
			if v.Pods[start[i]].StartGated {
				v.StartGated++
			}
			start[i]++
		}
	}
	// start[i] is now where node i's window ends, and so where i+1's begins.
	from := int32(0)
	for i := range v.Nodes {
		to := start[i]
		if to > from {
			v.Nodes[i].Pods = v.Pods[from:to:to]
			if to-from > 1 {
				sortPodsOldestFirst(v.Nodes[i].Pods)
			}
		}
		from = to
	}
	return v
}

// sortPodsOldestFirst orders a node's pods as upstream's
// podByCreationTimestampAndPhase: bound pods first, then by creation time,
// then by name.
func sortPodsOldestFirst(pods []*DaemonPod) {
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
func splitByRevision(pods []*DaemonPod, hash string) (newPod, oldPod *DaemonPod, ok bool) {
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

// Unselected returns the set's pods, not being deleted, that its selector
// no longer matches: the controller releases them (the memo's selector
// match, PodMemo).
func (v *View) Unselected() []*DaemonPod {
	var out []*DaemonPod
	for _, p := range v.Pods {
		if !p.deleting && !p.selected {
			out = append(out, p)
		}
	}
	return out
}
