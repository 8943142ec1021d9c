package extender

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	everynodelisters "everynode.io/everynode/client/listers/everynode/v1alpha1"
	"everynode.io/everynode/index"
	"everynode.io/everynode/placement"
)

// cluster is the part of the informer caches the verbs read. Tests fill the
// indexers behind it directly instead of running informers.
type cluster struct {
	nodes corelisters.NodeLister
	sets  everynodelisters.DaemonSetLister
	// appsSets is set in takeover mode (TakeOver): then the daemon pods of
	// apps/v1 DaemonSets are everynode's too.
	appsSets appslisters.DaemonSetLister
	// pods must carry the index.DaemonPodsByNode and index.DaemonPodsBySetUID
	// indexes.
	pods cache.Indexer
	// live reads from the API server, to confirm a refusal (confirm); nil
	// confirms nothing (tests).
	live *liveReads
}

// controllingSet returns the set that controls a daemon pod, with its key,
// as r reads it. reason is non-empty when there is none: no everynode
// controller reference (nor, with takeover, an apps/v1 one), or a set that
// is gone or was replaced by another of the same name (its UID differs),
// whose pods are about to be garbage collected. An apps/v1 set comes
// converted (placement.FromApps).
func controllingSet(pod *corev1.Pod, r reader, takeover bool) (set *everynodev1alpha1.DaemonSet, key, reason string, err error) {
	ref, apps := placement.ControllerRef(pod), false
	if ref == nil && takeover {
		ref, apps = placement.AppsControllerRef(pod), true
	}
	if ref == nil {
		return nil, "", reasonNoSet(), nil
	}
	key = index.SetKey(pod.Namespace, ref.Name)
	set, err = r.getSet(pod.Namespace, ref.Name, apps)
	if apierrors.IsNotFound(err) || (err == nil && ref.UID != "" && set.UID != ref.UID) {
		return nil, key, reasonSetNotFound(key), nil
	}
	if err != nil {
		return nil, key, "", fmt.Errorf("get DaemonSet %s: %w", key, err)
	}
	return set, key, "", nil
}

// reader is where the filter reads a daemon pod's set and node, and
// checks the duplicates the pod cache shows: the caches (cluster.cached),
// or the API server, to confirm a refusal (cluster.confirm).
type reader struct {
	getSet  func(namespace, name string, apps bool) (*everynodev1alpha1.DaemonSet, error)
	getNode func(name string) (*corev1.Node, error)
	// active returns the pods of a duplicate that are still there, with
	// the same UID, neither being deleted nor finished.
	active func(pods []*corev1.Pod) ([]*corev1.Pod, error)
}

// cached reads the informer caches; the duplicates are as the pod cache
// shows them.
func (c *cluster) cached() reader {
	return reader{
		getSet: func(namespace, name string, apps bool) (*everynodev1alpha1.DaemonSet, error) {
			if !apps {
				return c.sets.DaemonSets(namespace).Get(name)
			}
			ds, err := c.appsSets.DaemonSets(namespace).Get(name)
			if err != nil {
				return nil, err
			}
			return placement.FromApps(ds), nil
		},
		getNode: c.nodes.Get,
		active:  func(pods []*corev1.Pod) ([]*corev1.Pod, error) { return pods, nil },
	}
}

// daemonPodsOn returns the daemon pods of the set with key setKey whose
// target is node, whatever their state. refOf reads the controller
// reference of the set's kind (placement.ControllerRef or
// AppsControllerRef).
func (c *cluster) daemonPodsOn(node, setKey string, refOf func(metav1.Object) *metav1.OwnerReference) ([]*corev1.Pod, error) {
	objs, err := c.pods.ByIndex(index.DaemonPodsByNode, node)
	if err != nil {
		return nil, fmt.Errorf("list daemon pods on node %s: %w", node, err)
	}
	var out []*corev1.Pod
	for _, obj := range objs {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			continue
		}
		if ref := refOf(pod); ref != nil && index.SetKey(pod.Namespace, ref.Name) == setKey {
			out = append(out, pod)
		}
	}
	return out, nil
}

// samePod reports whether a and b are the same pod: by UID when both have
// one, else by name, since the scheduler may send a pod before the cache
// holds it.
func samePod(a, b *corev1.Pod) bool {
	if a.UID != "" && b.UID != "" {
		return a.UID == b.UID
	}
	return a.Namespace == b.Namespace && a.Name == b.Name
}
