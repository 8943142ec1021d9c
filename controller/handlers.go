package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// addEventHandlers wires the informers to the queues. Every handler is
// cheap: it resolves at most the owner of one object, or the pods of one
// node through the index, and enqueues.
func (c *Controller) addEventHandlers(ctx context.Context, cfg Config) error {
	logger := klog.FromContext(ctx)
	if err := c.handle(c.sets.informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.addSet(logger, obj) },
		UpdateFunc: func(old, cur interface{}) { c.updateSet(logger, old, cur) },
		DeleteFunc: func(obj interface{}) { c.deleteSet(logger, obj) },
	}); err != nil {
		return fmt.Errorf("add DaemonSet event handler: %w", err)
	}
	if err := c.handle(cfg.Pods.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.addPod(logger, obj) },
		UpdateFunc: func(old, cur interface{}) { c.updatePod(logger, old, cur) },
		DeleteFunc: func(obj interface{}) { c.deletePod(logger, obj) },
	}); err != nil {
		return fmt.Errorf("add pod event handler: %w", err)
	}
	if err := c.handle(cfg.Nodes.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.addNode(logger, obj) },
		UpdateFunc: func(old, cur interface{}) { c.updateNode(logger, old, cur) },
		DeleteFunc: func(obj interface{}) { c.deleteNode(logger, obj) },
	}); err != nil {
		return fmt.Errorf("add node event handler: %w", err)
	}
	if cfg.DaemonSets != nil {
		// Start order: only everynode sets have spec.startAfter.
		if err := c.handle(cfg.Pods.Informer(), c.startOrderPodHandler(logger)); err != nil {
			return fmt.Errorf("add start-order pod event handler: %w", err)
		}
		if err := c.handle(c.sets.informer(), c.startOrderSetHandler(logger, c.setStartKeys)); err != nil {
			return fmt.Errorf("add start-order set event handler: %w", err)
		}
		if c.appsPodIndexer != nil {
			if err := c.handle(cfg.StartAfterPods.Informer(), c.startOrderPodHandler(logger)); err != nil {
				return fmt.Errorf("add start-order apps pod event handler: %w", err)
			}
			if err := c.handle(cfg.StartAfterSets.Informer(), c.startOrderSetHandler(logger, appsStartKeys)); err != nil {
				return fmt.Errorf("add start-order apps DaemonSet event handler: %w", err)
			}
		}
	}
	if cfg.DaemonSets != nil && c.sliceIndexer != nil {
		// inPlaceGatePolicy IfServed: only everynode sets update in place.
		if err := c.handle(cfg.EndpointSlices.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj interface{}) { c.addSlice(logger, obj) },
			UpdateFunc: func(old, cur interface{}) { c.updateSlice(logger, old, cur) },
		}); err != nil {
			return fmt.Errorf("add EndpointSlice event handler: %w", err)
		}
	}
	if err := c.handle(cfg.Revisions.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.addRevision(logger, obj) },
		UpdateFunc: func(old, cur interface{}) { c.updateRevision(logger, old, cur) },
		DeleteFunc: func(obj interface{}) { c.deleteRevision(logger, obj) },
	}); err != nil {
		return fmt.Errorf("add ControllerRevision event handler: %w", err)
	}
	return nil
}

// handle adds h to informer and remembers the registration, which Run
// removes when it returns: a controller that lost the leader Lease must
// leave no handler behind on the shared informers, which keep serving the
// webhooks and the extender.
func (c *Controller) handle(informer cache.SharedIndexInformer, h cache.ResourceEventHandler) error {
	reg, err := informer.AddEventHandler(h)
	if err != nil {
		return err
	}
	c.handlers = append(c.handlers, registeredHandler{informer, reg})
	return nil
}

// registeredHandler is one event handler the controller added.
type registeredHandler struct {
	informer     cache.SharedIndexInformer
	registration cache.ResourceEventHandlerRegistration
}

// removeHandlers undoes handle.
func (c *Controller) removeHandlers() error {
	var errs []error
	for _, h := range c.handlers {
		errs = append(errs, h.informer.RemoveEventHandler(h.registration))
	}
	c.handlers = nil
	return errors.Join(errs...)
}

// fromTombstone unwraps the object of a delete event whose final state the
// informer missed.
func fromTombstone[T any](obj interface{}) (T, bool) {
	if t, ok := obj.(T); ok {
		return t, true
	}
	var zero T
	tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("unexpected object in delete event: %T", obj))
		return zero, false
	}
	t, ok := tombstone.Obj.(T)
	if !ok {
		utilruntime.HandleError(fmt.Errorf("unexpected object in tombstone %s: %T", tombstone.Key, tombstone.Obj))
		return zero, false
	}
	return t, true
}

