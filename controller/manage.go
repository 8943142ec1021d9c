package controller

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"

	"everynode.io/everynode/controller/plan"
)

// manage creates the missing pods and deletes the extra, failed and
// misplaced ones over all nodes. acted reports whether it sent any request:
// v no longer shows the set's pods as they are then.
func (c *Controller) manage(ctx context.Context, v *plan.View) (acted bool, err error) {
	logger := klog.FromContext(ctx)
	ds := v.DS
	surge := v.Strategy.AllowsSurge()
	// Stuck pods are replaced only once the marker is off (fallBackFromMarker).
	marker := placement.ConfiguredDaemonResource()
	if marker == "" {
		// Pods made by an everynode with the marker on by default.
		marker = everynodev1alpha1.DefaultDaemonResource
	}
	replaceStuck := placement.DaemonResource() == ""
	var toCreate []string
	var toDelete []*corev1.Pod
	var retryIn time.Duration
	for i := range v.Nodes {
		st := &v.Nodes[i]
		p := plan.PlanNode(st, v.Hash, surge, ds.Spec.MinReadySeconds, replaceStuck, v.Now)
		if p.Create {
			toCreate = append(toCreate, st.Name)
		}
		toDelete = append(toDelete, p.Delete...)
		for _, pod := range p.Failed {
			// Deleting a failed pod is where a controller most often fights
			// a kubelet that keeps rejecting it: back off per node.
			key := failedPodBackoffKey(ds, st.Name)
			now := c.failedBackoff.Clock.Now()
			if c.failedBackoff.IsInBackOffSinceUpdate(key, now) {
				delay := c.failedBackoff.Get(key)
				logger.V(4).Info("Deleting failed daemon pod is limited by backoff", "daemonset", klog.KObj(ds),
					"pod", klog.KObj(pod), "node", klog.KRef("", st.Name), "delay", delay)
				if retryIn == 0 || delay < retryIn {
					retryIn = delay
				}
				continue
			}
			c.failedBackoff.Next(key, now)
			logger.V(2).Info("Found failed daemon pod, deleting it", "daemonset", klog.KObj(ds), "pod", klog.KObj(pod), "node", klog.KRef("", st.Name))
			c.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonFailedDaemonPod,
				"Found failed daemon pod %s/%s on node %s, will try to kill it", pod.Namespace, pod.Name, st.Name)
			toDelete = append(toDelete, pod)
		}
		for _, pod := range p.Stuck {
			logger.V(2).Info("Found daemon pod unschedulable for the marker, deleting it", "daemonset", klog.KObj(ds), "pod", klog.KObj(pod), "node", klog.KRef("", st.Name))
			c.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonUnschedulableMarkedPod,
				"Deleting daemon pod %s/%s for node %s: kube-scheduler left it Pending for want of %s, which everynode no longer puts on daemon pods; it is made again without it",
				pod.Namespace, pod.Name, st.Name, marker)
			toDelete = append(toDelete, pod)
		}
		for _, pod := range p.Succeeded {
			logger.V(2).Info("Found succeeded daemon pod, deleting it", "daemonset", klog.KObj(ds), "pod", klog.KObj(pod), "node", klog.KRef("", st.Name))
			c.recorder.Eventf(ds, corev1.EventTypeNormal, ReasonSucceededDaemonPod,
				"Found succeeded daemon pod %s/%s on node %s, will try to delete it", pod.Namespace, pod.Name, st.Name)
			toDelete = append(toDelete, pod)
		}
	}
	if retryIn > 0 {
		c.enqueueAfter(ds, retryIn)
	}
	return len(toDelete) > 0 || len(toCreate) > 0, c.syncNodes(ctx, ds, toDelete, toCreate, v.Hash)
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
