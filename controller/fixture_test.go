package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	everynodefake "everynode.io/everynode/client/clientset/versioned/fake"
	"everynode.io/everynode/client/informers/externalversions"
	"everynode.io/everynode/controller/internal/testobj"
	"everynode.io/everynode/placement"
	"everynode.io/everynode/placement/revision"
)

// t0 is the fake clock's start: tests never read the real time.
var t0 = testobj.T0

const ns = testobj.Namespace

// klogDiscard is the logger handlers get in tests.
var klogDiscard = logr.Discard()

// fixture is a controller over fake clientsets whose informers are never
// started: tests fill the indexers, call sync directly, and move what the
// fake API server holds into the indexers with syncCaches (the informer's
// job), which also calls the controller's handlers as the informer would.
type fixture struct {
	t        testing.TB
	ctx      context.Context
	kube     *kubefake.Clientset
	client   *everynodefake.Clientset
	c        *Controller
	clock    *testingclock.FakeClock
	recorder *record.FakeRecorder

	podInf, nodeInf, revInf, setInf cache.SharedIndexInformer
	sliceInf, serviceInf            cache.SharedIndexInformer
	podSeq                          atomic.Int64
	rvSeq                           atomic.Int64 // resourceVersions of sets
	queue                           *recordingQueue
}

// delayed is one AddAfter call.
type delayed struct {
	key   string
	after time.Duration
}

// recordingQueue records AddAfter calls, which a fake clock would otherwise
// only reveal asynchronously.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[cache.ObjectName]
	mu      sync.Mutex
	delayed []delayed
}

func (q *recordingQueue) AddAfter(key cache.ObjectName, d time.Duration) {
	q.mu.Lock()
	q.delayed = append(q.delayed, delayed{key.String(), d})
	q.mu.Unlock()
	q.TypedRateLimitingInterface.AddAfter(key, d)
}

// takeDelayed returns and forgets the recorded AddAfter calls, except the
// progress deadline's timers (600 s and more, a rollout under way sets one
// each sync): takeDeadlines returns those.
func (q *recordingQueue) takeDelayed() []delayed {
	out, _ := q.take()
	return out
}

// takeDeadlines returns and forgets the recorded AddAfter calls of the
// progress deadline, and forgets the others too.
func (q *recordingQueue) takeDeadlines() []delayed {
	_, out := q.take()
	return out
}

func (q *recordingQueue) take() (short, deadlines []delayed) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, d := range q.delayed {
		if d.after >= time.Duration(placement.DefaultProgressDeadlineSeconds)*time.Second {
			deadlines = append(deadlines, d)
		} else {
			short = append(short, d)
		}
	}
	q.delayed = nil
	return short, deadlines
}

// drain returns the keys ready in the queue, sorted, and empties it.
func (q *recordingQueue) drain() []string {
	var out []string
	for q.Len() > 0 {
		k, _ := q.Get()
		out = append(out, k.String())
		q.Done(k)
		q.Forget(k)
	}
	sort.Strings(out)
	return out
}

// drainNodes processes the node queue as the node worker would.
func (f *fixture) drainNodes() {
	f.t.Helper()
	for f.c.nodeQueue.Len() > 0 {
		name, _ := f.c.nodeQueue.Get()
		if err := f.c.syncNode(f.ctx, name); err != nil {
			f.t.Fatalf("syncNode %s: %v", name, err)
		}
		f.c.nodeQueue.Done(name)
	}
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	return newFixtureWith(t, func(*fixture) {})
}

