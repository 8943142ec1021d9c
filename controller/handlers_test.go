package controller

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/client/informers/externalversions"
	"everynode.io/everynode/placement"
)

func TestPodHandlers(t *testing.T) {
	tests := map[string]struct {
		event        func(f *fixture, ds *everynodev1alpha1.DaemonSet, pod *corev1.Pod)
		wantQueued   []string
		wantDelayed  []time.Duration
		wantObserved bool
	}{
		"daemon pod added: creation observed": {
			event:        func(f *fixture, _ *everynodev1alpha1.DaemonSet, pod *corev1.Pod) { f.c.addPod(klogDiscard, pod) },
			wantQueued:   []string{"default/agent"},
			wantObserved: true,
		},
		"other pod added: ignored": {
			event: func(f *fixture, _ *everynodev1alpha1.DaemonSet, pod *corev1.Pod) {
				delete(pod.Labels, everynodev1alpha1.LabelDaemonPod)
				f.c.addPod(klogDiscard, pod)
			},
		},
		"pod of a replaced set: ignored": {
			event: func(f *fixture, _ *everynodev1alpha1.DaemonSet, pod *corev1.Pod) {
				pod.OwnerReferences[0].UID = "old"
				f.c.addPod(klogDiscard, pod)
			},
		},
		"resync (same resourceVersion): ignored": {
			event: func(f *fixture, _ *everynodev1alpha1.DaemonSet, pod *corev1.Pod) {
				f.c.updatePod(klogDiscard, pod, pod)
			},
		},
		"turns ready with minReadySeconds: synced now and after": {
			event: func(f *fixture, ds *everynodev1alpha1.DaemonSet, pod *corev1.Pod) {
				old := pod.DeepCopy()
				notReady(old)
				pod.ResourceVersion = "2"
				f.c.updatePod(klogDiscard, old, pod)
			},
			wantQueued:  []string{"default/agent"},
			wantDelayed: []time.Duration{11 * time.Second},
		},
		"graceful delete starts: deletion observed": {
			event: func(f *fixture, _ *everynodev1alpha1.DaemonSet, pod *corev1.Pod) {
				cur := pod.DeepCopy()
				cur.ResourceVersion = "2"
				cur.DeletionTimestamp = ptrTime(t0)
				f.c.updatePod(klogDiscard, pod, cur)
			},
			wantQueued:   []string{"default/agent"},
			wantObserved: true,
		},
		"deleted, seen through a tombstone": {
			event: func(f *fixture, _ *everynodev1alpha1.DaemonSet, pod *corev1.Pod) {
				f.c.deletePod(klogDiscard, cache.DeletedFinalStateUnknown{Key: "default/" + pod.Name, Obj: pod})
			},
			wantQueued:   []string{"default/agent"},
			wantObserved: true,
		},
		"daemon label removed: the set notices": {
			event: func(f *fixture, _ *everynodev1alpha1.DaemonSet, pod *corev1.Pod) {
				cur := pod.DeepCopy()
				cur.ResourceVersion = "2"
				delete(cur.Labels, everynodev1alpha1.LabelDaemonPod)
				f.c.updatePod(klogDiscard, pod, cur)
			},
			wantQueued: []string{"default/agent"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			ds := newSet("agent")
			ds.Spec.MinReadySeconds = 10
			f.add(ds)
			pod := newPod(ds, "node-0", "h")
			key := cache.MetaObjectToName(ds)
			f.c.state.expectCreations(key, []string{"node-0"})
			f.c.state.expectDeletions(key, []string{"default/" + pod.Name})

			tc.event(f, ds, pod)
			if got := f.queue.drain(); !reflect.DeepEqual(got, tc.wantQueued) {
				t.Errorf("queued %v, want %v", got, tc.wantQueued)
			}
			var delays []time.Duration
			for _, d := range f.queue.takeDelayed() {
				delays = append(delays, d.after)
			}
			if !reflect.DeepEqual(delays, tc.wantDelayed) {
				t.Errorf("delayed %v, want %v", delays, tc.wantDelayed)
			}
			creates, deletes, _ := f.c.state.pending(key)
			if got := creates+deletes < 2; got != tc.wantObserved {
				t.Errorf("an expectation observed = %v, want %v", got, tc.wantObserved)
			}
		})
	}
}

