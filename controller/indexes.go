package controller

import (
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/index"
	"everynode.io/everynode/placement"
)

const (
	// setsByNodeConstraint indexes sets by the cheapest test a node must
	// pass to run them, so a node event looks up the sets that may want the
	// node instead of testing every set in the cluster: a template nodeName
	// ("node/<name>"), else one pair of the template nodeSelector
	// ("label/<key>=<value>", the smallest key: a node must carry every pair,
	// so any one will do), else "any". Sets that select nodes only by
	// required node affinity land in "any" and are tested in full.
	setsByNodeConstraint = "everynode.io/sets-by-node-constraint"
	anyNodeIndexKey      = "any"

	// revisionsBySet indexes ControllerRevisions by the namespace/name of the
	// everynode set that controls them, so a sync reads its own history
	// rather than every revision of the namespace.
	revisionsBySet = "everynode.io/revisions-by-set"

	// orphanDaemonPodsByNamespace and orphanRevisionsByNamespace index the
	// daemon pods and revisions that no controller owns by namespace: the
	// candidates for adoption (claim.go), found without a namespace scan.
	orphanDaemonPodsByNamespace = "everynode.io/orphan-daemon-pods-by-namespace"
	orphanRevisionsByNamespace  = "everynode.io/orphan-revisions-by-namespace"
)

func nodeNameIndexKey(name string) string    { return "node/" + name }
func labelIndexKey(key, value string) string { return "label/" + key + "=" + value }

func setNodeConstraintKeys(ds *everynodev1alpha1.DaemonSet) []string {
	spec := &ds.Spec.Template.Spec
	if spec.NodeName != "" {
		return []string{nodeNameIndexKey(spec.NodeName)}
	}
	if len(spec.NodeSelector) > 0 {
		keys := make([]string, 0, len(spec.NodeSelector))
		for k := range spec.NodeSelector {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return []string{labelIndexKey(keys[0], spec.NodeSelector[keys[0]])}
	}
	return []string{anyNodeIndexKey}
}

func revisionSetKeys(obj interface{}) ([]string, error) {
	rev, ok := obj.(*appsv1.ControllerRevision)
	if !ok {
		return nil, nil
	}
	// Either kind's: a takeover controller shares the informer, and
	// revisionsOfSet checks the UID.
	ref := placement.SetRef(rev)
	if ref == nil {
		return nil, nil
	}
	return []string{index.SetKey(rev.Namespace, ref.Name)}, nil
}

func orphanDaemonPodNamespace(obj interface{}) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !placement.IsDaemonPod(pod) || placement.SetRef(pod) != nil {
		return nil, nil
	}
	return []string{pod.Namespace}, nil
}

func orphanRevisionNamespace(obj interface{}) ([]string, error) {
	rev, ok := obj.(*appsv1.ControllerRevision)
	if !ok || placement.SetRef(rev) != nil {
		return nil, nil
	}
	return []string{rev.Namespace}, nil
}

// addIndexer adds one index to an informer unless it has it already, so
// two controllers sharing a factory (tests) do not collide.
func addIndexer(informer cache.SharedIndexInformer, name string, fn cache.IndexFunc) error {
	if _, ok := informer.GetIndexer().GetIndexers()[name]; ok {
		return nil
	}
	if err := informer.AddIndexers(cache.Indexers{name: fn}); err != nil {
		return fmt.Errorf("add index %s: %w", name, err)
	}
	return nil
}

func addSetIndexers(sets setKind) error {
	if err := addIndexer(sets.informer(), setsByStartAfter, setStartAfterKeys(sets)); err != nil {
		return err
	}
	return addIndexer(sets.informer(), setsByNodeConstraint, func(obj interface{}) ([]string, error) {
		ds, ok := sets.fromCache(obj)
		if !ok {
			return nil, nil
		}
		return setNodeConstraintKeys(ds), nil
	})
}

func addRevisionIndexers(informer cache.SharedIndexInformer) error {
	if err := addIndexer(informer, revisionsBySet, revisionSetKeys); err != nil {
		return err
	}
	return addIndexer(informer, orphanRevisionsByNamespace, orphanRevisionNamespace)
}

func addPodIndexers(informer cache.SharedIndexInformer) error {
	if err := index.AddPodIndexers(informer); err != nil {
		return err
	}
	return addIndexer(informer, orphanDaemonPodsByNamespace, orphanDaemonPodNamespace)
}

// candidateSets returns the sets that may want to run on node, each once:
// those indexed under "any", under the node's name, or under one of its
// labels. The cost is O(labels of the node + sets returned).
func (c *Controller) candidateSets(node *corev1.Node) ([]*everynodev1alpha1.DaemonSet, error) {
	keys := make([]string, 0, len(node.Labels)+2)
	keys = append(keys, anyNodeIndexKey, nodeNameIndexKey(node.Name))
	for k, v := range node.Labels {
		keys = append(keys, labelIndexKey(k, v))
	}
	var out []*everynodev1alpha1.DaemonSet
	for _, key := range keys {
		objs, err := c.setIndexer.ByIndex(setsByNodeConstraint, key)
		if err != nil {
			return nil, fmt.Errorf("look up sets for node %s: %w", node.Name, err)
		}
		for _, obj := range objs {
			if ds, ok := c.sets.fromCache(obj); ok {
				out = append(out, ds)
			}
		}
	}
	return out, nil
}

// podsOfSet returns the pods that belong to ds: the daemon-pod label and a
// controller reference to this very set (same UID), from the index, which
// checks both. A pod of an earlier set of the same name, or a hand-made
// pod, is not one.
func (c *Controller) podsOfSet(ds *everynodev1alpha1.DaemonSet) ([]*corev1.Pod, error) {
	objs, err := c.podIndexer.ByIndex(index.DaemonPodsBySetUID, string(ds.UID))
	if err != nil {
		return nil, fmt.Errorf("list pods of %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		if pod, ok := obj.(*corev1.Pod); ok {
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

// revisionsOfSet returns the ControllerRevisions controlled by ds.
func (c *Controller) revisionsOfSet(ds *everynodev1alpha1.DaemonSet) ([]*appsv1.ControllerRevision, error) {
	objs, err := c.revIndexer.ByIndex(revisionsBySet, index.SetKey(ds.Namespace, ds.Name))
	if err != nil {
		return nil, fmt.Errorf("list revisions of %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	revs := make([]*appsv1.ControllerRevision, 0, len(objs))
	for _, obj := range objs {
		rev, ok := obj.(*appsv1.ControllerRevision)
		if !ok {
			continue
		}
		if ref := c.sets.ownerRef(rev); ref == nil || ref.UID != ds.UID {
			continue
		}
		revs = append(revs, rev)
	}
	return revs, nil
}
