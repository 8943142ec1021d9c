package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
	"everynode.io/everynode/placement/revision"
)

// constructHistory returns the set's current revision, creating it if the
// template is new, and the older ones, from revs, the revisions the set
// controls (claimRevisions), as upstream: a revision that matches the set
// (a rollback to an earlier template) is reused with its number raised
// above all others, and duplicates of the current one are merged.
func (c *Controller) constructHistory(ctx context.Context, ds *everynodev1alpha1.DaemonSet, revs []*appsv1.ControllerRevision) (cur *appsv1.ControllerRevision, old []*appsv1.ControllerRevision, err error) {
	want, err := revision.Data(ds)
	if err != nil {
		return nil, nil, err
	}
	var current []*appsv1.ControllerRevision
	key := cache.MetaObjectToName(ds)
	known := c.state.canonicalRevisions(key)
	canonical := make(map[types.UID]struct{}, len(revs))
	defer func() { c.state.setCanonicalRevisions(key, canonical) }()
	for _, rev := range revs {
		if _, ok := rev.Labels[revision.HashLabel]; !ok {
			// Written by someone else: label it by name, as upstream, so
			// pods and cleanup can refer to it.
			toUpdate := rev.DeepCopy()
			if toUpdate.Labels == nil {
				toUpdate.Labels = map[string]string{}
			}
			toUpdate.Labels[revision.HashLabel] = toUpdate.Name
			if rev, err = c.kubeClient.AppsV1().ControllerRevisions(ds.Namespace).Update(ctx, toUpdate, metav1.UpdateOptions{}); err != nil {
				return nil, nil, fmt.Errorf("label ControllerRevision %s: %w", toUpdate.Name, err)
			}
		}
		if _, ok := known[rev.UID]; !ok && !revision.IsCanonical(rev.Data.Raw) {
			if rev, err = c.replaceWithCanonical(ctx, rev); err != nil {
				return nil, nil, err
			}
		}
		canonical[rev.UID] = struct{}{}
		if revision.MatchData(want, rev.Data.Raw) {
			current = append(current, rev)
		} else {
			old = append(old, rev)
		}
	}

	next := revision.MaxRevision(old) + 1
	if len(current) == 0 {
		cur, err = c.snapshot(ctx, ds, next)
		if err != nil {
			return nil, nil, err
		}
		return cur, old, nil
	}
	cur, err = c.dedupCurrent(ctx, ds, current)
	if err != nil {
		return nil, nil, err
	}
	cause, hasCause := ds.Annotations[everynodev1alpha1.AnnotationChangeCause]
	if cur.Revision < next || (hasCause && cur.Annotations[everynodev1alpha1.AnnotationChangeCause] != cause) {
		// A rollback to this template (or a new change-cause for it): it
		// becomes the newest revision again, as upstream, and tells
		// `rollout history` why.
		toUpdate := cur.DeepCopy()
		toUpdate.Revision = max(cur.Revision, next)
		if hasCause {
			if toUpdate.Annotations == nil {
				toUpdate.Annotations = map[string]string{}
			}
			toUpdate.Annotations[everynodev1alpha1.AnnotationChangeCause] = cause
		}
		cur, err = c.kubeClient.AppsV1().ControllerRevisions(ds.Namespace).Update(ctx, toUpdate, metav1.UpdateOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("raise revision of ControllerRevision %s to %d: %w", toUpdate.Name, toUpdate.Revision, err)
		}
	}
	return cur, old, nil
}

// replaceWithCanonical replaces a revision whose data is not in canonical
// form (everynode before v0.3 wrote struct order) by one with the same
// name, labels, owner, number and content in canonical form, so the
// garbage collector can orphan it (package revision says why). Data is
// immutable, hence delete and create. The name and the hash label stay, so
// no pod changes revision and no rolling update starts. Between the two
// requests the revision exists nowhere but in this call: should the
// process die there, a current revision is made again from the set, an
// old one is lost from history (one request's window, once per revision).
func (c *Controller) replaceWithCanonical(ctx context.Context, rev *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	raw, err := revision.Canonical(rev.Data.Raw)
	if err != nil {
		// Not JSON: nothing to keep, and it matches no template. Leave it
		// to the history limit.
		return rev, nil
	}
	revs := c.kubeClient.AppsV1().ControllerRevisions(rev.Namespace)
	uid, rv := rev.UID, rev.ResourceVersion
	err = revs.Delete(ctx, rev.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("delete ControllerRevision %s to store its data in canonical form: %w", rev.Name, err)
	}
	fresh := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            rev.Name,
			Namespace:       rev.Namespace,
			Labels:          rev.Labels,
			Annotations:     rev.Annotations,
			OwnerReferences: rev.OwnerReferences,
		},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: rev.Revision,
	}
	created, err := revs.Create(ctx, fresh, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create ControllerRevision %s again with its data in canonical form: %w", rev.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Stored ControllerRevision data in canonical form", "controllerRevision", klog.KObj(created), "revision", created.Revision)
	return created, nil
}