func TestSetHandlers(t *testing.T) {
	f := newFixture(t)
	ds := newSet("agent")
	key := cache.MetaObjectToName(ds)
	f.c.state.expectCreations(key, []string{"a"})
	recreated := ds.DeepCopy()
	recreated.UID = "new"
	f.c.updateSet(klogDiscard, ds, recreated)
	if !f.c.state.satisfied(key) {
		t.Error("expectations of a replaced set kept")
	}
	f.c.state.expectCreations(key, []string{"a"})
	f.c.deleteSet(klogDiscard, cache.DeletedFinalStateUnknown{Key: key.String(), Obj: ds})
	if !f.c.state.satisfied(key) {
		t.Error("expectations of a deleted set kept")
	}
	if got := f.queue.drain(); !reflect.DeepEqual(got, []string{"default/agent"}) {
		t.Errorf("queued %v", got)
	}
}

func TestRevisionHandlers(t *testing.T) {
	f := newFixture(t)
	ds := newSet("agent")
	f.add(ds)
	rev := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{
		Name: "agent-1", Namespace: ns, ResourceVersion: "1",
		OwnerReferences: []metav1.OwnerReference{placement.NewControllerRef(ds)},
	}}
	f.c.updateRevision(klogDiscard, rev, rev)
	if got := f.queue.drain(); got != nil {
		t.Errorf("resync queued %v", got)
	}
	cur := rev.DeepCopy()
	cur.ResourceVersion = "2"
	f.c.updateRevision(klogDiscard, rev, cur)
	f.c.deleteRevision(klogDiscard, cur)
	if got := f.queue.drain(); !reflect.DeepEqual(got, []string{"default/agent"}) {
		t.Errorf("queued %v, want the owner", got)
	}
	foreign := cur.DeepCopy()
	foreign.OwnerReferences[0].APIVersion = "apps/v1"
	f.c.deleteRevision(klogDiscard, foreign)
	if got := f.queue.drain(); got != nil {
		t.Errorf("an apps/v1 DaemonSet's revision queued %v", got)
	}
}