// newFixtureWith is newFixture with setup run on the fixture before the
// controller is made.
func newFixtureWith(t testing.TB, setup func(*fixture)) *fixture {
	t.Helper()
	f := &fixture{
		t:        t,
		ctx:      context.Background(),
		kube:     kubefake.NewSimpleClientset(),
		client:   everynodefake.NewSimpleClientset(),
		clock:    testingclock.NewFakeClock(t0),
		recorder: record.NewFakeRecorder(10000),
	}
	setup(f)
	// The fake API server does not implement generateName, UIDs or
	// creation timestamps; the real one does and the controller relies on
	// them.
	f.kube.PrependReactor("create", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		obj, ok := action.(clienttesting.CreateAction).GetObject().(metav1.Object)
		if !ok {
			return false, nil, nil
		}
		n := f.podSeq.Add(1)
		if obj.GetName() == "" && obj.GetGenerateName() != "" {
			obj.SetName(fmt.Sprintf("%s%05d", obj.GetGenerateName(), n))
		}
		if obj.GetUID() == "" {
			obj.SetUID(types.UID(fmt.Sprintf("uid-%d", n)))
		}
		obj.SetCreationTimestamp(metav1.NewTime(f.clock.Now()))
		return false, nil, nil
	})

	f.rvSeq.Store(1000) // above the objects' own "1"
	// Nor resourceVersions on sets: every write gets a new one, and a write
	// over an older one is a conflict, as the status writes rely on.
	f.client.PrependReactor("update", "daemonsets", func(action clienttesting.Action) (bool, runtime.Object, error) {
		ds := action.(clienttesting.UpdateAction).GetObject().(*everynodev1alpha1.DaemonSet)
		stored, err := f.client.Tracker().Get(action.GetResource(), ds.Namespace, ds.Name)
		if err != nil {
			return false, nil, nil
		}
		if rv := stored.(*everynodev1alpha1.DaemonSet).ResourceVersion; ds.ResourceVersion != "" && ds.ResourceVersion != rv {
			return true, nil, apierrors.NewConflict(action.GetResource().GroupResource(), ds.Name, fmt.Errorf("resourceVersion %s is not %s", ds.ResourceVersion, rv))
		}
		ds.ResourceVersion = fmt.Sprint(f.rvSeq.Add(1))
		return false, nil, nil
	})

	kubeInf := informers.NewSharedInformerFactory(f.kube, 0)
	setInf := externalversions.NewSharedInformerFactory(f.client, 0)
	cfg := Config{
		KubeClient: f.kube,
		Client:     f.client,
		DaemonSets: setInf.Everynode().V1alpha1().DaemonSets(),
		Pods:       kubeInf.Core().V1().Pods(),
		Nodes:      kubeInf.Core().V1().Nodes(),
		Revisions:  kubeInf.Apps().V1().ControllerRevisions(),
		Recorder:   f.recorder,
		Clock:      f.clock,

		EndpointSlices: kubeInf.Discovery().V1().EndpointSlices(),
		Services:       kubeInf.Core().V1().Services(),
	}
	c, err := New(f.ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	// Status writes are throttled in real time; TestStatusWrites tests
	// that, the other tests see every write.
	c.pacer.SetStatusInterval(0)
	f.queue = &recordingQueue{TypedRateLimitingInterface: c.queue}
	c.queue = f.queue
	t.Cleanup(func() { c.queue.ShutDown(); c.nodeQueue.ShutDown() })
	f.c = c
	f.podInf = cfg.Pods.Informer()
	f.nodeInf = cfg.Nodes.Informer()
	f.revInf = cfg.Revisions.Informer()
	f.setInf = cfg.DaemonSets.Informer()
	f.sliceInf = cfg.EndpointSlices.Informer()
	f.serviceInf = cfg.Services.Informer()
	return f
}

// add stores objects in the fake API server and in the informer caches.
func (f *fixture) add(objs ...runtime.Object) {
	f.t.Helper()
	for _, obj := range objs {
		var (
			err error
			inf cache.SharedIndexInformer
		)
		switch o := obj.(type) {
		case *everynodev1alpha1.DaemonSet:
			err, inf = f.client.Tracker().Add(o), f.setInf
		case *corev1.Pod:
			err, inf = f.kube.Tracker().Add(o), f.podInf
		case *corev1.Node:
			err, inf = f.kube.Tracker().Add(o), f.nodeInf
			f.c.nodes.changed() // as the node handler would
		case *appsv1.ControllerRevision:
			err, inf = f.kube.Tracker().Add(o), f.revInf
		case *discoveryv1.EndpointSlice:
			err, inf = f.kube.Tracker().Add(o), f.sliceInf
		case *corev1.Service:
			err, inf = f.kube.Tracker().Add(o), f.serviceInf
		default:
			f.t.Fatalf("add: unexpected %T", obj)
		}
		if err != nil {
			f.t.Fatalf("add %T: %v", obj, err)
		}
		if err := inf.GetIndexer().Add(obj); err != nil {
			f.t.Fatalf("index %T: %v", obj, err)
		}
	}
}

// update replaces objects in the fake API server and the caches.
func (f *fixture) update(objs ...runtime.Object) {
	f.t.Helper()
	for _, obj := range objs {
		var (
			err error
			inf cache.SharedIndexInformer
		)
		switch o := obj.(type) {
		case *everynodev1alpha1.DaemonSet:
			o.ResourceVersion = fmt.Sprint(f.rvSeq.Add(1))
			err, inf = f.client.Tracker().Update(everynodev1alpha1.SchemeGroupVersion.WithResource("daemonsets"), o, o.Namespace), f.setInf
		case *corev1.Pod:
			err, inf = f.kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), o, o.Namespace), f.podInf
		case *corev1.Node:
			err, inf = f.kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("nodes"), o, ""), f.nodeInf
			f.c.nodes.changed() // as the node handler would
		default:
			f.t.Fatalf("update: unexpected %T", obj)
		}
		if err != nil {
			f.t.Fatalf("update %T: %v", obj, err)
		}
		if err := inf.GetIndexer().Update(obj); err != nil {
			f.t.Fatalf("index %T: %v", obj, err)
		}
	}
}

