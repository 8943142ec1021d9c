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
	// DaemonPodsBySetUID indexes everynode daemon pods by the UID of the
	// set, of either kind, that controls them (the owner reference with
	// controller: true).
	// By UID, not by name: the pods of a deleted set that the garbage
	// collector has not reached yet are not the pods of a new set of the
	// same name, and a reader need not check every pod's owner again.
	DaemonPodsBySetUID = "everynode.io/daemon-pods-by-set-uid"
)

// AddPodIndexers adds the pod indexes to a pod informer. It is idempotent,
// so every part that needs them may call it before the informer starts.
func AddPodIndexers(informer cache.SharedIndexInformer) error {
	want := cache.Indexers{DaemonPodsByNode: podsByNode, DaemonPodsBySetUID: podsBySetUID}
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

// SetKey is the namespace/name key of a set.
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

func podsBySetUID(obj interface{}) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !placement.IsDaemonPod(pod) {
		return nil, nil
	}
	// Either kind's set: in takeover mode an apps/v1 set's pods carry the
	// daemon-pod label too, and a UID names one set whatever its kind.
	ref := placement.SetRef(pod)
	if ref == nil || ref.UID == "" {
		return nil, nil
	}
	return []string{string(ref.UID)}, nil
}
