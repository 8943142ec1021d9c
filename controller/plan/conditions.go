package plan

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// trouble is why a node that should run the set has no available pod.
type trouble int

const (
	// troubleMarkerNotIgnored comes first: no daemon pod of any set
	// schedules until kube-scheduler's configuration is fixed.
	troubleMarkerNotIgnored trouble = iota
	troubleNodeNotReady
	troubleCrashLoop
	troubleImagePull
	troubleFailed
	troublePending
	troubleStartGated
	troubleNotReady
	troubleMinReady
	troubleMissing
	numTroubles
)

// stuck tells the troubles that hold a rollout up (Progressing False) from
// those every rollout passes through (Progressing stays True).
func (t trouble) stuck() bool { return t <= troublePending }

var troubleInfo = [numTroubles]struct {
	reason, what string
	nodes        bool // names are nodes, not pods
}{
	troubleMarkerNotIgnored: {everynodev1alpha1.ReasonDaemonResourceNotIgnored, markerNotIgnoredWhat, false},
	troubleNodeNotReady:     {everynodev1alpha1.ReasonNodesNotReady, "nodes NotReady", true},
	troubleCrashLoop:        {everynodev1alpha1.ReasonPodsCrashLooping, "pods in CrashLoopBackOff", false},
	troubleImagePull:        {everynodev1alpha1.ReasonImagePullBackOff, "pods unable to pull their image", false},
	troubleFailed:           {everynodev1alpha1.ReasonPodsFailed, "pods Failed", false},
	troublePending:          {everynodev1alpha1.ReasonPodsPending, "pods Pending (unschedulable)", false},
	troubleStartGated:       {everynodev1alpha1.ReasonPodsWaitingForDependencies, "pods waiting for their dependencies on the node (spec.startAfter)", false},
	troubleNotReady:         {everynodev1alpha1.ReasonPodsNotReady, "pods not Ready", false},
	troubleMinReady:         {everynodev1alpha1.ReasonMinReadySeconds, "pods Ready for less than minReadySeconds", false},
	troubleMissing:          {everynodev1alpha1.ReasonPodsMissing, "nodes without a pod yet", true},
}

// markerNotIgnoredWhat is the marker trouble's part of a condition
// message while the marker is on: what is wrong and the fix, since nothing
// else will tell. (The controller turns the marker off in the sync that
// first sees such a pod, before its status, so this shows only for a pod
// the fallback does not cover: one that does not request the marker.)
const markerNotIgnoredWhat = "pods Pending because kube-scheduler does not ignore the daemon-pod marker resource " +
	"(everynode serve --daemon-resource; \"Insufficient\" in the pods' PodScheduled condition): give the scheduler's everynode extender entry " +
	"managedResources [{name: <the resource>, ignoredByScheduler: true}] (regenerate it with `everynode scheduler-config`) and restart it, " +
	"or run everynode with --daemon-resource=\"\" and delete these pods, which the controller then makes again without the marker"

// markerReplacedWhat is the marker trouble's part of a condition message
// once the marker is off: the controller deletes these pods and makes them
// again without it (PlanNode).
const markerReplacedWhat = "pods Pending because kube-scheduler does not ignore the daemon-pod marker resource " +
	"(\"Insufficient\" in the pods' PodScheduled condition): everynode no longer marks the daemon pods it makes " +
	"and replaces these without the marker"

// what is the trouble's part of a condition message.
func (t trouble) what() string {
	if t == troubleMarkerNotIgnored && placement.DaemonResource() == "" {
		return markerReplacedWhat
	}
	return troubleInfo[t].what
}

// maxNamedInMessage is how many names a condition message lists per
// trouble; the rest are counted.
const maxNamedInMessage = 3

// namedCount counts items and keeps the few smallest names, so messages are
// the same whatever order the nodes came in (a status is written only when
// it changes).
type namedCount struct {
	count int
	names []string
}

func (n *namedCount) add(name string) {
	n.count++
	i := sort.SearchStrings(n.names, name)
	if i >= maxNamedInMessage {
		return
	}
	n.names = append(n.names, "")
	copy(n.names[i+1:], n.names[i:])
	n.names[i] = name
	if len(n.names) > maxNamedInMessage {
		n.names = n.names[:maxNamedInMessage]
	}
}

