package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// A set moved from apps/v1 (`kubectl everynode migrate`) finds its pods
// orphaned but unlabelled: kube-controller-manager made them, and the
// controller's pod informer selects the daemon-pod label. The set carries
// everynodev1alpha1.AnnotationAdoptUnmarkedPods; its first sync of a term
// lists those pods from the API server and labels them, and its syncs
// wait until the cache shows every one, so no node gets a second pod.
// They are orphans then, and adoptPods adopts them as any other.

// markUnmarked labels the unmarked orphans of ds once per term and
// reports whether the sync must wait for the cache to show them.
func (c *Controller) markUnmarked(ctx context.Context, ds *everynodev1alpha1.DaemonSet) (wait bool, err error) {
	key := cache.MetaObjectToName(ds)
	var done bool
	c.state.with(key, func(st *setState) { done = st.unmarked.done })
	if !done {
		if ds.Annotations[everynodev1alpha1.AnnotationAdoptUnmarkedPods] != "true" {
			return false, nil
		}
		marked, err := c.markOrphans(ctx, ds)
		if err != nil {
			return false, err
		}
		c.state.with(key, func(st *setState) {
			st.unmarked.done = true
			st.unmarked.waiting = marked
		})
	}
	var waiting []cache.ObjectName
	c.state.with(key, func(st *setState) {
		left := st.unmarked.waiting[:0]
		for _, p := range st.unmarked.waiting {
			obj, ok, _ := c.podIndexer.GetByKey(p.String())
			if pod, isPod := obj.(*corev1.Pod); !ok || !isPod || !placement.IsDaemonPod(pod) {
				left = append(left, p)
			}
		}
		st.unmarked.waiting = left
		waiting = left
	})
	return len(waiting) > 0, nil
}

// markOrphans lists, from the API server, the pods of ds's namespace that
// its selector matches, that lack the daemon-pod label and that no
// DaemonSet controls, and labels each. It returns their keys.
func (c *Controller) markOrphans(ctx context.Context, ds *everynodev1alpha1.DaemonSet) ([]cache.ObjectName, error) {
	sel, err := setSelector(ds)
	if err != nil {
		return nil, err
	}
	unmarked, err := labels.NewRequirement(everynodev1alpha1.LabelDaemonPod, selection.DoesNotExist, nil)
	if err != nil {
		return nil, err
	}
	list, err := c.kubeClient.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.Add(*unmarked).String()})
	if err != nil {
		return nil, fmt.Errorf("list the unmarked pods of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	var marked []cache.ObjectName
	for i := range list.Items {
		pod := &list.Items[i]
		if metav1.GetControllerOfNoCopy(pod) != nil || pod.DeletionTimestamp != nil {
			// Another controller's (the set being orphaned has not let go
			// yet: the next term tries again), or going.
			continue
		}
		if _, err := c.kubeClient.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, placement.MarkPatch, metav1.PatchOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("mark pod %s/%s for adoption: %w", pod.Namespace, pod.Name, err)
		}
		marked = append(marked, cache.MetaObjectToName(pod))
	}
	if len(marked) > 0 {
		klog.FromContext(ctx).Info("Marked orphaned pods for adoption", "daemonset", klog.KObj(ds), "pods", len(marked))
	}
	return marked, nil
}
