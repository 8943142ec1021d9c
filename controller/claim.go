package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"

	"everynode.io/everynode/controller/plan"
)

// Adoption and release follow upstream's ControllerRefManager (ClaimPods,
// ClaimControllerRevisions):
//   - an object that matches the set's selector and has no controlling
//     owner is adopted: the set becomes its controller. This is how
//     `kubectl delete eds x --cascade=orphan` followed by creating x again
//     (the way around an immutable selector) hands the running pods and
//     the history to the new set instead of doubling every pod;
//   - an object the set controls that no longer matches is released, and
//     the set makes a new pod for that node;
//   - an object another controller owns is never touched;
//   - before the first adoption of a sync the set is read from the API
//     server, not the cache: a set being deleted must not adopt (the
//     garbage collector would delete what it just took).
//
// An adopted pod keeps its labels, its revision hash among them. The set's
// current revision is found by content, not by name (constructHistory), so
// a pod made from the same template counts as updated and adoption starts
// no rolling update.
//
// Both are strategic merge patches that carry the object's UID: the API
// server refuses the patch if the object was replaced by another of the
// same name, since the UID cannot change.

// adoption holds the uncached check of one sync, made at most once.
type adoption struct {
	c       *Controller
	ds      *everynodev1alpha1.DaemonSet
	checked bool
	err     error
}

// allowed reports whether the set may adopt: it still exists with the same
// UID and is not being deleted.
func (a *adoption) allowed(ctx context.Context) error {
	if a.checked {
		return a.err
	}
	a.checked = true
	fresh, err := a.c.sets.getLive(ctx, a.ds.Namespace, a.ds.Name)
	switch {
	case err != nil:
		a.err = fmt.Errorf("get DaemonSet %s/%s before adopting: %w", a.ds.Namespace, a.ds.Name, err)
	case fresh.UID != a.ds.UID:
		a.err = fmt.Errorf("DaemonSet %s/%s was replaced (UID %s, cached %s); not adopting", a.ds.Namespace, a.ds.Name, fresh.UID, a.ds.UID)
	case fresh.DeletionTimestamp != nil:
		a.err = fmt.Errorf("DaemonSet %s/%s is being deleted; not adopting", a.ds.Namespace, a.ds.Name)
	}
	return a.err
}

func setSelector(ds *everynodev1alpha1.DaemonSet) (labels.Selector, error) {
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	return sel, nil
}

// adoptPatch makes the set the controller of the object with uid.
func adoptPatch(ds *everynodev1alpha1.DaemonSet, uid types.UID) ([]byte, error) {
	ref := placement.NewControllerRef(ds)
	return json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{
		"ownerReferences": []metav1.OwnerReference{ref},
		"uid":             uid,
	}})
}

// releasePatch removes the set's owner reference from the object with uid.
func releasePatch(ds *everynodev1alpha1.DaemonSet, uid types.UID) ([]byte, error) {
	return json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{
		"ownerReferences": []map[string]interface{}{{"$patch": "delete", "uid": ds.UID}},
		"uid":             uid,
	}})
}

// gone reports errors after which there is nothing left to claim or
// release: the object was deleted, or replaced by one with another UID.
func gone(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err)
}

// releasePods releases the pods of the view the set controls but no
// longer selects (View.Unselected). It works on the
// sync's view, read once, rather than a read of its own: a release waits
// for nothing, so it needs no read before the expectations.
func (c *Controller) releasePods(ctx context.Context, v *plan.View) error {
	var errs []error
	for _, pod := range v.Unselected() {
		if err := c.patchPodOwner(ctx, v.DS, pod.Pod, releasePatch); err != nil && !gone(err) {
			errs = append(errs, fmt.Errorf("release pod %s/%s: %w", pod.Namespace, pod.Name, err))
			continue
		}
		klog.FromContext(ctx).V(2).Info("Released pod that no longer matches the selector", "pod", klog.KObj(pod.Pod))
	}
	return errors.Join(errs...)
}

