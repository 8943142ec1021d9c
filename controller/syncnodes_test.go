package controller

import (
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// TestSlowStartForgottenAtRest checks that the memory lasts while the set
// is on its way, even past an update cycle, and ends once every node runs
// an available pod: a node joining after that starts at one pod.
func TestSlowStartForgottenAtRest(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 3)
	ds := newSet("agent")
	addSetWithRevision(f, ds)
	key := cache.MetaObjectToName(ds)
	f.mustSync(ds) // batches 1, 2: all succeed
	f.syncCaches()

	// The pods are not ready yet: the set is on its way, and 30 s (an
	// update cycle at 5,000 nodes) later it still starts at 4.
	f.clock.Step(30 * time.Second)
	f.mustSync(ds)
	if got := f.c.state.slowStart(key); got != 4 {
		t.Fatalf("initial while the pods are not ready = %d, want 4", got)
	}

	// Every pod available: at rest, and forgotten.
	f.runPods()
	f.mustSync(ds)
	if got := f.c.state.slowStart(key); got != 1 {
		t.Errorf("initial once every node runs an available pod = %d, want 1", got)
	}
	// So a joining node's pod goes out in a batch of one.
	f.add(newNode("node-3", nil))
	attempts := failCreatesAfter(f, 0)
	_ = f.sync(ds)
	if got := attempts.Load(); got != 1 {
		t.Errorf("create attempts for a join after rest = %d, want 1", got)
	}
}

// failCreatesAfter makes the fake API server refuse pod creates after the
// first ok ones, and counts attempts.
func failCreatesAfter(f *fixture, ok int64) *atomic.Int64 {
	var attempts atomic.Int64
	f.kube.PrependReactor("create", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		if attempts.Add(1) > ok {
			return true, nil, errors.New("quota exceeded")
		}
		return false, nil, nil
	})
	return &attempts
}

func TestSlowStart(t *testing.T) {
	tests := map[string]struct {
		nodes, okCreates, burst   int
		wantAttempts, wantCreated int
		wantErr                   bool
	}{
		"all fail: one request":            {nodes: 10, okCreates: 0, wantAttempts: 1, wantErr: true},
		"third batch fails: stop there":    {nodes: 10, okCreates: 3, wantAttempts: 7, wantCreated: 3, wantErr: true},
		"all succeed":                      {nodes: 10, okCreates: 100, wantAttempts: 10, wantCreated: 10},
		"capped at burstReplicas per sync": {nodes: 30, okCreates: 100, burst: 20, wantAttempts: 20, wantCreated: 20},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			if tc.burst > 0 {
				f.c.burstReplicas = tc.burst
			}
			addNodes(f, tc.nodes)
			ds := newSet("agent")
			addSetWithRevision(f, ds)
			attempts := failCreatesAfter(f, int64(tc.okCreates))

			err := f.sync(ds)
			if (err != nil) != tc.wantErr {
				t.Fatalf("sync error = %v, want error %v", err, tc.wantErr)
			}
			if got := int(attempts.Load()); got != tc.wantAttempts {
				t.Errorf("create attempts = %d, want %d", got, tc.wantAttempts)
			}
			if got := len(f.podsOnNodes()); got != tc.wantCreated {
				t.Errorf("pods created = %d, want %d", got, tc.wantCreated)
			}
			// Failed and skipped creations are not waited for; the created
			// ones are, until the informer shows them.
			creates, _, _ := f.c.state.pending(cache.MetaObjectToName(ds))
			if creates != tc.wantCreated {
				t.Errorf("pending creations = %d, want %d", creates, tc.wantCreated)
			}
			if tc.wantErr && !hasEvent(f.events(), "Warning FailedCreate") {
				t.Error("no FailedCreate event")
			}
			f.syncCaches()
			if !f.c.state.satisfied(cache.MetaObjectToName(ds)) {
				t.Error("expectations not satisfied once the created pods are seen")
			}
		})
	}
}