// dedupCurrent keeps the highest-numbered of several revisions with the
// current template, relabels the pods of the others to its hash and deletes
// them, as upstream dedupCurHistories.
func (c *Controller) dedupCurrent(ctx context.Context, ds *everynodev1alpha1.DaemonSet, current []*appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	if len(current) == 1 {
		return current[0], nil
	}
	keep := current[0]
	for _, rev := range current[1:] {
		if rev.Revision >= keep.Revision {
			keep = rev
		}
	}
	keepHash := keep.Labels[revision.HashLabel]
	pods, err := c.podsOfSet(ds)
	if err != nil {
		return nil, err
	}
	dup := make(map[string]bool, len(current))
	for _, rev := range current {
		if rev.Name != keep.Name {
			dup[rev.Labels[revision.HashLabel]] = true
		}
	}
	for _, pod := range pods {
		if h := pod.Labels[revision.HashLabel]; h == keepHash || !dup[h] {
			continue
		}
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, revision.HashLabel, keepHash)
		if _, err := c.kubeClient.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("relabel pod %s/%s to revision %s: %w", pod.Namespace, pod.Name, keepHash, err)
		}
	}
	for _, rev := range current {
		if rev.Name == keep.Name {
			continue
		}
		if err := c.kubeClient.AppsV1().ControllerRevisions(ds.Namespace).Delete(ctx, rev.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete duplicate ControllerRevision %s: %w", rev.Name, err)
		}
	}
	return keep, nil
}

// snapshot creates the revision of the set's current template. When the
// name is taken by a revision with other data (a hash collision, or the
// revision of an earlier set of the same name), it raises
// status.collisionCount, which changes the hash, and returns an error so the
// sync is retried with the new count, as upstream.
func (c *Controller) snapshot(ctx context.Context, ds *everynodev1alpha1.DaemonSet, number int64) (*appsv1.ControllerRevision, error) {
	hash := revision.HashOf(ds)
	rev, err := revision.New(ds, hash, number)
	if err != nil {
		return nil, err
	}
	created, err := c.kubeClient.AppsV1().ControllerRevisions(ds.Namespace).Create(ctx, rev, metav1.CreateOptions{})
	if err == nil {
		klog.FromContext(ctx).V(2).Info("Created ControllerRevision", "daemonset", klog.KObj(ds), "controllerRevision", klog.KObj(created), "revision", number)
		return created, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create ControllerRevision %s: %w", rev.Name, err)
	}
	existing, getErr := c.kubeClient.AppsV1().ControllerRevisions(ds.Namespace).Get(ctx, rev.Name, metav1.GetOptions{})
	if getErr != nil {
		return nil, fmt.Errorf("get ControllerRevision %s after conflict: %w", rev.Name, getErr)
	}
	if ref := c.sets.ownerRef(existing); ref != nil && ref.UID == ds.UID && revision.MatchData(rev.Data.Raw, existing.Data.Raw) {
		// Ours, made by an earlier sync the informer has not shown yet.
		// The owner is of the set's own kind: an apps/v1 set's revisions
		// name the apps/v1 set.
		return existing, nil
	}
	// A true collision. Raise the count on a fresh copy so a stale cache
	// never raises it twice.
	fresh, getErr := c.sets.getLive(ctx, ds.Namespace, ds.Name)
	if getErr != nil {
		return nil, fmt.Errorf("get DaemonSet %s/%s to raise collisionCount: %w", ds.Namespace, ds.Name, getErr)
	}
	if fresh.UID != ds.UID {
		return nil, fmt.Errorf("DaemonSet %s/%s was replaced while syncing", ds.Namespace, ds.Name)
	}
	if !equalCount(fresh.Status.CollisionCount, ds.Status.CollisionCount) {
		return nil, fmt.Errorf("stale collisionCount of DaemonSet %s/%s (cache %v, server %v); retrying", ds.Namespace, ds.Name,
			countString(ds.Status.CollisionCount), countString(fresh.Status.CollisionCount))
	}
	count := int32(0)
	if fresh.Status.CollisionCount != nil {
		count = *fresh.Status.CollisionCount
	}
	count++
	fresh.Status.CollisionCount = &count
	if _, err := c.sets.writeStatus(ctx, fresh); err != nil {
		return nil, fmt.Errorf("raise collisionCount of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	c.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonRevisionCollision,
		"ControllerRevision %s exists with other data; collisionCount raised to %d", rev.Name, count)
	return nil, fmt.Errorf("ControllerRevision name %s collides; raised collisionCount of %s/%s to %d, retrying", rev.Name, ds.Namespace, ds.Name, count)
}

func equalCount(a, b *int32) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func countString(c *int32) string {
	if c == nil {
		return "<nil>"
	}
	return fmt.Sprint(*c)
}

// cleanupHistory deletes the oldest revisions beyond
// spec.revisionHistoryLimit, never one whose hash a pod of the set still
// carries (terminating and finished pods included, as upstream).
func (c *Controller) cleanupHistory(ctx context.Context, ds *everynodev1alpha1.DaemonSet, old []*appsv1.ControllerRevision, pods []*corev1.Pod) error {
	keep := placement.RevisionHistoryLimit(ds)
	if len(old) <= keep {
		return nil
	}
	live := make(map[string]bool)
	for _, pod := range pods {
		if h := pod.Labels[revision.HashLabel]; h != "" {
			live[h] = true
		}
	}
	for _, rev := range revision.ToDelete(old, keep, live) {
		if err := c.kubeClient.AppsV1().ControllerRevisions(ds.Namespace).Delete(ctx, rev.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete old ControllerRevision %s: %w", rev.Name, err)
		}
		klog.FromContext(ctx).V(2).Info("Deleted old ControllerRevision", "daemonset", klog.KObj(ds), "controllerRevision", klog.KObj(rev), "revision", rev.Revision)
	}
	return nil
}