func TestConfigValidation(t *testing.T) {
	f := newFixture(t)
	tests := map[string]struct {
		mod     func(*Config)
		wantErr string
	}{
		"no kube client":    {mod: func(c *Config) { c.KubeClient = nil }, wantErr: "KubeClient"},
		"no clientset":      {mod: func(c *Config) { c.Client = nil }, wantErr: "Client is required"},
		"no informer":       {mod: func(c *Config) { c.Nodes = nil }, wantErr: "informers are required"},
		"negative burst":    {mod: func(c *Config) { c.BurstReplicas = -1 }, wantErr: "BurstReplicas"},
		"budget, no events": {mod: func(c *Config) { c.Budget = &fakeBudget{} }, wantErr: "EventClient"},
		"budget and events": {mod: func(c *Config) { c.Budget, c.EventClient = &fakeBudget{}, f.kube }},
		"complete is valid": {mod: func(*Config) {}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			kubeInf := informers.NewSharedInformerFactory(f.kube, 0)
			cfg := Config{
				KubeClient: f.kube, Client: f.client,
				DaemonSets: externalversions.NewSharedInformerFactory(f.client, 0).Everynode().V1alpha1().DaemonSets(),
				Pods:       kubeInf.Core().V1().Pods(), Nodes: kubeInf.Core().V1().Nodes(), Revisions: kubeInf.Apps().V1().ControllerRevisions(),
			}
			tc.mod(&cfg)
			err := cfg.validate()
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("validate() = %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
	if _, err := New(context.Background(), Config{}); err == nil {
		t.Error("New accepted an empty config")
	}
}

// Pod events wait for the set's delay, except the one that completes what
// a sync waits for, and a pod (or its containers) turning ready while the
// set's rollout waits for one.
func TestPodEventsAreBatched(t *testing.T) {
	f := newFixture(t)
	ds := newSet("agent")
	f.add(ds)
	key := cache.MetaObjectToName(ds)
	f.c.state.synced(key, 10*time.Millisecond, 0)
	f.c.state.expectCreations(key, []string{"node-0", "node-1"})

	step := func(what string, event func(), wantQueued []string, wantDelayed []time.Duration) {
		t.Helper()
		event()
		if got := f.queue.drain(); !reflect.DeepEqual(got, wantQueued) {
			t.Errorf("%s: queued %v, want %v", what, got, wantQueued)
		}
		var delays []time.Duration
		for _, d := range f.queue.takeDelayed() {
			delays = append(delays, d.after)
		}
		if !reflect.DeepEqual(delays, wantDelayed) {
			t.Errorf("%s: delayed %v, want %v", what, delays, wantDelayed)
		}
	}
	p0, p1 := newPod(ds, "node-0", "h"), newPod(ds, "node-1", "h")
	step("first of two expected creations", func() { f.c.addPod(klogDiscard, p0) }, nil, []time.Duration{200 * time.Millisecond})
	step("status change", func() {
		cur := p0.DeepCopy()
		cur.ResourceVersion = "2"
		f.c.updatePod(klogDiscard, p0, cur)
	}, nil, []time.Duration{200 * time.Millisecond})
	step("last expected creation", func() { f.c.addPod(klogDiscard, p1) }, []string{"default/agent"}, nil)
	step("unexpected deletion", func() { f.c.deletePod(klogDiscard, p1) }, nil, []time.Duration{200 * time.Millisecond})

	withCondition := func(p *corev1.Pod, rv string, t corev1.PodConditionType) *corev1.Pod {
		cur := p.DeepCopy()
		cur.ResourceVersion = rv
		cur.Status.Conditions = append(cur.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue})
		return cur
	}
	starting := p0.DeepCopy()
	starting.Status.Conditions = nil
	ready := withCondition(starting, "3", corev1.PodReady)
	step("turned ready, no rollout waiting", func() { f.c.updatePod(klogDiscard, starting, ready) }, nil, []time.Duration{200 * time.Millisecond})
	f.c.state.awaitReady(key, true)
	step("turned ready, the rollout waiting", func() { f.c.updatePod(klogDiscard, starting, ready) }, []string{"default/agent"}, nil)
	step("containers turned ready, the rollout waiting", func() {
		f.c.updatePod(klogDiscard, starting, withCondition(starting, "4", corev1.ContainersReady))
	}, []string{"default/agent"}, nil)
	// While a change is pending a sync does nothing; the event that
	// completes it syncs the set.
	f.c.state.expectUpdates(key, []string{"default/other"})
	step("turned ready, the rollout waiting, an update pending", func() { f.c.updatePod(klogDiscard, starting, ready) }, nil, []time.Duration{200 * time.Millisecond})
	f.c.state.updateObserved(key, "default/other")
	step("ready already, the rollout waiting", func() {
		f.c.updatePod(klogDiscard, ready, withCondition(ready, "5", corev1.PodScheduled))
	}, nil, []time.Duration{200 * time.Millisecond})
	minReady := ds.DeepCopy()
	minReady.Spec.MinReadySeconds = 5
	f.update(minReady)
	step("turned ready, not yet available (minReadySeconds 5)", func() {
		f.c.updatePod(klogDiscard, starting, withCondition(starting, "6", corev1.PodReady))
	}, nil, []time.Duration{200 * time.Millisecond, 6 * time.Second})
}