func (c *Controller) addSet(logger klog.Logger, obj interface{}) {
	ds, ok := c.sets.fromCache(obj)
	if !ok {
		return
	}
	logger.V(4).Info("Adding DaemonSet", "daemonset", klog.KObj(ds))
	c.enqueue(ds)
}

func (c *Controller) updateSet(logger klog.Logger, old, cur interface{}) {
	oldDS, ok1 := c.sets.fromCache(old)
	curDS, ok2 := c.sets.fromCache(cur)
	if !ok1 || !ok2 {
		return
	}
	if oldDS.UID != curDS.UID {
		// Deleted and recreated between two events: the old set's pending
		// pods are not the new one's.
		c.state.forget(cache.MetaObjectToName(oldDS))
	}
	logger.V(4).Info("Updating DaemonSet", "daemonset", klog.KObj(curDS))
	c.enqueue(curDS)
}

func (c *Controller) deleteSet(logger klog.Logger, obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	ds, ok := c.sets.fromCache(obj)
	if !ok {
		return
	}
	logger.V(4).Info("Deleting DaemonSet", "daemonset", klog.KObj(ds))
	// Its pods and revisions go with the garbage collector (owner
	// references); only our own memory of it must go.
	c.state.forget(cache.MetaObjectToName(ds))
	c.enqueue(ds)
}

// resolveOwner returns the set that controls obj, or nil if none does: the
// controller reference must name an existing set with the same UID.
func (c *Controller) resolveOwner(obj metav1.Object) *everynodev1alpha1.DaemonSet {
	ref := c.sets.ownerRef(obj)
	if ref == nil {
		return nil
	}
	ds, err := c.sets.get(obj.GetNamespace(), ref.Name)
	if err != nil || ds.UID != ref.UID {
		return nil
	}
	return ds
}

func (c *Controller) addPod(logger klog.Logger, obj interface{}) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !placement.IsDaemonPod(pod) {
		return
	}
	if pod.DeletionTimestamp != nil {
		// Seen for the first time already terminating (after a restart):
		// never a creation we wait for.
		c.deletePod(logger, pod)
		return
	}
	if placement.SetRef(pod) == nil {
		c.enqueueAdopters(logger, pod)
		return
	}
	ds := c.resolveOwner(pod)
	if ds == nil {
		return
	}
	completed := false
	if node, ok := placement.TargetNode(pod); ok {
		completed = c.state.creationObserved(cache.MetaObjectToName(ds), node)
	}
	logger.V(4).Info("Pod added", "pod", klog.KObj(pod), "daemonset", klog.KObj(ds))
	c.enqueueForPod(ds, completed, false)
}