// adoptPods adopts the orphaned pods sel selects. Each adoption is
// expected like a creation on the pod's node, so the sync that adopted
// (and those after it) do not act on that node before the informer shows
// the pod as the set's: it would make a second pod there.
func (c *Controller) adoptPods(ctx context.Context, ds *everynodev1alpha1.DaemonSet, sel labels.Selector, adopt *adoption) error {
	var errs []error
	orphans, err := c.podIndexer.ByIndex(orphanDaemonPodsByNamespace, ds.Namespace)
	if err != nil {
		return fmt.Errorf("list orphaned pods in %s: %w", ds.Namespace, err)
	}
	key := cache.MetaObjectToName(ds)
	for _, obj := range orphans {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.DeletionTimestamp != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if err := adopt.allowed(ctx); err != nil {
			return errors.Join(append(errs, err)...)
		}
		node, hasNode := placement.TargetNode(pod)
		if hasNode {
			c.state.expectCreations(key, []string{node})
		}
		if err := c.patchPodOwner(ctx, ds, pod, adoptPatch); err != nil {
			if hasNode {
				// Never coming as an adoption: do not wait for it.
				c.state.creationObserved(key, node)
			}
			if !gone(err) {
				errs = append(errs, fmt.Errorf("adopt pod %s/%s: %w", pod.Namespace, pod.Name, err))
			}
			continue
		}
		if hasNode && c.cachedAsAdopted(ds, pod) {
			// The cache shows the adoption already: its event came, and
			// may have come before this expectation was raised (the pod
			// was listed from a cache that lagged, an earlier sync's
			// adoption showed meanwhile, and this patch changed nothing,
			// so no event follows). Waiting would hold the set until the
			// expectations' TTL.
			c.state.creationObserved(key, node)
		}
		klog.FromContext(ctx).V(2).Info("Adopted orphaned pod", "pod", klog.KObj(pod), "node", node)
	}
	return errors.Join(errs...)
}

// cachedAsAdopted reports whether the informer's cache shows pod
// controlled by ds.
func (c *Controller) cachedAsAdopted(ds *everynodev1alpha1.DaemonSet, pod *corev1.Pod) bool {
	obj, ok, err := c.podIndexer.GetByKey(cache.MetaObjectToName(pod).String())
	if err != nil || !ok {
		return false
	}
	cur, ok := obj.(*corev1.Pod)
	if !ok {
		return false
	}
	ref := metav1.GetControllerOf(cur)
	return ref != nil && ref.UID == ds.UID
}

func (c *Controller) patchPodOwner(ctx context.Context, ds *everynodev1alpha1.DaemonSet, pod *corev1.Pod, patch func(*everynodev1alpha1.DaemonSet, types.UID) ([]byte, error)) error {
	body, err := patch(ds, pod.UID)
	if err != nil {
		return err
	}
	_, err = c.kubeClient.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{})
	return err
}

// claimRevisions returns the revisions the set controls after adopting its
// orphaned ones and releasing those it no longer selects. Adopted revisions
// are returned as the API server answered, since the cache shows them as
// the set's only later.
func (c *Controller) claimRevisions(ctx context.Context, ds *everynodev1alpha1.DaemonSet, sel labels.Selector, adopt *adoption) ([]*appsv1.ControllerRevision, error) {
	owned, err := c.revisionsOfSet(ds)
	if err != nil {
		return nil, err
	}
	revs := c.kubeClient.AppsV1().ControllerRevisions(ds.Namespace)
	claimed := make([]*appsv1.ControllerRevision, 0, len(owned))
	for _, rev := range owned {
		if sel.Matches(labels.Set(rev.Labels)) {
			claimed = append(claimed, rev)
			continue
		}
		body, err := releasePatch(ds, rev.UID)
		if err != nil {
			return nil, err
		}
		if _, err := revs.Patch(ctx, rev.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{}); err != nil && !gone(err) {
			return nil, fmt.Errorf("release ControllerRevision %s: %w", rev.Name, err)
		}
	}
	orphans, err := c.revIndexer.ByIndex(orphanRevisionsByNamespace, ds.Namespace)
	if err != nil {
		return nil, fmt.Errorf("list orphaned ControllerRevisions in %s: %w", ds.Namespace, err)
	}
	for _, obj := range orphans {
		rev, ok := obj.(*appsv1.ControllerRevision)
		if !ok || rev.DeletionTimestamp != nil || !sel.Matches(labels.Set(rev.Labels)) {
			continue
		}
		if err := adopt.allowed(ctx); err != nil {
			return nil, err
		}
		body, err := adoptPatch(ds, rev.UID)
		if err != nil {
			return nil, err
		}
		adopted, err := revs.Patch(ctx, rev.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{})
		if gone(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("adopt ControllerRevision %s: %w", rev.Name, err)
		}
		klog.FromContext(ctx).V(2).Info("Adopted orphaned ControllerRevision", "controllerRevision", klog.KObj(rev), "revision", rev.Revision)
		claimed = append(claimed, adopted)
	}
	return claimed, nil
}

// setsSelecting returns the sets in namespace whose selector matches lbls:
// the candidates to adopt an orphan with these labels.
func (c *Controller) setsSelecting(namespace string, lbls map[string]string) []*everynodev1alpha1.DaemonSet {
	sets, err := c.sets.list(namespace)
	if err != nil {
		return nil
	}
	var out []*everynodev1alpha1.DaemonSet
	for _, ds := range sets {
		sel, err := setSelector(ds)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(lbls)) {
			continue
		}
		out = append(out, ds)
	}
	return out
}
