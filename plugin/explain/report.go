// Package explain is `kubectl everynode explain`: why a node runs, or does
// not run, a set's pod. Eligibility comes from package placement, the
// functions the controller and the extender use, so the answer cannot
// drift from what everynode does. The report (build) is a pure function of
// the set, its nodes, its pods and their scheduling events; the command
// (command.go) only fetches them and prints it.
package explain

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
	"everynode.io/everynode/placement/revision"
)

// Report is the answer for one set.
type Report struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Nodes is how many nodes were looked at; Ready how many of them run a
	// ready pod of the set.
	Nodes int `json:"nodes"`
	Ready int `json:"ready"`
	// Reasons counts the nodes without a ready pod by their main reason,
	// most common first.
	Reasons []ReasonCount `json:"reasons"`
	// Details has one entry per node, in name order.
	Details []NodeReport `json:"details"`
}

// ReasonCount is one line of the summary.
type ReasonCount struct {
	Reason string `json:"reason"`
	Nodes  int    `json:"nodes"`
}

// NodeReport is what is known about one node.
type NodeReport struct {
	Node string `json:"node"`
	// ShouldRun and ShouldContinueRunning are placement's decision.
	ShouldRun             bool `json:"shouldRun"`
	ShouldContinueRunning bool `json:"shouldContinueRunning"`
	// Why the node does not run the set (placement.Explanation).
	Why []string `json:"why,omitempty"`
	// Notes are node states that do not keep a daemon pod away.
	Notes []string `json:"notes,omitempty"`
	// Pod is the set's pod on the node, if any, with its phase, readiness,
	// container states and revision.
	Pod        string   `json:"pod,omitempty"`
	Phase      string   `json:"phase,omitempty"`
	PodReady   bool     `json:"podReady"`
	Containers []string `json:"containers,omitempty"`
	Updated    bool     `json:"updated,omitempty"`
	// Scheduler is the newest FailedScheduling message of a pending pod.
	Scheduler string `json:"scheduler,omitempty"`
	// Update says what holds the pod on an old revision, if anything.
	Update string `json:"update,omitempty"`
	// Lifecycle is the node's class for the set's rolling update when it
	// is not serving (placement.NodeClass): "Unreachable", "Leaving" or
	// "ShuttingDown", and LifecycleWhy the taint or condition that says so.
	Lifecycle    string `json:"lifecycle,omitempty"`
	LifecycleWhy string `json:"lifecycleWhy,omitempty"`
	// StartGated is whether the pod holds the start-after scheduling gate
	// (spec.startAfter); StartWaits the dependencies the node's pod waits
	// for, with why ("apps/kube-system/kube-proxy: its pod on the node is
	// not Ready").
	// Size is what spec.nodeSizing gives the node's pod
	// ("agent: requests cpu=400m memory=327Mi, limits memory=655Mi"), and
	// SizeState how the pod stands against it: "sized", "resizing",
	// "waiting to be resized", "does not fit: ...", "resize refused: ...".
	Size       string   `json:"size,omitempty"`
	SizeState  string   `json:"sizeState,omitempty"`
	StartGated bool     `json:"startGated,omitempty"`
	StartWaits []string `json:"startWaits,omitempty"`
	// Reason is the node's line in the summary; empty for a node that
	// runs a ready pod or should not run one and has none.
	Reason string `json:"reason,omitempty"`

	// states are the containers' states without names or counts
	// ("CrashLoopBackOff"), once each, so the summary groups nodes by them.
	states []string
}

