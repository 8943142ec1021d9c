package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/controller/plan"
	"everynode.io/everynode/index"
	"everynode.io/everynode/placement"
)

// Start order (spec.startAfter; the rule is placement.StartOrder, the
// decisions controller/plan's startorder.go). This file resolves a set's
// dependencies from the caches, reads their pods on one node through the
// pod indexes, removes gates, and wakes the sets that wait when a
// dependency's pod turns Ready.

const (
	// setsByStartAfter indexes everynode sets by the keys of the sets
	// they start after (placement.StartKey.String), so a dependency's pod
	// turning Ready finds the sets waiting for it in O(those sets).
	setsByStartAfter = "everynode.io/sets-by-start-after"
	// appsPodsByNode indexes the pods of apps/v1 DaemonSets (the
	// AppsPods informer) by node, so a dependency's pod on one node is
	// found in O(pods of such sets on that node).
	appsPodsByNode = "everynode.io/apps-pods-by-node"
)

func setStartAfterKeys(sets setKind) cache.IndexFunc {
	return func(obj interface{}) ([]string, error) {
		ds, ok := sets.fromCache(obj)
		if !ok {
			return nil, nil
		}
		keys := placement.StartAfterKeys(ds)
		out := make([]string, len(keys))
		for i, k := range keys {
			out[i] = k.String()
		}
		return out, nil
	}
}

// appsPodNode is the node an apps/v1 DaemonSet's pod runs on or is pinned
// to (upstream pins with the same matchFields affinity).
func appsPodNode(obj interface{}) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if pod.Spec.NodeName != "" {
		return []string{pod.Spec.NodeName}, nil
	}
	if node, ok := placement.TargetNode(pod); ok {
		return []string{node}, nil
	}
	return nil, nil
}

// startOrder is one set's dependencies as the caches show them now.
type startOrder struct {
	rule    *placement.StartOrder
	deps    []placement.StartDependency
	problem plan.StartOrderProblem
}

// resolveStartOrder looks up ds's dependencies: a missing one is reported
// (and waited for), one whose own dependencies lead back to ds closes a
// cycle (reported, and not waited for). The cost is the dependencies'
// part of the graph, not the cluster's.
func (c *Controller) resolveStartOrder(ds *everynodev1alpha1.DaemonSet) *startOrder {
	keys := placement.StartAfterKeys(ds)
	if len(keys) == 0 || placement.IsApps(ds) {
		return &startOrder{}
	}
	self := placement.SetStartKey(ds)
	so := &startOrder{deps: make([]placement.StartDependency, 0, len(keys))}
	for _, k := range keys {
		d := placement.StartDependency{Key: k, Set: c.lookupStartSet(k)}
		if k == self {
			d.Set = ds
		}
		switch {
		case d.Set == nil:
			so.problem.Missing = append(so.problem.Missing, k)
		case k.Group == everynodev1alpha1.GroupEverynode:
			first := k
			cycle := placement.StartCycle(self, func(at placement.StartKey) []placement.StartKey {
				if at == self {
					return []placement.StartKey{first}
				}
				if other := c.lookupStartSet(at); other != nil {
					return placement.StartAfterKeys(other)
				}
				return nil
			})
			if cycle != nil {
				d.Cyclic = true
				if so.problem.Cycle == nil {
					so.problem.Cycle = cycle
				}
			}
		}
		so.deps = append(so.deps, d)
	}
	so.rule = placement.NewStartOrder(so.deps)
	return so
}

// lookupStartSet returns the set k names from the caches, nil if none.
func (c *Controller) lookupStartSet(k placement.StartKey) *everynodev1alpha1.DaemonSet {
	switch k.Group {
	case everynodev1alpha1.GroupEverynode:
		if ds, err := c.sets.get(k.Namespace, k.Name); err == nil {
			return ds
		}
	case everynodev1alpha1.GroupApps:
		if c.appsSetLister == nil {
			return nil
		}
		if ds, err := c.appsSetLister.DaemonSets(k.Namespace).Get(k.Name); err == nil {
			return placement.FromApps(ds)
		}
	}
	return nil
}

// waits is the rule for one node, reading each dependency's pods there
// from the indexes.
func (so *startOrder) waits(c *Controller, node *corev1.Node) []placement.StartWait {
	if so == nil || so.rule == nil {
		return nil
	}
	return so.rule.Waits(node, func(i int) []*corev1.Pod { return c.startPodsOn(so.deps[i], node.Name) })
}

// startPodsOn returns the pods of dep on node: everynode's daemon pods from
// the node index (in takeover mode apps/v1 pods are among them), and for an
// apps/v1 dependency also the pods of the AppsPods informer.
func (c *Controller) startPodsOn(dep placement.StartDependency, node string) []*corev1.Pod {
	var out []*corev1.Pod
	add := func(indexer cache.Indexer, name string) {
		if indexer == nil {
			return
		}
		objs, err := indexer.ByIndex(name, node)
		if err != nil {
			return
		}
		for _, obj := range objs {
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				continue
			}
			if ref := metav1.GetControllerOf(pod); ref != nil && ref.UID == dep.Set.UID {
				out = append(out, pod)
			}
		}
	}
	add(c.podIndexer, index.DaemonPodsByNode)
	if dep.Key.Group == everynodev1alpha1.GroupApps {
		add(c.appsPodIndexer, appsPodsByNode)
	}
	return out
}