func (n *namedCount) String() string {
	s := strings.Join(n.names, ", ")
	if more := n.count - len(n.names); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// troubles collects, per kind, the nodes or pods that are not available.
type troubles [numTroubles]namedCount

func (ts *troubles) add(t trouble, name string) { ts[t].add(name) }

// first returns the most telling trouble present, limited to stuck ones if
// stuckOnly; ok is false if there is none.
func (ts *troubles) first(stuckOnly bool) (trouble, bool) {
	for t := trouble(0); t < numTroubles; t++ {
		if ts[t].count > 0 && (!stuckOnly || t.stuck()) {
			return t, true
		}
	}
	return 0, false
}

// summary lists every trouble present, as "nodes NotReady: a, b; pods
// Pending: x and 4 more".
func (ts *troubles) summary() string {
	var parts []string
	for t := trouble(0); t < numTroubles; t++ {
		if ts[t].count > 0 {
			parts = append(parts, t.what()+": "+ts[t].String())
		}
	}
	return strings.Join(parts, "; ")
}

// classify says why pod, the oldest pod on a node that should run the set,
// is not available.
func classify(node *corev1.Node, pod *corev1.Pod, ready bool) trouble {
	switch {
	case placement.UnschedulableForDaemonResource(pod, markerName()):
		// Not only stuck pods (placement.StuckForDaemonResource): the
		// scheduler's verdict is what the user must read.
		return troubleMarkerNotIgnored
	case node != nil && !NodeReady(node):
		return troubleNodeNotReady
	case pod.Status.Phase == corev1.PodFailed:
		return troubleFailed
	}
	if reason := waitingReason(pod); reason != "" {
		switch reason {
		case "CrashLoopBackOff":
			return troubleCrashLoop
		case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
			return troubleImagePull
		}
	}
	switch {
	case placement.HasStartGate(pod):
		// Waiting its turn, not stuck: the dependencies' own conditions
		// say why they are not Ready.
		return troubleStartGated
	case pod.Status.Phase == corev1.PodPending || pod.Status.Phase == "":
		// Every new pod is Pending for a moment; only one the scheduler
		// could not place holds the rollout up.
		if unschedulable(pod) {
			return troublePending
		}
		return troubleNotReady
	case ready:
		return troubleMinReady
	}
	return troubleNotReady
}

// markerName is the daemon-pod marker resource a Pending pod may lack: the
// installation's, even after the controller turned it off
// (placement.TurnOffDaemonResource), or with the marker configured off the
// default one, which the pods made by an everynode with it still request.
func markerName() string {
	if name := placement.ConfiguredDaemonResource(); name != "" {
		return name
	}
	return everynodev1alpha1.DefaultDaemonResource
}

// waitingReason returns the first waiting reason among the pod's
// containers that points at a broken pod rather than one starting up.
func waitingReason(pod *corev1.Pod) string {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range list {
			if w := list[i].State.Waiting; w != nil {
				switch w.Reason {
				case "CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
					return w.Reason
				}
			}
		}
	}
	return ""
}

// unschedulable reports whether the scheduler tried the pod and found no
// node for it (PodScheduled False, reason Unschedulable).
func unschedulable(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// taintExclusions counts the nodes a set's selector admits but untolerated
// taints keep away, per set of taints, for the NodesExcluded condition. The
// eligibility checker is made on the first such node only: most sets have
// none.
type taintExclusions struct {
	elig   *placement.Eligibility
	counts map[string]int
}

// maxTaintsInMessage is how many taint groups the message lists.
const maxTaintsInMessage = 3

func (x *taintExclusions) add(ds *everynodev1alpha1.DaemonSet, ns *NodeState) {
	r := ns.Decision.Reason
	if ns.Node == nil || (r != placement.ReasonUntoleratedNoS && r != placement.ReasonUntoleratedNoE) {
		return
	}
	if x.elig == nil {
		x.elig = placement.NewEligibility(ds)
		x.counts = map[string]int{}
	}
	var names []string
	for _, t := range x.elig.UntoleratedTaints(ns.Node) {
		names = append(names, placement.TaintString(&t))
	}
	x.counts["taint "+strings.Join(names, ", ")+" not tolerated"]++
}

// condition is NodesExcluded, ok false when no node is excluded by taints.
// The message is the same whatever order the nodes came in.
func (x *taintExclusions) condition(generation int64, now metav1.Time) (metav1.Condition, bool) {
	if len(x.counts) == 0 {
		return metav1.Condition{}, false
	}
	type group struct {
		what  string
		nodes int
	}
	groups := make([]group, 0, len(x.counts))
	total := 0
	for what, n := range x.counts {
		groups = append(groups, group{what, n})
		total += n
	}
	sort.Slice(groups, func(i, j int) bool {
		if groups[i].nodes != groups[j].nodes {
			return groups[i].nodes > groups[j].nodes
		}
		return groups[i].what < groups[j].what
	})
	var parts []string
	for i, g := range groups {
		if i == maxTaintsInMessage {
			parts = append(parts, fmt.Sprintf("and %d more taint sets", len(groups)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%d %s: %s", g.nodes, plural(g.nodes, "node", "nodes"), g.what))
	}
	return metav1.Condition{
		Type:               everynodev1alpha1.ConditionNodesExcluded,
		Status:             metav1.ConditionTrue,
		ObservedGeneration: generation,
		LastTransitionTime: now,
		Reason:             everynodev1alpha1.ReasonUntoleratedTaints,
		Message: fmt.Sprintf("%d %s the selector admits kept away by taints: %s (kubectl everynode explain tells each node)",
			total, plural(total, "node", "nodes"), strings.Join(parts, "; ")),
	}, true
}

// plural is one when n is 1, many otherwise.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