// build explains ds over nodes at now. pods are the set's pods (any node);
// events are FailedScheduling events of those pods, in any order.
func build(ds *everynodev1alpha1.DaemonSet, nodes []corev1.Node, pods []corev1.Pod, events []corev1.Event, now time.Time) Report {
	r := Report{Namespace: ds.Namespace, Name: ds.Name, Nodes: len(nodes)}
	byNode := map[string][]*corev1.Pod{}
	for i := range pods {
		if node, ok := placement.TargetNode(&pods[i]); ok && pods[i].DeletionTimestamp == nil {
			byNode[node] = append(byNode[node], &pods[i])
		}
	}
	lastFailure := newestFailures(events)
	spec := &ds.Spec.Template.Spec
	eligibility := placement.NewEligibilityForTemplate(spec)
	lifecycle := placement.NodeLifecycleOf(ds)
	counts := map[string]int{}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for i := range nodes {
		x := eligibility.Explain(spec, &nodes[i])
		nr := NodeReport{Node: nodes[i].Name, ShouldRun: x.ShouldRun, ShouldContinueRunning: x.ShouldContinueRunning, Why: x.Why, Notes: x.Notes}
		phase := lifecycle.Classify(&nodes[i], now)
		if phase.Class.Skipped() {
			nr.Lifecycle, nr.LifecycleWhy = phase.Class.String(), phase.Reason
		}
		if pod := pick(byNode[nodes[i].Name]); pod != nil {
			describePod(&nr, ds, pod, lastFailure[pod.Name])
			if !nr.Updated && phase.Class.Skipped() && nr.Update != "" {
				nr.Update = skippedHold[phase.Class]
			}
		}
		if len(ds.Spec.NodeSizing) > 0 {
			describeSize(&nr, ds, &nodes[i], pick(byNode[nodes[i].Name]))
		}
		nr.Reason = reason(&nr)
		switch {
		case nr.PodReady:
			r.Ready++
		case nr.Reason != "":
			counts[nr.Reason]++
		}
		r.Details = append(r.Details, nr)
	}
	for reason, n := range counts {
		r.Reasons = append(r.Reasons, ReasonCount{Reason: reason, Nodes: n})
	}
	sortReasons(r.Reasons)
	return r
}

// sortReasons puts the most common reason first, then by name.
func sortReasons(rs []ReasonCount) {
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].Nodes != rs[j].Nodes {
			return rs[i].Nodes > rs[j].Nodes
		}
		return rs[i].Reason < rs[j].Reason
	})
}

// pick returns the pod that speaks for a node: a ready one if there is
// one, else the oldest.
func pick(pods []*corev1.Pod) *corev1.Pod {
	var out *corev1.Pod
	for _, p := range pods {
		switch {
		case out == nil:
			out = p
		case placement.IsPodReady(p) && !placement.IsPodReady(out):
			out = p
		case placement.IsPodReady(p) == placement.IsPodReady(out) && p.CreationTimestamp.Before(&out.CreationTimestamp):
			out = p
		}
	}
	return out
}

