package plan

import (
	"fmt"
	"strings"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// Per-node sizing (spec.nodeSizing; the rule is placement/sizing.go).
// New pods are sized when they are made (placement.NewPodFor). A running
// pod whose node's size has changed, because the rule changed or the
// node's allocatable did, is resized in place through pods/resize: the
// same UID, its containers restarted only where their resizePolicy asks.
//
// What bounds it: at most max(maxUnavailable, 1) pods of the set are
// resizing or unavailable at once, counted as a rolling update counts its
// budget. A resize does not normally make a pod unavailable, but a
// container whose resizePolicy restarts it does, and a resize the
// kubelet cannot finish holds the pod's resources in between: bounding
// it like a rollout means a bad rule (one that starves the daemon) is
// noticed on a few nodes, not all. Then the request budget and
// burstReplicas pace it as they pace creations.

// Resize is a pod to resize in place, with the size its node gets.
type Resize struct {
	Pod  *DaemonPod
	Size placement.NodeSize
}

// Recreate is a pod no resize can size, and why.
type Recreate struct {
	Pod *DaemonPod
	Why string
	// Refused is whether the kubelet refused a resize (Infeasible): the
	// pod already holds its share of the budget.
	Refused bool
}

// ResizePlan is what one sync does about its pods' sizes.
type ResizePlan struct {
	// Resize are the pods to resize now, within the budget.
	Resize []Resize
	// Recreate are the pods to delete now, within the budget, for manage
	// to make anew at their node's size: their kubelet refused the resize
	// (PodResizePending Infeasible), or an extended resource changed,
	// which pods/resize cannot change.
	Recreate []Recreate
	// Status counts the set's pods by how their sizes stand.
	Status everynodev1alpha1.NodeSizingStatus
	// DoesNotFit names, by node, where the rule asks more than the node's
	// allocatable: "node-3 (agent: cpu 4 > allocatable 2)", in node order.
	DoesNotFit []string
}

// Sizing is PlanResize of v within ResizeBudget, worked out once per view:
// the status and the resize step of a sync both read it.
func (v *View) Sizing() *ResizePlan {
	if v.sizing == nil {
		p := PlanResize(v, ResizeBudget(v))
		v.sizing = &p
	}
	return v.sizing
}

// ResizeBudget is how many pods may be resizing or unavailable at once:
// the set's maxUnavailable, at least 1 (a set that surges, or updates
// OnDelete, still gets its sizes).
func ResizeBudget(v *View) int {
	return max(v.Policy.MaxUnavailable, 1)
}

// PlanResize compares every running pod of the set with its node's size.
// A pod that matches counts as sized; one that differs is resized, or
// recreated where no resize can do it, in node order within budget (see
// ResizeBudget). Only pods of the update revision are recreated: a new
// pod is made from it, so recreating an old pod would move its node past
// a pause or a partition; such a pod waits for the rollout. Never
// resized: pods on nodes the lifecycle rule skips (an unreachable kubelet
// cannot act on it, a leaving node keeps its pod), and pods whose node
// the rule does not fit (the resize could never finish): both wait, the
// latter named in DoesNotFit with every other node the rule does not fit
// (a new pod there stays Pending). A node the rule does not fit does not
// hold the budget: its pod is the rule's doing, reported, and resizing
// the others does not make it worse.
func PlanResize(v *View, budget int) ResizePlan {
	var p ResizePlan
	rules := v.DS.Spec.NodeSizing
	if len(rules) == 0 {
		return p
	}
	var toResize []Resize
	var toRecreate []Recreate
	busy := 0 // resizing, or unavailable, on a serving node
	for i := range v.Nodes {
		n := &v.Nodes[i]
		if n.Node == nil {
			continue
		}
		if !n.Decision.ShouldRun && len(n.Pods) == 0 {
			continue
		}
		skipped := n.Phase.Class.Skipped()
		size := placement.SizeOf(rules, n.Node)
		fits := size.Fits()
		if !fits {
			p.DoesNotFit = append(p.DoesNotFit, fmt.Sprintf("%s (%s)", n.Name, strings.Join(size.DoesNotFit, ", ")))
		}
		ready := false
		for _, pod := range n.Pods {
			if !pod.active() || pod.Spec.NodeName == "" {
				continue
			}
			ready = ready || pod.ready()
			state, msg := placement.ResizeStateOf(pod.Pod, size)
			switch state {
			case placement.ResizeInfeasible:
				p.Status.Resizing++
				if !skipped {
					busy++
					if pod.updated(v.Hash) {
						toRecreate = append(toRecreate, Recreate{Pod: pod, Why: "its kubelet refuses the resize (PodResizePending Infeasible): " + msg, Refused: true})
					}
				}
				continue
			case placement.ResizeInFlight:
				p.Status.Resizing++
				if !skipped {
					busy++
				}
				continue
			}
			switch need := placement.ResizeNeed(pod.Pod, size); {
			case need == placement.NeedNothing:
				p.Status.Sized++
			case skipped || !fits:
				p.Status.Waiting++
			case need == placement.NeedResize && !placement.ResizeSupported(pod.Pod):
				p.Status.Waiting++
				if pod.updated(v.Hash) {
					toRecreate = append(toRecreate, Recreate{Pod: pod, Why: "its kubelet reports no resources, so the API refuses to resize it (a kubelet without in-place resize)"})
				}
			case need == placement.NeedResize:
				p.Status.Waiting++
				toResize = append(toResize, Resize{Pod: pod, Size: size})
			default:
				p.Status.Waiting++
				if pod.updated(v.Hash) {
					toRecreate = append(toRecreate, Recreate{Pod: pod, Why: "its size changes an extended resource, which no resize may change"})
				}
			}
		}
		if n.Decision.ShouldRun && !skipped && fits && !ready {
			busy++
		}
	}
	p.Status.DoesNotFit = int32(len(p.DoesNotFit))
	room := budget - busy
	// A refused resize first: its pod is already counted busy, and its
	// recreation frees what the kubelet holds for it.
	for _, r := range toRecreate {
		if !r.Refused {
			if room <= 0 {
				continue
			}
			room--
		}
		p.Recreate = append(p.Recreate, r)
	}
	if room > 0 {
		p.Resize = toResize[:min(room, len(toResize))]
	}
	return p
}

// DoesNotFitMessage is the NodeSizingDoesNotFit condition's message: the
// first few nodes, and how many in all.
func DoesNotFitMessage(names []string) string {
	const show = 5
	msg := "spec.nodeSizing asks more than the node's allocatable; their pods keep their size, and a new pod there stays Pending: "
	if len(names) <= show {
		return msg + strings.Join(names, ", ")
	}
	return msg + strings.Join(names[:show], ", ") + fmt.Sprintf(" and %d more", len(names)-show)
}
