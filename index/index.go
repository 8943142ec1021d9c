// Package index holds the informer indexes that the controller and the
// scheduler extender share, so both read daemon pods by node and by set in
// O(pods on that node) instead of scanning every pod in the cluster.
package index

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"everynode.io/everynode/placement"
)

const (
	// DaemonPodsByNode indexes everynode daemon pods by their target node.
	DaemonPodsByNode = "everynode.io/daemon-pods-by-node"
	// DaemonPodsBySet indexes everynode daemon pods by the namespace/name of
	// the set that controls them (the owner reference with controller: true).
	DaemonPodsBySet = "everynode.io/daemon-pods-by-set"
)

// AddPodIndexers adds the pod indexes to a pod informer. It is idempotent,
// so every part that needs them may call it before the informer starts.
func AddPodIndexers(informer cache.SharedIndexInformer) error {
	want := cache.Indexers{DaemonPodsByNode: podsByNode, DaemonPodsBySet: podsBySet}
	have := informer.GetIndexer().GetIndexers()
	for name := range want {
		if _, ok := have[name]; ok {
			delete(want, name)
		}
	}
	if len(want) == 0 {
		return nil
	}
	if err := informer.AddIndexers(want); err != nil {
		return fmt.Errorf("add pod indexers: %w", err)
	}
	return nil
}

// SetKey is the DaemonPodsBySet key of a set.
func SetKey(namespace, name string) string { return namespace + "/" + name }

func podsByNode(obj interface{}) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !placement.IsDaemonPod(pod) {
		return nil, nil
	}
	if node, ok := placement.TargetNode(pod); ok {
		return []string{node}, nil
	}
	return nil, nil
}

func podsBySet(obj interface{}) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !placement.IsDaemonPod(pod) {
		return nil, nil
	}
	ref := placement.ControllerRef(pod)
	if ref == nil {
		return nil, nil
	}
	return []string{SetKey(pod.Namespace, ref.Name)}, nil
}