func TestExpectationsPreventDoubleCreate(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 3)
	ds := newSet("agent")
	hash := addSetWithRevision(f, ds)
	key := cache.MetaObjectToName(ds)

	f.mustSync(ds)
	first := f.podCreates()
	if len(first) != 3 {
		t.Fatalf("first sync created %d pods, want 3", len(first))
	}
	// The informer lags: the pods are not in the cache yet.
	f.mustSync(ds)
	if got := f.createdNodes(); got != nil {
		t.Fatalf("second sync created on %v before the first creations were seen", got)
	}
	if st := f.statusUpdates(); len(st) > 0 && st[len(st)-1].ObservedGeneration != 0 {
		t.Errorf("observedGeneration raised to %d while waiting", st[len(st)-1].ObservedGeneration)
	}

	// Another set's pod, or a pod for some other node, does not count.
	other := newSet("other")
	addSetWithRevision(f, other)
	f.c.addPod(klogDiscard, newPod(other, "node-0", hash))
	f.c.addPod(klogDiscard, newPod(ds, "node-99", hash))
	if f.c.state.satisfied(key) {
		t.Fatal("unrelated pods satisfied the expectations")
	}

	// Two of three seen: still waiting.
	onNodes := f.podsOnNodes()
	for _, node := range []string{"node-0", "node-1"} {
		stored, err := f.kube.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), ns, onNodes[node][0])
		if err != nil {
			t.Fatal(err)
		}
		f.podInf.GetIndexer().Add(stored)
		f.c.addPod(klogDiscard, stored.(*corev1.Pod))
	}
	f.mustSync(ds)
	if got := f.createdNodes(); got != nil {
		t.Fatalf("created on %v with one creation unseen", got)
	}
	f.syncCaches()
	f.mustSync(ds)
	if got := f.createdNodes(); got != nil {
		t.Fatalf("created on %v after all creations were seen", got)
	}
	if got := f.set(ds).Status.ObservedGeneration; got != 1 {
		t.Errorf("observedGeneration = %d, want 1", got)
	}
}

