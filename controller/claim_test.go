package controller

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement/revision"
)

// orphan returns obj without owner references, as the garbage collector
// leaves the dependents of a set deleted with --cascade=orphan.
func orphan[T metav1.Object](obj T) T {
	obj.SetOwnerReferences(nil)
	return obj
}

// patched returns the names of the objects of resource that a sync patched.
func (f *fixture) patched(resource string) []string {
	var out []string
	for _, a := range f.kube.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetResource().Resource == resource {
			out = append(out, p.GetName())
		}
	}
	sortStrings(out)
	return out
}

func (f *fixture) controllerUID(resource string, obj metav1.Object) types.UID {
	f.t.Helper()
	var (
		got metav1.Object
		err error
	)
	switch resource {
	case "pods":
		got, err = f.kube.CoreV1().Pods(obj.GetNamespace()).Get(f.ctx, obj.GetName(), metav1.GetOptions{})
	case "controllerrevisions":
		got, err = f.kube.AppsV1().ControllerRevisions(obj.GetNamespace()).Get(f.ctx, obj.GetName(), metav1.GetOptions{})
	}
	if err != nil {
		f.t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(got); ref != nil {
		return ref.UID
	}
	return ""
}

// orphan + recreate: a set made again after `delete --cascade=orphan`
// takes over the running pods and the history, makes no second pod, no new
// revision, and replaces nothing.
func TestOrphansAreAdopted(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 2)
	ds := newSet("agent")
	hash := revisionHash(ds)
	oldSet := ds.DeepCopy()
	oldSet.Spec.Template.Spec.Containers[0].Image = "agent:0"
	oldRev, _ := revision.New(oldSet, revisionHash(oldSet), 1)
	curRev, _ := revision.New(ds, hash, 2)
	pods := []*corev1.Pod{orphan(newPod(ds, "node-0", hash)), orphan(newPod(ds, "node-1", hash))}
	f.add(ds, orphan(oldRev), orphan(curRev), pods[0], pods[1])
	// Another controller's revision and pod in the namespace stay its own.
	other := newSet("other")
	other.Spec.Template.Labels = ds.Spec.Template.Labels
	otherPod := newPod(other, "node-0", "x")
	f.add(otherPod)

	f.mustSync(ds)
	if got, want := f.patched("pods"), []string{pods[0].Name, pods[1].Name}; !reflect.DeepEqual(got, want) {
		t.Fatalf("patched pods %v, want the two orphans %v", got, want)
	}
	if got, want := f.patched("controllerrevisions"), []string{oldRev.Name, curRev.Name}; !reflect.DeepEqual(got, want) {
		t.Fatalf("patched revisions %v, want %v", got, want)
	}
	for _, p := range pods {
		if uid := f.controllerUID("pods", p); uid != ds.UID {
			t.Errorf("pod %s controller %q, want the set", p.Name, uid)
		}
	}
	if uid := f.controllerUID("pods", otherPod); uid != other.UID {
		t.Errorf("another set's pod was taken: controller %q", uid)
	}
	if got, want := revNames(f.revisions()), []string{oldRev.Name + ":1", curRev.Name + ":2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("revisions %v, want the adopted %v and no new one", got, want)
	}
	// The cache does not show the adoptions yet: nothing may be created.
	f.mustSync(ds)
	if c := f.podCreates(); len(c) != 0 {
		t.Fatalf("created %d pods before the adoptions showed", len(c))
	}

	f.syncCaches()
	f.mustSync(ds)
	if c, d := f.podCreates(), f.podDeletes(); len(c) != 0 || len(d) != 0 {
		t.Errorf("after adoption: created %d, deleted %v; want nothing (no rolling update)", len(c), d)
	}
	st := f.set(ds).Status
	if st.UpdateRevision != hash || st.UpdatedNumberScheduled != 2 || st.CurrentNumberScheduled != 2 {
		t.Errorf("status update=%s updated=%d current=%d, want %s 2 2", st.UpdateRevision, st.UpdatedNumberScheduled, st.CurrentNumberScheduled, hash)
	}
}

// A set being deleted (seen only by the uncached read) adopts nothing.
func TestNoAdoptionBySetBeingDeleted(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 1)
	ds := newSet("agent")
	pod := orphan(newPod(ds, "node-0", revisionHash(ds)))
	f.add(ds, pod)
	deleting := ds.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	if err := f.client.Tracker().Update(everynodev1alpha1.SchemeGroupVersion.WithResource("daemonsets"), deleting, ns); err != nil {
		t.Fatal(err)
	}
	if err := f.sync(ds); err == nil {
		t.Error("sync adopted quietly; want an error saying the set is being deleted")
	}
	if got := f.patched("pods"); len(got) != 0 {
		t.Errorf("patched %v", got)
	}
	if uid := f.controllerUID("pods", pod); uid != "" {
		t.Errorf("pod adopted by a set being deleted")
	}
}