// removeNode deletes a node from the API server and the cache and calls
// the handler, as the informer would.
func (f *fixture) removeNode(name string) {
	f.t.Helper()
	obj, exists, err := f.nodeInf.GetIndexer().GetByKey(name)
	if err != nil || !exists {
		f.t.Fatalf("node %s not cached: %v", name, err)
	}
	_ = f.kube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("nodes"), "", name)
	if err := f.nodeInf.GetIndexer().Delete(obj); err != nil {
		f.t.Fatal(err)
	}
	f.c.deleteNode(klogDiscard, obj)
}

// syncCaches makes the caches show what the fake API server holds, calling
// the pod handlers for pods that appeared or went, as an informer would.
func (f *fixture) syncCaches() {
	f.t.Helper()
	podObjs, err := f.kube.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), "")
	if err != nil {
		f.t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := range podObjs.(*corev1.PodList).Items {
		pod := &podObjs.(*corev1.PodList).Items[i]
		key := cache.MetaObjectToName(pod).String()
		seen[key] = true
		old, exists, _ := f.podInf.GetIndexer().GetByKey(key)
		if exists && old.(*corev1.Pod).ResourceVersion == pod.ResourceVersion && !equality.Semantic.DeepEqual(old, pod) {
			// Patched: the fake API server applies patches without a new
			// resourceVersion; the real one gives one, and the informer
			// delivers the change.
			pod.ResourceVersion = fmt.Sprint(f.rvSeq.Add(1))
			if err := f.kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), pod, pod.Namespace); err != nil {
				f.t.Fatal(err)
			}
		}
		_ = f.podInf.GetIndexer().Update(pod)
		if !exists {
			f.c.addPod(klogDiscard, pod)
		} else if old.(*corev1.Pod).ResourceVersion != pod.ResourceVersion {
			f.c.updatePod(klogDiscard, old, pod)
		}
	}
	for _, obj := range f.podInf.GetIndexer().List() {
		pod := obj.(*corev1.Pod)
		if !seen[cache.MetaObjectToName(pod).String()] {
			_ = f.podInf.GetIndexer().Delete(pod)
			f.c.deletePod(klogDiscard, pod)
		}
	}

	revObjs, err := f.kube.Tracker().List(appsv1.SchemeGroupVersion.WithResource("controllerrevisions"), appsv1.SchemeGroupVersion.WithKind("ControllerRevision"), "")
	if err != nil {
		f.t.Fatal(err)
	}
	var revs []interface{}
	for i := range revObjs.(*appsv1.ControllerRevisionList).Items {
		revs = append(revs, &revObjs.(*appsv1.ControllerRevisionList).Items[i])
	}
	if err := f.revInf.GetIndexer().Replace(revs, ""); err != nil {
		f.t.Fatal(err)
	}

	setObjs, err := f.client.Tracker().List(everynodev1alpha1.SchemeGroupVersion.WithResource("daemonsets"), everynodev1alpha1.SchemeGroupVersion.WithKind("DaemonSet"), "")
	if err != nil {
		f.t.Fatal(err)
	}
	var sets []interface{}
	for i := range setObjs.(*everynodev1alpha1.DaemonSetList).Items {
		sets = append(sets, &setObjs.(*everynodev1alpha1.DaemonSetList).Items[i])
	}
	if err := f.setInf.GetIndexer().Replace(sets, ""); err != nil {
		f.t.Fatal(err)
	}
}

// sync runs one sync of ds after clearing the recorded API actions, so the
// actions afterwards are this sync's.
func (f *fixture) sync(ds *everynodev1alpha1.DaemonSet) error {
	f.kube.ClearActions()
	f.client.ClearActions()
	return f.c.sync(f.ctx, cache.MetaObjectToName(ds))
}

// mustSync is sync that fails the test on error.
func (f *fixture) mustSync(ds *everynodev1alpha1.DaemonSet) {
	f.t.Helper()
	if err := f.sync(ds); err != nil {
		f.t.Fatalf("sync: %v", err)
	}
}

// settle syncs and lets the caches catch up until a sync does nothing more
// (bounded, so a controller that never settles fails the test).
func (f *fixture) settle(ds *everynodev1alpha1.DaemonSet) {
	f.t.Helper()
	for i := 0; i < 20; i++ {
		f.mustSync(ds)
		changed := len(f.podCreates()) > 0 || len(f.podDeletes()) > 0
		f.syncCaches()
		if !changed {
			return
		}
	}
	f.t.Fatalf("set %s did not settle", ds.Name)
}

// podCreates returns the pods created by the last sync.
func (f *fixture) podCreates() []*corev1.Pod {
	var out []*corev1.Pod
	for _, a := range f.kube.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
			out = append(out, a.(clienttesting.CreateAction).GetObject().(*corev1.Pod))
		}
	}
	return out
}