func TestExpectations(t *testing.T) {
	key := cache.NewObjectName(ns, "agent")
	tests := map[string]struct {
		do   func(e *setStates, step func(time.Duration))
		want bool
	}{
		"nothing expected": {do: func(*setStates, func(time.Duration)) {}, want: true},
		"creation pending": {
			do:   func(e *setStates, _ func(time.Duration)) { e.expectCreations(key, []string{"a", "b"}) },
			want: false,
		},
		"creations observed per node": {
			do: func(e *setStates, _ func(time.Duration)) {
				e.expectCreations(key, []string{"a", "b"})
				e.creationObserved(key, "a")
				e.creationObserved(key, "a")
				e.creationObserved(key, "b")
			},
			want: true,
		},
		"the same node twice is not two nodes": {
			do: func(e *setStates, _ func(time.Duration)) {
				e.expectCreations(key, []string{"a", "b"})
				e.creationObserved(key, "a")
				e.creationObserved(key, "a")
			},
			want: false,
		},
		"deletion pending then observed": {
			do: func(e *setStates, _ func(time.Duration)) {
				e.expectDeletions(key, []string{"default/p1"})
				e.deletionObserved(key, "default/p1")
			},
			want: true,
		},
		"deletion of another pod does not count": {
			do: func(e *setStates, _ func(time.Duration)) {
				e.expectDeletions(key, []string{"default/p1"})
				e.deletionObserved(key, "default/p2")
			},
			want: false,
		},
		"expired after the TTL": {
			do: func(e *setStates, step func(time.Duration)) {
				e.expectCreations(key, []string{"a"})
				step(expectationsTTL + time.Second)
			},
			want: true,
		},
		"forgotten with the set": {
			do: func(e *setStates, _ func(time.Duration)) {
				e.expectCreations(key, []string{"a"})
				e.forget(key)
			},
			want: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			e := newSetStates(f.clock, f.c.pacer)
			tc.do(e, f.clock.Step)
			if got := e.satisfied(key); got != tc.want {
				t.Errorf("satisfied = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDeletionExpectations(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 1)
	ds := newSet("agent")
	hash := addSetWithRevision(f, ds)
	f.add(newPod(ds, "node-0", hash), newPod(ds, "node-0", hash, createdAt(t0)))
	f.mustSync(ds)
	if got := len(f.podDeletes()); got != 1 {
		t.Fatalf("deleted %d pods, want 1", got)
	}
	// Until the deletion shows, nothing else happens.
	f.mustSync(ds)
	if got := f.podDeletes(); got != nil {
		t.Fatalf("deleted %v again before the first deletion was seen", got)
	}
	f.syncCaches()
	if !f.c.state.satisfied(cache.MetaObjectToName(ds)) {
		t.Fatal("deletion seen but expectations not satisfied")
	}
}

func TestFailedPodBackoff(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 1)
	ds := newSet("agent")
	hash := addSetWithRevision(f, ds)
	f.add(newPod(ds, "node-0", hash, phase(corev1.PodFailed)))

	failOnce := func(round int, wantDelete bool) {
		t.Helper()
		f.mustSync(ds)
		if got := len(f.podDeletes()) == 1; got != wantDelete {
			t.Fatalf("round %d: failed pod deleted = %v, want %v", round, got, wantDelete)
		}
		events := f.events()
		if got := hasEvent(events, "Warning "+ReasonFailedDaemonPod); got != wantDelete {
			t.Fatalf("round %d: FailedDaemonPod event = %v, want %v (%v)", round, got, wantDelete, events)
		}
	}
	recreateAndFail := func() {
		t.Helper()
		f.syncCaches()
		f.mustSync(ds)
		if got := f.createdNodes(); !reflect.DeepEqual(got, []string{"node-0"}) {
			t.Fatalf("recreated on %v, want node-0", got)
		}
		f.syncCaches()
		pods := f.podsOnNodes()["node-0"]
		obj, _ := f.kube.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), ns, pods[0])
		p := obj.(*corev1.Pod).DeepCopy()
		p.Status.Phase = corev1.PodFailed
		p.ResourceVersion = fmt.Sprint(f.podSeq.Add(1))
		f.update(p)
	}

	failOnce(1, true)
	recreateAndFail()
	// Failed again within the backoff: left alone, retried later.
	failOnce(2, false)
	if d := f.queue.takeDelayed(); len(d) == 0 || d[len(d)-1].after != failedPodBackoffInitial {
		t.Errorf("requeues = %v, want one after %v", d, failedPodBackoffInitial)
	}
	f.clock.Step(failedPodBackoffInitial + time.Millisecond)
	failOnce(3, true)
	recreateAndFail()
	// The delay doubled.
	f.clock.Step(failedPodBackoffInitial + time.Millisecond)
	failOnce(4, false)
	f.clock.Step(failedPodBackoffInitial)
	failOnce(5, true)
}

// TestSyncSkips covers the sets a sync must leave alone.
func TestSyncSkips(t *testing.T) {
	tests := map[string]struct {
		set       func(*everynodev1alpha1.DaemonSet)
		notCached bool
		wantEvent string
	}{
		"set deleted: pods left to the garbage collector": {notCached: true},
		"set being deleted": {
			set: func(ds *everynodev1alpha1.DaemonSet) { ds.DeletionTimestamp = ptrTime(t0) },
		},
		"empty selector": {
			set:       func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Selector.MatchLabels = nil },
			wantEvent: "Warning " + ReasonSelectingAll,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			addNodes(f, 2)
			ds := newSet("agent")
			if tc.set != nil {
				tc.set(ds)
			}
			hash := revisionHash(ds)
			f.add(newPod(ds, "node-0", hash), newPod(ds, "node-0", hash))
			if !tc.notCached {
				f.add(ds)
			}
			f.c.state.expectCreations(cache.MetaObjectToName(ds), []string{"x"})
			f.mustSync(ds)
			if n := len(f.kube.Actions()) + len(f.client.Actions()); n != 0 {
				t.Errorf("sync made %d API calls, want none: %v %v", n, f.kube.Actions(), f.client.Actions())
			}
			if tc.wantEvent != "" && !hasEvent(f.events(), tc.wantEvent) {
				t.Errorf("no %s event", tc.wantEvent)
			}
			if tc.notCached && !f.c.state.satisfied(cache.MetaObjectToName(ds)) {
				t.Error("expectations of a deleted set kept")
			}
		})
	}
}

// racingIndexer runs deliver once, right after the next ByIndex read: an
// informer event landing between the sync reading the pods and it checking
// the expectations.
type racingIndexer struct {
	cache.Indexer
	deliver func()
}

func (r *racingIndexer) ByIndex(indexName, indexedValue string) ([]interface{}, error) {
	out, err := r.Indexer.ByIndex(indexName, indexedValue)
	if d := r.deliver; d != nil {
		r.deliver = nil
		d()
	}
	return out, err
}