func describePod(nr *NodeReport, ds *everynodev1alpha1.DaemonSet, pod *corev1.Pod, failure string) {
	nr.Pod, nr.Phase, nr.PodReady = pod.Name, string(pod.Status.Phase), placement.IsPodReady(pod)
	nr.StartGated = placement.HasStartGate(pod)
	for _, cs := range pod.Status.ContainerStatuses {
		var state, detail string
		switch {
		case cs.State.Waiting != nil:
			state = cs.State.Waiting.Reason
			detail = "waiting, " + state
			if cs.RestartCount > 0 {
				detail += fmt.Sprintf(", %d restarts", cs.RestartCount)
			}
		case cs.State.Terminated != nil:
			state = fmt.Sprintf("terminated, %s (exit code %d)", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
			detail = state
		case cs.State.Running != nil && !cs.Ready:
			state, detail = "running, not ready", "running, not ready"
		default:
			continue
		}
		nr.Containers = append(nr.Containers, cs.Name+": "+detail)
		if !slices.Contains(nr.states, state) {
			nr.states = append(nr.states, state)
		}
	}
	if pod.Status.Phase == corev1.PodPending {
		nr.Scheduler = failure
	}
	hash := pod.Labels[revision.HashLabel]
	nr.Updated = hash != "" && hash == ds.Status.UpdateRevision
	if !nr.Updated && ds.Status.UpdateRevision != "" {
		nr.Update = holdReason(ds)
	}
}

// skippedHold says why a skipped node's pod stays on its old revision.
var skippedHold = [placement.NumNodeClasses]string{
	placement.NodeUnreachable:  "old revision: the node is unreachable, so the rolling update leaves its pod alone (a delete there would never complete)",
	placement.NodeLeaving:      "old revision: the node is leaving, so it keeps its old pod to the end",
	placement.NodeShuttingDown: "old revision: the node is shutting down; no pod is made or replaced there",
}

// holdReason says why a pod may still run an old revision, from the
// strategy as the controller reads it (placement.UpdateStrategy).
func holdReason(ds *everynodev1alpha1.DaemonSet) string {
	s := placement.UpdateStrategy(ds)
	switch {
	case !s.RollingUpdate():
		return "old revision: updateStrategy " + string(s.Type) + " replaces a pod only when it is deleted"
	case s.Paused:
		return "old revision: the rollout is paused"
	case s.NodeSelector != nil:
		return "old revision: outside the canary nodeSelector, or not reached yet"
	case s.Partition != nil:
		return "old revision: kept by the partition, or not reached yet"
	}
	return "old revision: not replaced yet (rolling update in progress)"
}

// reason is the node's summary line.
func reason(nr *NodeReport) string {
	switch {
	case nr.PodReady:
		return ""
	case !nr.ShouldRun && nr.Pod == "":
		return nr.Why[0]
	case !nr.ShouldRun && !nr.ShouldContinueRunning:
		return "pod must leave: " + nr.Why[0]
	case nr.Pod == "":
		return "no pod yet"
	case nr.Phase == string(corev1.PodPending) && nr.Scheduler != "":
		return "pod Pending: the scheduler cannot place it"
	case len(nr.Containers) > 0:
		return "pod " + nr.Phase + ", not ready: " + strings.Join(nr.states, "; ")
	default:
		return "pod " + nr.Phase + ", not ready"
	}
}

// newestFailures maps pod name to its newest FailedScheduling message.
func newestFailures(events []corev1.Event) map[string]string {
	type msg struct {
		at   metav1.Time
		text string
	}
	newest := map[string]msg{}
	for _, ev := range events {
		if ev.Reason != "FailedScheduling" || ev.InvolvedObject.Kind != "Pod" {
			continue
		}
		at := ev.LastTimestamp
		if at.IsZero() {
			at = metav1.NewTime(ev.EventTime.Time)
		}
		if cur, ok := newest[ev.InvolvedObject.Name]; !ok || cur.at.Before(&at) {
			newest[ev.InvolvedObject.Name] = msg{at, ev.Message}
		}
	}
	out := make(map[string]string, len(newest))
	for name, m := range newest {
		out[name] = m.text
	}
	return out
}

// describeSize fills the node's size under spec.nodeSizing and how its
// pod (nil if none) stands against it, as the controller judges it
// (placement.ResizeStateOf, placement.ResizeNeed).
func describeSize(nr *NodeReport, ds *everynodev1alpha1.DaemonSet, node *corev1.Node, pod *corev1.Pod) {
	size := placement.SizeOf(ds.Spec.NodeSizing, node)
	nr.Size = placement.DescribeSize(size)
	if !size.Fits() {
		nr.SizeState = "does not fit: " + strings.Join(size.DoesNotFit, ", ") + "; the pod keeps its size"
		return
	}
	if pod == nil {
		return
	}
	state, msg := placement.ResizeStateOf(pod, size)
	switch {
	case state == placement.ResizeInfeasible:
		nr.SizeState = "resize refused by the kubelet (" + msg + "): the pod is recreated"
	case state == placement.ResizeInFlight:
		nr.SizeState = "resizing"
	default:
		switch placement.ResizeNeed(pod, size) {
		case placement.NeedNothing:
			nr.SizeState = "sized"
		case placement.NeedResize:
			nr.SizeState = "waiting to be resized in place (at most maxUnavailable pods resize at once)"
		default:
			nr.SizeState = "to be recreated: an extended resource changes, which no resize may change"
		}
	}
}