// A pod the set controls whose labels no longer match is released, and
// the node gets a new pod once the cache shows the release.
func TestPodThatStopsMatchingIsReleased(t *testing.T) {
	f, ds, pod := setWithOnePod(t, func(p *corev1.Pod) { p.Labels["app"] = "debugging" })
	if got := f.patched("pods"); !reflect.DeepEqual(got, []string{pod.Name}) {
		t.Fatalf("patched %v, want the release of %s", got, pod.Name)
	}
	if uid := f.controllerUID("pods", pod); uid != "" {
		t.Fatalf("pod still controlled by %q", uid)
	}
	f.syncCaches()
	f.mustSync(ds)
	if got := f.createdNodes(); !reflect.DeepEqual(got, []string{"node-0"}) {
		t.Errorf("created on %v, want node-0 once the release showed", got)
	}
}

// A pod the set has synced with, relabelled so the selector no longer
// matches, is released: its new object's facts are derived anew.
func TestPodRelabelledAfterASyncIsReleased(t *testing.T) {
	f, ds, pod := setWithOnePod(t, func(*corev1.Pod) {})
	if got := f.patched("pods"); len(got) != 0 {
		t.Fatalf("patched %v before the relabel", got)
	}
	relabelled := pod.DeepCopy()
	relabelled.Labels["app"] = "debugging"
	f.update(relabelled)
	f.mustSync(ds)
	if got := f.patched("pods"); !reflect.DeepEqual(got, []string{pod.Name}) {
		t.Errorf("patched %v, want the release of %s", got, pod.Name)
	}
}

// setWithOnePod gives a fixture one node and a set with one pod of its
// revision there, changed by edit before it is added, after one sync.
func setWithOnePod(t *testing.T, edit func(*corev1.Pod)) (*fixture, *everynodev1alpha1.DaemonSet, *corev1.Pod) {
	t.Helper()
	f := newFixture(t)
	addNodes(f, 1)
	ds := newSet("agent")
	pod := newPod(ds, "node-0", addSetWithRevision(f, ds))
	edit(pod)
	f.add(pod)
	f.mustSync(ds)
	return f, ds, pod
}

// An orphan that appears wakes the sets that select it.
func TestOrphanEventsWakeTheSelectingSet(t *testing.T) {
	f := newFixture(t)
	ds := newSet("agent")
	f.add(ds, newSet("unrelated"))
	f.queue.drain()
	pod := orphan(newPod(ds, "node-0", "h"))
	f.c.addPod(klogDiscard, pod)
	rev, _ := revision.New(ds, "h", 1)
	f.c.addRevision(klogDiscard, orphan(rev))
	owned, _ := revision.New(ds, "h2", 2)
	f.c.addRevision(klogDiscard, owned)
	if got := f.queue.drain(); !reflect.DeepEqual(got, []string{ns + "/agent"}) {
		t.Errorf("queued %v, want only %s/agent", got, ns)
	}
}

// An adoption whose event the informer delivered before the sync raised
// its expectation: the sync listed the pod as an orphan from a cache that
// lagged (after a kube-apiserver restart), an earlier sync's adoption then
// showed, and this sync's patch changed nothing, so no event will come.
// The sync must not wait for one: in the soak's smoke the set waited out
// the expectations' TTL (5 minutes) with observedGeneration 0. The test
// plays the delivery, minus the handler that already ran, inside the
// patch.
func TestAdoptionAlreadyShownIsNotAwaited(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 1)
	ds := newSet("agent")
	hash := revisionHash(ds)
	rev, _ := revision.New(ds, hash, 1)
	pod := orphan(newPod(ds, "node-0", hash))
	f.add(ds, rev, pod)
	adopted := pod.DeepCopy()
	adopted.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(ds, everynodev1alpha1.SchemeGroupVersion.WithKind("DaemonSet"))}
	adopted.ResourceVersion = fmt.Sprint(f.podSeq.Add(1))
	f.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if err := f.podInf.GetIndexer().Update(adopted); err != nil {
			t.Fatal(err)
		}
		return true, adopted, nil
	})
	f.mustSync(ds)
	if got := f.patched("pods"); !reflect.DeepEqual(got, []string{pod.Name}) {
		t.Fatalf("patched %v, want the adoption of %s", got, pod.Name)
	}
	if c, d, u := f.c.state.pending(cache.MetaObjectToName(ds)); c+d+u != 0 {
		t.Errorf("after an adoption the cache already shows, the set waits for %d creations, %d deletions, %d updates; want none", c, d, u)
	}
}