func (c *Controller) updatePod(logger klog.Logger, old, cur interface{}) {
	oldPod, ok1 := old.(*corev1.Pod)
	curPod, ok2 := cur.(*corev1.Pod)
	if !ok1 || !ok2 || curPod.ResourceVersion == oldPod.ResourceVersion {
		// A resync, not a change.
		return
	}
	if !placement.IsDaemonPod(curPod) && !placement.IsDaemonPod(oldPod) {
		return
	}
	if curPod.DeletionTimestamp != nil {
		// A graceful delete starts: act now rather than when the kubelet
		// finishes, as upstream.
		c.deletePod(logger, curPod)
		return
	}
	oldRef, curRef := c.sets.ownerRef(oldPod), c.sets.ownerRef(curPod)
	if oldDS := c.resolveOwner(oldPod); oldDS != nil && (!placement.IsDaemonPod(curPod) || curRef == nil || curRef.UID != oldDS.UID) {
		// The pod left the set (label or owner removed): the set must
		// notice.
		c.enqueue(oldDS)
	}
	if !placement.IsDaemonPod(curPod) {
		return
	}
	if placement.SetRef(curPod) == nil {
		// Orphaned (the set was deleted with --cascade=orphan, or released
		// it): a set that selects it may adopt it.
		c.enqueueAdopters(logger, curPod)
		return
	}
	ds := c.resolveOwner(curPod)
	if ds == nil {
		return
	}
	completed := false
	if placement.RevisionHash(oldPod) != placement.RevisionHash(curPod) || gateOpened(oldPod, curPod) || startGateRemoved(oldPod, curPod) ||
		(len(ds.Spec.NodeSizing) > 0 && resized(oldPod, curPod)) {
		// An in-place update (or a hash relabel) shows, or an opening of
		// the in-place gate (openGates expects both alike), or the
		// removal of the start-after gate (removeStartGates), or a resize
		// (resize).
		completed = c.state.updateObserved(cache.MetaObjectToName(ds), cache.MetaObjectToName(curPod).String())
	}
	if gateClosed(oldPod, curPod) {
		// A closing of the gate after a patch (closeLateGates); the one
		// before a patch was not expected under this key.
		completed = c.state.updateObserved(cache.MetaObjectToName(ds), gateClosingKey(cache.MetaObjectToName(curPod).String())) || completed
	}
	if oldRef == nil {
		// An adoption shows: adoptPods expected it like a creation.
		if node, ok := placement.TargetNode(curPod); ok {
			completed = c.state.creationObserved(cache.MetaObjectToName(ds), node) || completed
		}
	}
	logger.V(4).Info("Pod updated", "pod", klog.KObj(curPod), "daemonset", klog.KObj(ds))
	c.enqueueForPod(ds, completed, ds.Spec.MinReadySeconds == 0 && turnedReady(oldPod, curPod))
	if ds.Spec.NodeReadinessGate && placement.StartupTaint() != "" && !placement.IsPodReady(oldPod) && placement.IsPodReady(curPod) {
		// A gated pod turning Ready may free its node of the startup taint.
		if node, ok := placement.TargetNode(curPod); ok {
			c.nodeQueue.Add(node)
		}
	}
	if ds.Spec.MinReadySeconds > 0 && !placement.IsPodReady(oldPod) && placement.IsPodReady(curPod) {
		// Sync again once the pod has been ready long enough to count as
		// available; the extra second absorbs clock skew (upstream #39785).
		c.enqueueAfter(ds, time.Duration(ds.Spec.MinReadySeconds)*time.Second+time.Second)
	}
}

// turnedReady reports whether cur shows the pod, or its containers,
// turning ready since old. The containers count for a pod updated in
// place behind its readiness gate: their turning ready is what opens the
// gate, and the gate's opening is what makes the pod Ready.
func turnedReady(old, cur *corev1.Pod) bool {
	for _, t := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
		if !placement.ConditionTrue(old, t) && placement.ConditionTrue(cur, t) {
			return true
		}
	}
	return false
}

// gateOpened reports whether cur shows the pod's in-place gate open where
// old did not.
func gateOpened(old, cur *corev1.Pod) bool {
	return !placement.ConditionReady(placement.InPlaceGateCondition(old)) && placement.ConditionReady(placement.InPlaceGateCondition(cur))
}

// gateClosed reports whether cur shows the pod's in-place gate closed
// where old showed it open.
func gateClosed(old, cur *corev1.Pod) bool {
	return placement.ConditionReady(placement.InPlaceGateCondition(old)) && !placement.ConditionReady(placement.InPlaceGateCondition(cur))
}

func (c *Controller) deletePod(logger klog.Logger, obj interface{}) {
	pod, ok := fromTombstone[*corev1.Pod](obj)
	if !ok || !placement.IsDaemonPod(pod) {
		return
	}
	ds := c.resolveOwner(pod)
	if ds == nil {
		return
	}
	completed := c.state.deletionObserved(cache.MetaObjectToName(ds), cache.MetaObjectToName(pod).String())
	logger.V(4).Info("Pod deleted", "pod", klog.KObj(pod), "daemonset", klog.KObj(ds))
	c.enqueueForPod(ds, completed, false)
}

// addRevision wakes the sets that may adopt an orphaned revision. A
// revision with an owner is the set's own doing and needs no sync.
func (c *Controller) addRevision(logger klog.Logger, obj interface{}) {
	if rev, ok := obj.(*appsv1.ControllerRevision); ok && placement.SetRef(rev) == nil {
		c.enqueueAdopters(logger, rev)
	}
}

func (c *Controller) updateRevision(logger klog.Logger, old, cur interface{}) {
	oldRev, ok1 := old.(*appsv1.ControllerRevision)
	curRev, ok2 := cur.(*appsv1.ControllerRevision)
	if !ok1 || !ok2 || oldRev.ResourceVersion == curRev.ResourceVersion {
		return
	}
	if placement.SetRef(curRev) == nil {
		c.enqueueAdopters(logger, curRev)
	}
	for _, r := range []*appsv1.ControllerRevision{oldRev, curRev} {
		if ds := c.resolveOwner(r); ds != nil {
			logger.V(4).Info("ControllerRevision updated", "controllerRevision", klog.KObj(r), "daemonset", klog.KObj(ds))
			c.enqueue(ds)
		}
	}
}