// TestCreationObservedMidSyncMakesNoDuplicate is the race that gave a
// joining node two pods in the benchmark: the creation of a node's pod is
// observed while a sync is under way. The sync must either see the pod or
// not act; it must never act on a view without it.
func TestCreationObservedMidSyncMakesNoDuplicate(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 2)
	ds := newSet("agent")
	hash := addSetWithRevision(f, ds)
	f.add(newPod(ds, "node-0", hash))

	f.mustSync(ds)
	created := f.podCreates()
	if len(created) != 1 || created[0].Annotations[everynodev1alpha1.AnnotationTargetNode] != "node-1" {
		t.Fatalf("first sync created %d pods, want one for node-1", len(created))
	}
	// The pod is in the API server, not yet in the cache; it arrives while
	// the next sync runs.
	pod := created[0]
	f.c.podIndexer = &racingIndexer{Indexer: f.c.podIndexer, deliver: func() {
		if err := f.podInf.GetIndexer().Add(pod); err != nil {
			t.Fatal(err)
		}
		f.c.addPod(klogDiscard, pod)
	}}
	f.mustSync(ds)
	if got := f.createdNodes(); len(got) != 0 {
		t.Errorf("sync created pods on %v while node-1's pod was being observed, want none", got)
	}
}

// TestDeletionObservedDuringManageIsNotDeletedAgain is the race behind the
// benchmark's second DELETEs (404) of old pods in surge updates: manage
// deletes a node's old pod, the informer reports the deletion before manage
// returns, so the expectations are met, and the rolling update, working on
// the view from before manage, deleted the same pod again. It must work on
// the pods as they are after manage.
func TestDeletionObservedDuringManageIsNotDeletedAgain(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 2)
	ds := newSet("agent")
	ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("0")
	ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = intOrStr("1")
	oldHash := addSetWithRevision(f, ds)
	oldPod := newPod(ds, "node-0", oldHash)
	f.add(oldPod, newPod(ds, "node-1", oldHash))
	ds = f.changeTemplate(ds, "agent:2")
	// node-0 has surged: its new pod is available, so its old one goes.
	f.add(newPod(ds, "node-0", revisionHash(ds)))

	// The informer delivers each deletion while the request is under way.
	f.kube.PrependReactor("delete", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		name := action.(clienttesting.DeleteAction).GetName()
		obj, exists, _ := f.podInf.GetIndexer().GetByKey(ns + "/" + name)
		if exists {
			_ = f.podInf.GetIndexer().Delete(obj)
			f.c.deletePod(klogDiscard, obj)
		}
		return false, nil, nil
	})
	f.mustSync(ds)
	deletes := map[string]int{}
	for _, name := range f.podDeletes() {
		deletes[name]++
	}
	if deletes[oldPod.Name] != 1 {
		t.Errorf("old pod on node-0 deleted %d times in one sync, want once (all deletes: %v)", deletes[oldPod.Name], f.podDeletes())
	}
	// With manage's deletion observed, the rolling update goes on in the
	// same sync, on fresh pods, as upstream's: node-1 surges. (Leaving it to
	// a later sync starved surge updates while every sync had a deletion.)
	if got := f.createdNodes(); !reflect.DeepEqual(got, []string{"node-1"}) {
		t.Errorf("surge pods created on %v, want [node-1]", got)
	}
}

// TestSlowStartRemembersSuccess checks that a set whose creates have been
// succeeding starts its next creates where its slow start had got to (twice
// the largest batch that succeeded), and that one failure sends it back to
// batches of one.
func TestSlowStartRemembersSuccess(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 3)
	ds := newSet("agent")
	addSetWithRevision(f, ds)
	f.mustSync(ds) // batches 1, 2: all succeed
	f.syncCaches()
	if got := f.c.state.slowStart(cache.MetaObjectToName(ds)); got != 4 {
		t.Fatalf("initial batch after creating 3 pods in batches 1, 2 = %d, want 4", got)
	}

	// Ten nodes join and every create fails: the first batch is the
	// remembered 4, not 1, and nothing after it is sent.
	for i := 3; i < 13; i++ {
		f.add(newNode(fmt.Sprintf("node-%d", i), nil))
	}
	attempts := failCreatesAfter(f, 0)
	if err := f.sync(ds); err == nil {
		t.Fatal("sync with failing creates returned no error")
	}
	if got := attempts.Load(); got != 4 {
		t.Errorf("create attempts = %d, want 4 (one remembered batch)", got)
	}
	// Back to one after the failure.
	attempts.Store(0)
	_ = f.sync(ds)
	if got := attempts.Load(); got != 1 {
		t.Errorf("create attempts after a failure = %d, want 1", got)
	}
}
