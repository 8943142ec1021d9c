package plan

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"everynode.io/everynode/placement"
)

// NodePlan is what the manage step wants done on one node.
type NodePlan struct {
	Create bool
	Delete []*corev1.Pod
	// Failed and succeeded pods are deleted too, but Failed ones only
	// outside their node's backoff, and both with an event.
	Failed    []*corev1.Pod
	Succeeded []*corev1.Pod
	// Stuck are pods kube-scheduler left Pending for want of the
	// daemon-pod marker, deleted (with an event) once the marker is off so
	// that the node gets a pod without it.
	Stuck []*corev1.Pod
}

// PlanNode decides, for one node, which pods to create and delete so the
// node runs exactly one pod of the set, as upstream podsShouldBeOnNode:
//   - should run and has no pod: create one;
//   - may keep running: drop failed and finished pods; without surge keep
//     only the oldest running pod; with surge keep at most the oldest pod of
//     each revision, and the old one only while the new one is not yet
//     available (and the old one still ready);
//   - must not run (NoExecute taint, no longer selected, node gone): delete
//     every pod.
//
// A node whose only pod is terminating gets no new pod (without surge)
// until that pod is gone, so a hostPort daemon never overlaps itself.
//
// With replaceStuck (the marker is off: the controller turned it off, or
// it was configured off), a pod the scheduler left Pending for want of the
// marker (placement.StuckForDaemonResource) is deleted like a failed one,
// and the node gets its new pod, made without the marker, once it is gone.
// With the marker on it is kept: a new pod would carry the marker too.
//
// A node shutting down (placement.NodeShuttingDown) gets no new pod: its
// kubelet rejects every pod it is given, and upstream's loop of create,
// reject, create would go on until the node is gone.
func PlanNode(st *NodeState, hash string, surge bool, minReadySeconds int32, replaceStuck bool, now time.Time) NodePlan {
	var p NodePlan
	d := st.Decision
	exists := len(st.Pods) > 0
	switch {
	case d.ShouldRun && !exists:
		p.Create = true
	case d.ShouldContinueRunning:
		var running []*DaemonPod
		for i := range st.Pods {
			pod := st.Pods[i]
			switch {
			case pod.deleting:
			case replaceStuck && pod.markerStuck:
				p.Stuck = append(p.Stuck, pod.Pod)
			case pod.phase == corev1.PodFailed:
				p.Failed = append(p.Failed, pod.Pod)
			case pod.phase == corev1.PodSucceeded:
				p.Succeeded = append(p.Succeeded, pod.Pod)
			default:
				running = append(running, pod)
			}
		}
		if !surge {
			// st.pods is oldest first, so running is too.
			if len(running) > 1 {
				for _, pod := range running[1:] {
					p.Delete = append(p.Delete, pod.Pod)
				}
			}
			break
		}
		if len(running) <= 1 {
			if len(running) == 0 && d.ShouldRun {
				p.Create = true
			}
			break
		}
		var oldestNew, oldestOld *DaemonPod
		for _, pod := range running {
			if pod.updated(hash) {
				if oldestNew == nil {
					oldestNew = pod
					continue
				}
			} else if oldestOld == nil {
				oldestOld = pod
				continue
			}
			p.Delete = append(p.Delete, pod.Pod)
		}
		if oldestNew != nil && oldestOld != nil {
			switch {
			case !oldestOld.ready():
				p.Delete = append(p.Delete, oldestOld.Pod)
			case oldestNew.available(minReadySeconds, now):
				p.Delete = append(p.Delete, oldestOld.Pod)
			}
		}
	case exists:
		for i := range st.Pods {
			if !st.Pods[i].deleting {
				p.Delete = append(p.Delete, st.Pods[i].Pod)
			}
		}
	}
	if st.Phase.Class == placement.NodeShuttingDown {
		p.Create = false
	}
	return p
}
