package extender

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	everynodelisters "everynode.io/everynode/client/listers/everynode/v1alpha1"
	"everynode.io/everynode/index"
)

const testNS = "infra"

// fixture is a cluster held in bare indexers, as the informers would hold
// it, plus the extender over it.
type fixture struct {
	nodes, sets, pods cache.Indexer
	ext               *Extender
}

// newFixture fills the caches with objs and builds the gate snapshot as the
// initial informer lists would.
func newFixture(t testing.TB, objs ...runtime.Object) *fixture {
	t.Helper()
	// An informer that is never started lends its indexer the pod indexes
	// the index package installs, without any goroutine or API server.
	podInformer := cache.NewSharedIndexInformer(&cache.ListWatch{
		ListFunc:  func(metav1.ListOptions) (runtime.Object, error) { return &corev1.PodList{}, nil },
		WatchFunc: func(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
	}, &corev1.Pod{}, 0, cache.Indexers{})
	if err := index.AddPodIndexers(podInformer); err != nil {
		t.Fatal(err)
	}
	f := &fixture{
		nodes: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		sets:  cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		pods:  podInformer.GetIndexer(),
	}
	f.ext = newExtender(&cluster{
		nodes: corelisters.NewNodeLister(f.nodes),
		sets:  everynodelisters.NewDaemonSetLister(f.sets),
		pods:  f.pods,
	})
	for _, obj := range objs {
		f.add(t, obj)
	}
	for _, key := range f.sets.ListKeys() {
		f.ext.gate.syncSet(key)
	}
	return f
}

func (f *fixture) store(obj runtime.Object) cache.Indexer {
	switch obj.(type) {
	case *corev1.Node:
		return f.nodes
	case *everynodev1alpha1.DaemonSet:
		return f.sets
	case *corev1.Pod:
		return f.pods
	}
	panic(fmt.Sprintf("unexpected object %T", obj))
}

func (f *fixture) add(t testing.TB, obj runtime.Object) {
	t.Helper()
	if err := f.store(obj).Add(obj); err != nil {
		t.Fatal(err)
	}
}

// The event helpers change the cache, then tell the handlers, in the order
// an informer does.

func (f *fixture) create(t testing.TB, obj runtime.Object) {
	t.Helper()
	f.add(t, obj)
	f.handler(obj).OnAdd(obj, false)
}

func (f *fixture) update(t testing.TB, oldObj, newObj runtime.Object) {
	t.Helper()
	if err := f.store(newObj).Update(newObj); err != nil {
		t.Fatal(err)
	}
	f.handler(newObj).OnUpdate(oldObj, newObj)
}

func (f *fixture) delete(t testing.TB, obj runtime.Object) {
	t.Helper()
	if err := f.store(obj).Delete(obj); err != nil {
		t.Fatal(err)
	}
	f.handler(obj).OnDelete(obj)
}

func (f *fixture) handler(obj runtime.Object) cache.ResourceEventHandler {
	switch obj.(type) {
	case *corev1.Node:
		return f.ext.nodeHandler()
	case *everynodev1alpha1.DaemonSet:
		return f.ext.setHandler()
	default:
		return f.ext.podHandler()
	}
}

func node(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: taints},
	}
}

// daemonSet returns a set named name; gate sets nodeReadinessGate; opts
// change it further.
func daemonSet(name string, gate bool, opts ...func(*everynodev1alpha1.DaemonSet)) *everynodev1alpha1.DaemonSet {
	ds := &everynodev1alpha1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: everynodev1alpha1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
			},
			NodeReadinessGate: gate,
		},
	}
	for _, opt := range opts {
		opt(ds)
	}
	return ds
}

func withNodeSelector(sel map[string]string) func(*everynodev1alpha1.DaemonSet) {
	return func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = sel }
}

func withMaxSurge(v intstr.IntOrString) func(*everynodev1alpha1.DaemonSet) {
	return func(ds *everynodev1alpha1.DaemonSet) {
		ds.Spec.UpdateStrategy = everynodev1alpha1.DaemonSetUpdateStrategy{
			Type:          appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &everynodev1alpha1.RollingUpdateDaemonSet{MaxSurge: &v},
		}
	}
}

// daemonPod returns a pod of set ds made for nodeName, of revision hash,
// Pending and not Ready; opts change it further.
func daemonPod(ds *everynodev1alpha1.DaemonSet, name, nodeName, hash string, opts ...func(*corev1.Pod)) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ds.Namespace,
			Name:      name,
			UID:       types.UID("uid-" + name),
			Labels: map[string]string{
				"app":                                 ds.Name,
				everynodev1alpha1.LabelDaemonPod:      everynodev1alpha1.LabelDaemonPodValue,
				appsv1.DefaultDaemonSetUniqueLabelKey: hash,
			},
			Annotations: map[string]string{everynodev1alpha1.AnnotationTargetNode: nodeName},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: everynodev1alpha1.SchemeGroupVersion.String(),
				Kind:       "DaemonSet",
				Name:       ds.Name,
				UID:        ds.UID,
				Controller: ptr.To(true),
			}},
		},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	for _, opt := range opts {
		opt(pod)
	}
	return pod
}

// ready makes a pod Running and Ready on its target node.
func ready(pod *corev1.Pod) {
	pod.Spec.NodeName = pod.Annotations[everynodev1alpha1.AnnotationTargetNode]
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
}

func terminating(pod *corev1.Pod) {
	pod.DeletionTimestamp = &metav1.Time{}
}

func failed(pod *corev1.Pod) { pod.Status.Phase = corev1.PodFailed }

// plainPod is an ordinary pod, not made by everynode.
func plainPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web", Labels: map[string]string{"app": "web"}}}
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("node-%05d", i)
	}
	return out
}
