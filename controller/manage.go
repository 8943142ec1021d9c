package controller

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// nodePlan is what the manage step wants done on one node.
type nodePlan struct {
	create bool
	delete []*corev1.Pod
	// failed and succeeded pods are deleted too, but failed ones only
	// outside their node's backoff, and both with an event.
	failed    []*corev1.Pod
	succeeded []*corev1.Pod
}

// planNode decides, for one node, which pods to create and delete so the
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
func planNode(st *nodeState, hash string, surge bool, minReadySeconds int32, now time.Time) nodePlan {
	var p nodePlan
	d := st.decision
	exists := len(st.pods) > 0
	switch {
	case d.ShouldRun && !exists:
		p.create = true
	case d.ShouldContinueRunning:
		var running []*daemonPod
		for i := range st.pods {
			pod := st.pods[i]
			switch {
			case pod.deleting:
			case pod.phase == corev1.PodFailed:
				p.failed = append(p.failed, pod.Pod)
			case pod.phase == corev1.PodSucceeded:
				p.succeeded = append(p.succeeded, pod.Pod)
			default:
				running = append(running, pod)
			}
		}
		if !surge {
			// st.pods is oldest first, so running is too.
			if len(running) > 1 {
				for _, pod := range running[1:] {
					p.delete = append(p.delete, pod.Pod)
				}
			}
			break
		}
		if len(running) <= 1 {
			if len(running) == 0 && d.ShouldRun {
				p.create = true
			}
			break
		}
		var oldestNew, oldestOld *daemonPod
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
			p.delete = append(p.delete, pod.Pod)
		}
		if oldestNew != nil && oldestOld != nil {
			switch {
			case !oldestOld.ready():
				p.delete = append(p.delete, oldestOld.Pod)
			case oldestNew.available(minReadySeconds, now):
				p.delete = append(p.delete, oldestOld.Pod)
			}
		}
	case exists:
		for i := range st.pods {
			if !st.pods[i].deleting {
				p.delete = append(p.delete, st.pods[i].Pod)
			}
		}
	}
	return p
}

// manage creates the missing pods and deletes the extra, failed and
// misplaced ones over all nodes. acted reports whether it sent any request:
// v no longer shows the set's pods as they are then.
func (c *Controller) manage(ctx context.Context, v *setView) (acted bool, err error) {
	logger := klog.FromContext(ctx)
	ds := v.ds
	surge := v.strategy.AllowsSurge()
	var toCreate []string
	var toDelete []*corev1.Pod
	var retryIn time.Duration
	for i := range v.nodes {
		st := &v.nodes[i]
		p := planNode(st, v.hash, surge, ds.Spec.MinReadySeconds, v.now)
		if p.create {
			toCreate = append(toCreate, st.name)
		}
		toDelete = append(toDelete, p.delete...)
		for _, pod := range p.failed {
			// Deleting a failed pod is where a controller most often fights
			// a kubelet that keeps rejecting it: back off per node.
			key := failedPodBackoffKey(ds, st.name)
			now := c.failedBackoff.Clock.Now()
			if c.failedBackoff.IsInBackOffSinceUpdate(key, now) {
				delay := c.failedBackoff.Get(key)
				logger.V(4).Info("Deleting failed daemon pod is limited by backoff", "daemonset", klog.KObj(ds),
					"pod", klog.KObj(pod), "node", klog.KRef("", st.name), "delay", delay)
				if retryIn == 0 || delay < retryIn {
					retryIn = delay
				}
				continue
			}
			c.failedBackoff.Next(key, now)
			logger.V(2).Info("Found failed daemon pod, deleting it", "daemonset", klog.KObj(ds), "pod", klog.KObj(pod), "node", klog.KRef("", st.name))
			c.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonFailedDaemonPod,
				"Found failed daemon pod %s/%s on node %s, will try to kill it", pod.Namespace, pod.Name, st.name)
			toDelete = append(toDelete, pod)
		}
		for _, pod := range p.succeeded {
			logger.V(2).Info("Found succeeded daemon pod, deleting it", "daemonset", klog.KObj(ds), "pod", klog.KObj(pod), "node", klog.KRef("", st.name))
			c.recorder.Eventf(ds, corev1.EventTypeNormal, ReasonSucceededDaemonPod,
				"Found succeeded daemon pod %s/%s on node %s, will try to delete it", pod.Namespace, pod.Name, st.name)
			toDelete = append(toDelete, pod)
		}
	}
	if retryIn > 0 {
		c.enqueueAfter(ds, retryIn)
	}
	return len(toDelete) > 0 || len(toCreate) > 0, c.syncNodes(ctx, ds, toDelete, toCreate, v.hash)
}

// failedPodBackoffKey keys the failed-pod backoff by set, spec generation
// and node: a new spec gets a fresh start. Upstream uses
// status.observedGeneration, which the first status write after a spec
// change moves, restarting the backoff once; metadata.generation does not.
func failedPodBackoffKey(ds *everynodev1alpha1.DaemonSet, node string) string {
	return fmt.Sprintf("%s/%d/%s", ds.UID, ds.Generation, node)
}

// sortNodeNames sorts in place and returns names, so creations (and, in the
// rolling update, replacements) go in a stable order.
func sortNodeNames(names []string) []string {
	sort.Strings(names)
	return names
}