// gateIfWaiting gives pod the start-after gate when its node waits for a
// dependency now (plan.GateOnCreate). A node the cache does not hold is
// taken as waiting: the gate comes off at the next sync that finds it.
func (c *Controller) gateIfWaiting(so *startOrder, pod *corev1.Pod, nodeName string, node *corev1.Node) {
	if so == nil || so.rule == nil {
		return
	}
	if node == nil {
		n, err := c.nodeLister.Get(nodeName)
		if err != nil {
			placement.WithStartGate(pod)
			return
		}
		node = n
	}
	if plan.GateOnCreate(so.waits(c, node)) {
		placement.WithStartGate(pod)
	}
}

// removeStartGates removes the start-after gate of the pods whose node
// waits for nothing now (plan.PlanUngates), at most burstReplicas a sync.
// The removals are expected like in-place updates: the set is not synced
// again until the cache shows each gate gone, so no gate is removed twice.
func (c *Controller) removeStartGates(ctx context.Context, v *plan.View) error {
	if v.StartGated == 0 {
		return nil
	}
	so := c.resolveStartOrder(v.DS)
	pods := plan.PlanUngates(v, func(node *corev1.Node) []placement.StartWait { return so.waits(c, node) })
	if len(pods) == 0 {
		return nil
	}
	if err := c.writeFence(ctx); err != nil {
		return err
	}
	if len(pods) > c.burstReplicas {
		pods = pods[:c.burstReplicas]
	}
	key := cache.MetaObjectToName(v.DS)
	keys := c.expectPodUpdates(key, pods)
	klog.FromContext(ctx).V(4).Info("Removing start-after gates", "count", len(pods))
	return allAtOnce(pods, func(i int, p *plan.DaemonPod) error {
		err := c.podControl.RemoveStartGate(ctx, v.DS, p.Pod)
		if err == nil {
			return nil
		}
		c.state.updateObserved(key, keys[i])
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("remove the start-after gate of pod %s: %w", p.Name, err)
	})
}

// startGateRemoved reports whether cur shows the pod's start-after gate
// gone where old had it.
func startGateRemoved(old, cur *corev1.Pod) bool {
	return placement.HasStartGate(old) && !placement.HasStartGate(cur)
}

// enqueueDependents queues the sets that start after the set k names.
func (c *Controller) enqueueDependents(logger klog.Logger, k placement.StartKey, turnedReady bool) {
	objs, err := c.setIndexer.ByIndex(setsByStartAfter, k.String())
	if err != nil || len(objs) == 0 {
		return
	}
	for _, obj := range objs {
		if ds, ok := c.sets.fromCache(obj); ok {
			logger.V(4).Info("Dependency changed", "dependency", k.String(), "daemonset", klog.KObj(ds))
			c.enqueueForPod(ds, false, turnedReady)
		}
	}
}

// startOrderPodHandler and startOrderSetHandler wake the sets that wait
// for a dependency: when one of its pods turns Ready (or shows up Ready),
// and when the set itself appears, goes, or changes its spec (its
// eligibility, or its own startAfter, which may close a cycle). Each event
// costs one index lookup.
func (c *Controller) startOrderPodHandler(logger klog.Logger) cache.ResourceEventHandlerFuncs {
	readyPod := func(pod *corev1.Pod) {
		if k, ok := placement.PodSetKey(pod); ok {
			c.enqueueDependents(logger, k, true)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if pod, ok := obj.(*corev1.Pod); ok && placement.IsPodReady(pod) {
				readyPod(pod)
			}
		},
		UpdateFunc: func(old, cur interface{}) {
			oldPod, ok1 := old.(*corev1.Pod)
			curPod, ok2 := cur.(*corev1.Pod)
			if ok1 && ok2 && !placement.IsPodReady(oldPod) && placement.IsPodReady(curPod) {
				readyPod(curPod)
			}
		},
	}
}

func (c *Controller) startOrderSetHandler(logger klog.Logger, keyOf func(obj interface{}) (placement.StartKey, []placement.StartKey, bool)) cache.ResourceEventHandlerFuncs {
	wake := func(obj interface{}) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if k, _, ok := keyOf(obj); ok {
			c.enqueueDependents(logger, k, false)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    wake,
		DeleteFunc: wake,
		UpdateFunc: func(old, cur interface{}) {
			_, oldDeps, ok1 := keyOf(old)
			_, curDeps, ok2 := keyOf(cur)
			if !ok1 || !ok2 {
				return
			}
			// A new spec may move the set off nodes where pods wait for it
			// (selector, affinity, tolerations).
			o, okO := old.(metav1.Object)
			n, okN := cur.(metav1.Object)
			if fmt.Sprint(oldDeps) != fmt.Sprint(curDeps) || (okO && okN && o.GetGeneration() != n.GetGeneration()) {
				wake(cur)
			}
		},
	}
}

// setStartKeys is the key and the dependencies of one of the controller's
// sets, for startOrderSetHandler.
func (c *Controller) setStartKeys(obj interface{}) (placement.StartKey, []placement.StartKey, bool) {
	ds, ok := c.sets.fromCache(obj)
	if !ok {
		return placement.StartKey{}, nil, false
	}
	return placement.SetStartKey(ds), placement.StartAfterKeys(ds), true
}

// appsStartKeys is the key of an apps/v1 DaemonSet, which has no
// dependencies, for startOrderSetHandler.
func appsStartKeys(obj interface{}) (placement.StartKey, []placement.StartKey, bool) {
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok {
		return placement.StartKey{}, nil, false
	}
	return placement.StartKey{Group: everynodev1alpha1.GroupApps, Namespace: ds.Namespace, Name: ds.Name}, nil, true
}
