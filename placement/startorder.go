package placement

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// Start order (spec.startAfter). A set's pod on a node may start once the
// pod of every set it starts after is Ready on that node. The controller
// makes a pod with the scheduling gate SchedulingGateStartAfter only when
// StartOrder.Waits names a dependency at creation, and removes the gate
// once it names none; the rules here are what it, the webhook and
// `kubectl everynode explain` share.

// StartKey names one set of either kind, as spec.startAfter does once its
// defaults are filled in.
type StartKey struct {
	Group, Namespace, Name string
}

// String is group/namespace/name, e.g. apps/kube-system/kube-proxy: the
// form conditions, explain and the controller's index use.
func (k StartKey) String() string { return k.Group + "/" + k.Namespace + "/" + k.Name }

// SetStartKey is the key of an everynode set.
func SetStartKey(ds *everynodev1alpha1.DaemonSet) StartKey {
	group := everynodev1alpha1.GroupEverynode
	if IsApps(ds) {
		group = everynodev1alpha1.GroupApps
	}
	return StartKey{Group: group, Namespace: ds.Namespace, Name: ds.Name}
}

// StartAfterKeys returns the keys of ds's spec.startAfter, defaults filled
// in (the set's own namespace, group everynode.io), each once.
func StartAfterKeys(ds *everynodev1alpha1.DaemonSet) []StartKey {
	if len(ds.Spec.StartAfter) == 0 {
		return nil
	}
	out := make([]StartKey, 0, len(ds.Spec.StartAfter))
	seen := make(map[StartKey]bool, len(ds.Spec.StartAfter))
	for _, d := range ds.Spec.StartAfter {
		k := StartKey{Group: d.APIGroup, Namespace: d.Namespace, Name: d.Name}
		if k.Group == "" {
			k.Group = everynodev1alpha1.GroupEverynode
		}
		if k.Namespace == "" {
			k.Namespace = ds.Namespace
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// StartDependency is one dependency of a set as a sync finds it: Set is
// nil when no such set exists; Cyclic when it is on a cycle through the
// dependent set, which therefore does not wait for it.
type StartDependency struct {
	Key    StartKey
	Set    *everynodev1alpha1.DaemonSet
	Cyclic bool
}

// StartOrder answers, for one set, which dependencies a node's pod waits
// for. Build it once per sync (each dependency's eligibility is prepared
// once) and ask it about every node that matters.
type StartOrder struct {
	deps []startDep
}

type startDep struct {
	StartDependency
	elig *Eligibility
}

// NewStartOrder prepares the rule for deps; nil when there is nothing to
// wait for.
func NewStartOrder(deps []StartDependency) *StartOrder {
	if len(deps) == 0 {
		return nil
	}
	o := &StartOrder{deps: make([]startDep, 0, len(deps))}
	for _, d := range deps {
		sd := startDep{StartDependency: d}
		if d.Set != nil {
			sd.elig = NewEligibility(d.Set)
		}
		o.deps = append(o.deps, sd)
	}
	return o
}

// StartWait is a dependency a node's pod waits for, and why.
type StartWait struct {
	Key StartKey
	Why string
}

func (w StartWait) String() string { return w.Key.String() + ": " + w.Why }

// Why a node's pod waits for a dependency.
const (
	WaitNotFound = "no such set"
	WaitNoPod    = "no pod on the node yet"
	WaitNotReady = "its pod on the node is not Ready"
)

// Waits returns the dependencies the pod of node waits for, in spec
// order; empty means it may start. podsOf(i) returns the pods of the i-th
// dependency (in Deps order) that target node; it is called only for
// dependencies that run there. A dependency:
//   - that does not exist is waited for (it may be created next);
//   - on a cycle through the set is not (the cycle would hold every node);
//   - that must not run on node (selector, affinity, NoExecute taint) is not;
//   - that may keep but not start a pod there (an untolerated NoSchedule
//     taint) is waited for only while it has a pod there;
//   - otherwise is waited for until one of its pods there, not being
//     deleted, is Ready.
func (o *StartOrder) Waits(node *corev1.Node, podsOf func(i int) []*corev1.Pod) []StartWait {
	if o == nil {
		return nil
	}
	var out []StartWait
	for i := range o.deps {
		d := &o.deps[i]
		switch {
		case d.Cyclic:
			continue
		case d.Set == nil:
			out = append(out, StartWait{Key: d.Key, Why: WaitNotFound})
			continue
		}
		dec := d.elig.ForNode(node)
		if !dec.ShouldContinueRunning {
			continue
		}
		pods := podsOf(i)
		if !dec.ShouldRun && len(pods) == 0 {
			continue
		}
		if why := notReadyWhy(pods); why != "" {
			out = append(out, StartWait{Key: d.Key, Why: why})
		}
	}
	return out
}

// Deps returns the dependencies in the order podsOf is asked about them.
func (o *StartOrder) Deps() []StartDependency {
	if o == nil {
		return nil
	}
	out := make([]StartDependency, len(o.deps))
	for i := range o.deps {
		out[i] = o.deps[i].StartDependency
	}
	return out
}

// notReadyWhy is "" when one of pods is Ready and not being deleted.
func notReadyWhy(pods []*corev1.Pod) string {
	live := false
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		live = true
		if IsPodReady(p) {
			return ""
		}
	}
	if !live {
		return WaitNoPod
	}
	return WaitNotReady
}

// StartCycle returns a cycle of startAfter edges through start, as the
// keys from start back to start (start first and last), or nil. edges
// returns a set's dependencies (nil for a set that does not exist or an
// apps/v1 set, which has none). Each set is visited once: the cost is the
// part of the graph start reaches.
func StartCycle(start StartKey, edges func(StartKey) []StartKey) []StartKey {
	visited := map[StartKey]bool{}
	var path []StartKey
	var walk func(k StartKey) bool
	walk = func(k StartKey) bool {
		path = append(path, k)
		for _, next := range edges(k) {
			if next == start {
				path = append(path, next)
				return true
			}
			if visited[next] {
				continue
			}
			visited[next] = true
			if walk(next) {
				return true
			}
		}
		path = path[:len(path)-1]
		return false
	}
	visited[start] = true
	if walk(start) {
		return path
	}
	return nil
}

// CycleString writes a cycle as StartCycle returns it: a -> b -> a.
func CycleString(cycle []StartKey) string {
	parts := make([]string, len(cycle))
	for i, k := range cycle {
		parts[i] = k.String()
	}
	return strings.Join(parts, " -> ")
}

// HasStartGate reports whether pod carries the start-after scheduling gate.
func HasStartGate(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name == everynodev1alpha1.SchedulingGateStartAfter {
			return true
		}
	}
	return false
}

// WithStartGate adds the start-after scheduling gate to pod, once.
func WithStartGate(pod *corev1.Pod) {
	if !HasStartGate(pod) {
		pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: everynodev1alpha1.SchedulingGateStartAfter})
	}
}

// StartGateRemovalPatch is the strategic merge patch that removes the
// start-after gate and leaves any other gate alone (schedulingGates merge
// by name).
func StartGateRemovalPatch() []byte {
	return []byte(fmt.Sprintf(`{"spec":{"schedulingGates":[{"$patch":"delete","name":%q}]}}`, everynodev1alpha1.SchedulingGateStartAfter))
}

// PodSetKey returns the key of the set, of either kind, that controls pod,
// and that set's UID: what a pod turning Ready tells the sets that start
// after it.
func PodSetKey(pod *corev1.Pod) (StartKey, bool) {
	if ref := ControllerRef(pod); ref != nil {
		return StartKey{Group: everynodev1alpha1.GroupEverynode, Namespace: pod.Namespace, Name: ref.Name}, true
	}
	if ref := AppsControllerRef(pod); ref != nil {
		return StartKey{Group: everynodev1alpha1.GroupApps, Namespace: pod.Namespace, Name: ref.Name}, true
	}
	return StartKey{}, false
}