func (c *Controller) deleteRevision(logger klog.Logger, obj interface{}) {
	rev, ok := fromTombstone[*appsv1.ControllerRevision](obj)
	if !ok {
		return
	}
	if ds := c.resolveOwner(rev); ds != nil {
		logger.V(4).Info("ControllerRevision deleted", "controllerRevision", klog.KObj(rev), "daemonset", klog.KObj(ds))
		c.enqueue(ds)
	}
}

// enqueueAdopters queues the sets whose selector matches an orphan, as
// upstream's getPodDaemonSets: their next sync adopts it (claim.go).
// Orphans are rare (a set deleted with --cascade=orphan), so listing the
// namespace's sets here costs nothing in steady state.
func (c *Controller) enqueueAdopters(logger klog.Logger, obj metav1.Object) {
	for _, ds := range c.setsSelecting(obj.GetNamespace(), obj.GetLabels()) {
		logger.V(4).Info("Orphan found", "object", klog.KObj(obj), "daemonset", klog.KObj(ds))
		c.enqueue(ds)
	}
}

// enqueueForPod queues ds for a pod event: at once when the event completed
// the set's expectations, or showed a pod turning ready (and so available:
// the caller checks minReadySeconds) while the set's rollout waits for
// one; else after the set's pod-event delay, so that the events of a busy
// set share one sync; and while the rollout waits for free tokens, not
// before they are due (pacing.PodEventDelay).
func (c *Controller) enqueueForPod(ds *everynodev1alpha1.DaemonSet, completedExpectations, turnedReady bool) {
	key := cache.MetaObjectToName(ds)
	if d := c.state.podEventDelay(key, completedExpectations, turnedReady); d > 0 {
		c.queue.AddAfter(key, d)
		return
	}
	c.queue.Add(key)
}

// addSlice and updateSlice wake the set of each pod an EndpointSlice
// starts listing while the pod updates in place with its gate open
// (lateGateCandidate): patched while no slice listed it, under
// inPlaceGatePolicy IfServed, it now receives traffic, and the set's sync
// closes its gate (closeLateGates). Other slice events cost a pass over
// the slice's endpoints, and a cache read for each pod it starts listing;
// a slice's removal needs nothing.
func (c *Controller) addSlice(logger klog.Logger, obj interface{}) {
	if slice, ok := obj.(*discoveryv1.EndpointSlice); ok {
		c.wakeForListed(logger, nil, slice)
	}
}

func (c *Controller) updateSlice(logger klog.Logger, old, cur interface{}) {
	oldSlice, ok1 := old.(*discoveryv1.EndpointSlice)
	curSlice, ok2 := cur.(*discoveryv1.EndpointSlice)
	if ok1 && ok2 && oldSlice.ResourceVersion != curSlice.ResourceVersion {
		c.wakeForListed(logger, oldSlice, curSlice)
	}
}

// wakeForListed is addSlice and updateSlice: the pods cur lists that old
// (nil for a new slice) did not. The pod cache holds daemon pods only, so
// for nearly every endpoint of the cluster the one read is a miss; the
// old slice is read only for a pod that is a candidate.
func (c *Controller) wakeForListed(logger klog.Logger, old, cur *discoveryv1.EndpointSlice) {
	var before map[string]bool
	for i := range cur.Endpoints {
		ref := cur.Endpoints[i].TargetRef
		key, ok := endpointPodKey(cur, &cur.Endpoints[i])
		if !ok || ref.Name == "" {
			continue
		}
		ns := ref.Namespace
		if ns == "" {
			ns = cur.Namespace
		}
		obj, exists, err := c.podIndexer.GetByKey(ns + "/" + ref.Name)
		if err != nil || !exists {
			continue
		}
		pod, ok := obj.(*corev1.Pod)
		if !ok || (ref.UID != "" && ref.UID != pod.UID) || !placement.IsDaemonPod(pod) || !lateGateCandidate(pod) {
			continue
		}
		if old != nil && before == nil {
			before = make(map[string]bool, len(old.Endpoints))
			for j := range old.Endpoints {
				if k, ok := endpointPodKey(old, &old.Endpoints[j]); ok {
					before[k] = true
				}
			}
		}
		if before[key] {
			continue
		}
		if ds := c.resolveOwner(pod); ds != nil {
			logger.V(4).Info("EndpointSlice lists a pod updating in place with its gate open", "endpointSlice", klog.KObj(cur), "pod", klog.KObj(pod), "daemonset", klog.KObj(ds))
			c.enqueue(ds)
		}
	}
}