// createdNodes returns the target nodes of the pods created by the last
// sync, sorted.
func (f *fixture) createdNodes() []string {
	var out []string
	for _, p := range f.podCreates() {
		out = append(out, p.Annotations[everynodev1alpha1.AnnotationTargetNode])
	}
	sort.Strings(out)
	return out
}

// podDeletes returns the names of the pods deleted by the last sync, sorted.
func (f *fixture) podDeletes() []string {
	var out []string
	for _, a := range f.kube.Actions() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == "pods" {
			out = append(out, a.(clienttesting.DeleteAction).GetName())
		}
	}
	sort.Strings(out)
	return out
}

// statusUpdates returns the statuses written by the last sync.
func (f *fixture) statusUpdates() []everynodev1alpha1.DaemonSetStatus {
	var out []everynodev1alpha1.DaemonSetStatus
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			out = append(out, a.(clienttesting.UpdateAction).GetObject().(*everynodev1alpha1.DaemonSet).Status)
		}
	}
	return out
}

// set returns the set as the fake API server holds it.
func (f *fixture) set(ds *everynodev1alpha1.DaemonSet) *everynodev1alpha1.DaemonSet {
	f.t.Helper()
	got, err := f.client.EverynodeV1alpha1().DaemonSets(ds.Namespace).Get(f.ctx, ds.Name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return got
}

// cachedSet returns the set as the cache holds it.
func (f *fixture) cachedSet(ds *everynodev1alpha1.DaemonSet) *everynodev1alpha1.DaemonSet {
	f.t.Helper()
	got, err := f.c.sets.get(ds.Namespace, ds.Name)
	if err != nil {
		f.t.Fatal(err)
	}
	return got
}

// podsOnNodes returns, per node, the names of the set's live pods in the
// fake API server.
func (f *fixture) podsOnNodes() map[string][]string {
	f.t.Helper()
	list, err := f.kube.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), "")
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, p := range list.(*corev1.PodList).Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		n := p.Spec.NodeName
		if n == "" {
			n = p.Annotations[everynodev1alpha1.AnnotationTargetNode]
		}
		out[n] = append(out[n], p.Name)
	}
	return out
}

// events drains the recorded events.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func hasEvent(events []string, prefix string) bool {
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

// --- objects (package testobj) ---

var (
	newNode    = testobj.Node
	newSet     = testobj.Set
	newPod     = testobj.Pod
	notReady   = testobj.NotReady
	readySince = testobj.ReadySince
	createdAt  = testobj.CreatedAt
	phase      = testobj.Phase
	unbound    = testobj.Unbound
)

// podOpt changes a pod made by newPod.
type podOpt = testobj.PodOpt

func addNodes(f *fixture, n int) []*corev1.Node {
	var out []*corev1.Node
	for i := 0; i < n; i++ {
		node := newNode(fmt.Sprintf("node-%d", i), nil)
		f.add(node)
		out = append(out, node)
	}
	return out
}

// addSetWithRevision adds ds and its current revision (number 1), as after
// a first sync, and returns the hash.
func addSetWithRevision(f *fixture, ds *everynodev1alpha1.DaemonSet) string {
	f.t.Helper()
	hash := revision.HashOf(ds)
	rev, err := revision.New(ds, hash, 1)
	if err != nil {
		f.t.Fatal(err)
	}
	f.add(ds, rev)
	return hash
}

func sortStrings(s []string) { sort.Strings(s) }

// runPods plays kubelet for every pod in the fake API server: binds it to
// its target node, and makes it Running and Ready since now. Then the
// caches catch up.
func (f *fixture) runPods() {
	f.t.Helper()
	list, err := f.kube.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), "")
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range list.(*corev1.PodList).Items {
		p := &list.(*corev1.PodList).Items[i]
		if p.Status.Phase == corev1.PodRunning {
			continue
		}
		p.Spec.NodeName = p.Annotations[everynodev1alpha1.AnnotationTargetNode]
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(f.clock.Now())}}
		p.ResourceVersion = fmt.Sprint(f.podSeq.Add(1))
		if err := f.kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), p, p.Namespace); err != nil {
			f.t.Fatal(err)
		}
	}
	f.syncCaches()
}

// changeTemplate updates the set's image, as a user would, in the API
// server and the cache, and returns the new copy.
func (f *fixture) changeTemplate(ds *everynodev1alpha1.DaemonSet, image string) *everynodev1alpha1.DaemonSet {
	f.t.Helper()
	ds = f.set(ds).DeepCopy()
	ds.Spec.Template.Spec.Containers[0].Image = image
	ds.Generation++
	f.update(ds)
	return ds
}

func ptrTime(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }

func revisionHash(ds *everynodev1alpha1.DaemonSet) string { return revision.HashOf(ds) }
