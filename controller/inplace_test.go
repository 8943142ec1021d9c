package controller

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/controller/internal/testobj"
	"everynode.io/everynode/placement"
)

// podList returns the pods in the fake API server, by target node.
func (f *fixture) podList() []*corev1.Pod {
	f.t.Helper()
	list, err := f.kube.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), "")
	if err != nil {
		f.t.Fatal(err)
	}
	var out []*corev1.Pod
	for i := range list.(*corev1.PodList).Items {
		out = append(out, &list.(*corev1.PodList).Items[i])
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Annotations[everynodev1alpha1.AnnotationTargetNode] < out[j].Annotations[everynodev1alpha1.AnnotationTargetNode]
	})
	return out
}

// kubelet plays a kubelet that sees every change at once: binds each pod,
// runs every container with the image of its spec (a container whose image
// changed is restarted: new container ID and image ID, restart count + 1)
// and reports it ready; the pod is Ready when its readiness gates are True.
// Conditions other than Ready (the in-place gate) are kept.
func (f *fixture) kubelet() {
	f.t.Helper()
	now := metav1.NewTime(f.clock.Now())
	for _, p := range f.podList() {
		changed := false
		p.Spec.NodeName = p.Annotations[everynodev1alpha1.AnnotationTargetNode]
		var statuses []corev1.ContainerStatus
		for _, c := range p.Spec.Containers {
			var st corev1.ContainerStatus
			for _, s := range p.Status.ContainerStatuses {
				if s.Name == c.Name {
					st = s
				}
			}
			if st.Image != c.Image {
				if st.Image != "" {
					st.RestartCount++
				}
				st = corev1.ContainerStatus{
					Name: c.Name, Image: c.Image, ImageID: "sha256:" + c.Image,
					ContainerID:  fmt.Sprintf("fake://%s/%s/%d", p.UID, c.Name, st.RestartCount),
					RestartCount: st.RestartCount, Ready: true, Started: ptr.To(true),
					State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
				}
				changed = true
			}
			statuses = append(statuses, st)
		}
		p.Status.ContainerStatuses = statuses
		ready := corev1.ConditionTrue
		for _, g := range p.Spec.ReadinessGates {
			var gate *corev1.PodCondition
			for i := range p.Status.Conditions {
				if p.Status.Conditions[i].Type == g.ConditionType {
					gate = &p.Status.Conditions[i]
				}
			}
			if gate == nil || gate.Status != corev1.ConditionTrue {
				ready = corev1.ConditionFalse
			}
		}
		var conds []corev1.PodCondition
		for _, c := range p.Status.Conditions {
			if c.Type != corev1.PodReady {
				conds = append(conds, c)
			}
		}
		readyCond := corev1.PodCondition{Type: corev1.PodReady, Status: ready, LastTransitionTime: now}
		if old := placement.ReadyCondition(p); old != nil && old.Status == ready {
			readyCond.LastTransitionTime = old.LastTransitionTime
		} else {
			changed = true
		}
		p.Status.Conditions = append(conds, readyCond)
		if p.Status.Phase != corev1.PodRunning {
			p.Status.Phase, changed = corev1.PodRunning, true
		}
		if !changed {
			continue
		}
		p.ResourceVersion = fmt.Sprint(f.podSeq.Add(1))
		if err := f.kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), p, p.Namespace); err != nil {
			f.t.Fatal(err)
		}
	}
	f.syncCaches()
}

// podDown reports whether a pod is out of service as a user sees it: not
// Ready, its gate not True, or a container not yet running its spec's
// image.
func podDown(p *corev1.Pod) bool {
	if !placement.IsPodReady(p) {
		return true
	}
	if placement.HasInPlaceGate(p) {
		if g := placement.InPlaceGateCondition(p); g == nil || g.Status != corev1.ConditionTrue {
			return true
		}
	}
	for _, c := range p.Spec.Containers {
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == c.Name && s.Image != c.Image {
				return true
			}
		}
	}
	return false
}

// podWrites counts the last sync's pod patches, by subresource ("" is the
// pod itself, "status" the gate).
func (f *fixture) podWrites() (patches, statusPatches int) {
	for _, a := range f.kube.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "pods" {
			if a.(clienttesting.PatchAction).GetSubresource() == "status" {
				statusPatches++
			} else {
				patches++
			}
		}
	}
	return patches, statusPatches
}

var inPlaceSet = testobj.InPlaceSet

// TestInPlaceRollingUpdate rolls an image change out in place over four
// nodes with maxUnavailable 1: no pod is created or deleted, every pod
// keeps its UID and restarts its container once, no more than one pod is
// ever out of service (between any two steps of controller and kubelet,
// the controller acting twice before the kubelet notices),
// and each pod costs the requests the API allows: with the gate, close it,
// patch, open it; without, the patch alone.
func TestInPlaceRollingUpdate(t *testing.T) {
	for _, gate := range []bool{true, false} {
		t.Run(fmt.Sprintf("gate=%v", gate), func(t *testing.T) {
			f := newFixture(t)
			addNodes(f, 4)
			ds := inPlaceSet(gate)
			addSetWithRevision(f, ds)
			f.settle(ds)
			f.kubelet()
			f.settle(ds) // opens the new pods' gates
			f.kubelet()
			uids := map[string]string{}
			for _, p := range f.podList() {
				if podDown(p) {
					t.Fatalf("pod %s is not in service before the update", p.Name)
				}
				if got := placement.HasInPlaceGate(p); got != gate {
					t.Fatalf("pod %s has the in-place gate: %v, want %v", p.Name, got, gate)
				}
				uids[p.Name] = string(p.UID)
			}

			ds = f.changeTemplate(ds, "agent:2")
			hash := revisionHash(ds)
			var patches, statusPatches int
			for i := 0; ; i++ {
				if i == 30 {
					t.Fatal("the in-place rollout did not finish")
				}
				f.mustSync(ds)
				if c, d := len(f.podCreates()), len(f.podDeletes()); c+d > 0 {
					t.Fatalf("step %d: %d creates, %d deletes; an image-only change must not recreate pods", i, c, d)
				}
				p, s := f.podWrites()
				patches, statusPatches = patches+p, statusPatches+s
				check := func(when string) {
					down := 0
					for _, p := range f.podList() {
						if podDown(p) {
							down++
						}
					}
					if down > 1 {
						t.Fatalf("step %d, %s: %d pods out of service, maxUnavailable 1", i, when, down)
					}
				}
				check("after the controller")
				// Again before the cache shows what it wrote: nothing may
				// be written twice (a gate opened again on a stale cache
				// was a fifth more status writes at 1,000 nodes).
				f.mustSync(ds)
				p, s = f.podWrites()
				patches, statusPatches = patches+p, statusPatches+s
				f.syncCaches()
				// Again before the kubelet has seen anything: the pods
				// just patched still report Ready.
				f.mustSync(ds)
				p, s = f.podWrites()
				patches, statusPatches = patches+p, statusPatches+s
				check("after the controller, twice")
				f.syncCaches()
				f.kubelet()
				check("after the kubelet")
				done := true
				for _, p := range f.podList() {
					done = done && placement.IsPodUpdated(p, hash) && !podDown(p)
				}
				if done {
					break
				}
			}
			for _, p := range f.podList() {
				if uids[p.Name] != string(p.UID) {
					t.Errorf("pod %s changed UID", p.Name)
				}
				if got := p.Spec.Containers[0].Image; got != "agent:2" {
					t.Errorf("pod %s runs %s, want agent:2", p.Name, got)
				}
				if got := p.Status.ContainerStatuses[0].RestartCount; got != 1 {
					t.Errorf("pod %s restartCount %d, want 1", p.Name, got)
				}
			}
			wantStatus := 0
			if gate {
				wantStatus = 8
			}
			if patches != 4 || statusPatches != wantStatus {
				t.Errorf("%d pod patches and %d status patches for 4 pods, want 4 and %d", patches, statusPatches, wantStatus)
			}
			if !hasEvent(f.events(), "Normal "+ReasonSuccessfulUpdateInPlace) {
				t.Errorf("no %s event: %v", ReasonSuccessfulUpdateInPlace, f.events())
			}

			// Any other change recreates.
			ds = f.set(ds).DeepCopy()
			ds.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
			ds.Generation++
			f.update(ds)
			f.mustSync(ds)
			if d := len(f.podDeletes()); d != 1 {
				t.Errorf("an env change deleted %d pods in its first sync, want 1 (recreate, maxUnavailable 1)", d)
			}
			if p, _ := f.podWrites(); p != 0 {
				t.Errorf("an env change patched %d pods in place", p)
			}
		})
	}
}

// podWriteLog returns the last sync's writes of each pod, by pod name, in
// the order they were sent: "patch" (the pod itself), "gate False" and
// "gate True" (its status: the in-place gate condition), or the name of
// another subresource.
func (f *fixture) podWriteLog() map[string][]string {
	f.t.Helper()
	out := map[string][]string{}
	for _, a := range f.kube.Actions() {
		if a.GetVerb() != "patch" || a.GetResource().Resource != "pods" {
			continue
		}
		pa := a.(clienttesting.PatchAction)
		w := pa.GetSubresource()
		switch w {
		case "":
			w = "patch"
		case "status":
			var p struct {
				Status struct {
					Conditions []corev1.PodCondition `json:"conditions"`
				} `json:"status"`
			}
			if err := json.Unmarshal(pa.GetPatch(), &p); err != nil || len(p.Status.Conditions) != 1 {
				f.t.Fatalf("status patch %s: want one condition (%v)", pa.GetPatch(), err)
			}
			w = "gate " + string(p.Status.Conditions[0].Status)
		}
		out[pa.GetName()] = append(out[pa.GetName()], w)
	}
	return out
}

// rollOut syncs ds and plays the kubelet until every pod runs the update
// revision and is in service, and returns every pod write on the way, by
// pod name, in order. Each step syncs twice before the caches show what
// the first sync wrote, so a write sent again on a stale cache shows. No
// pod may be created or deleted: the update must be in place. between,
// if set, runs after each step's syncs, before the caches catch up.
func (f *fixture) rollOut(ds *everynodev1alpha1.DaemonSet, between func(step int)) map[string][]string {
	f.t.Helper()
	hash := revisionHash(f.set(ds))
	log := map[string][]string{}
	record := func(step int) {
		if c, d := len(f.podCreates()), len(f.podDeletes()); c+d > 0 {
			f.t.Fatalf("step %d: %d creates, %d deletes; want the update in place", step, c, d)
		}
		for pod, w := range f.podWriteLog() {
			log[pod] = append(log[pod], w...)
		}
	}
	for i := 0; ; i++ {
		if i == 30 {
			f.t.Fatalf("the in-place rollout did not finish; writes so far: %v", log)
		}
		f.mustSync(ds)
		record(i)
		f.mustSync(ds)
		record(i)
		if between != nil {
			between(i)
		}
		f.syncCaches()
		f.kubelet()
		done := true
		for _, p := range f.podList() {
			done = done && placement.IsPodUpdated(p, hash) && !podDown(p)
		}
		if done {
			// And nothing more once it is.
			f.mustSync(ds)
			record(i + 1)
			return log
		}
	}
}

// uidsByName returns the UID of every pod, by name.
func (f *fixture) uidsByName() map[string]string {
	out := map[string]string{}
	for _, p := range f.podList() {
		out[p.Name] = string(p.UID)
	}
	return out
}

// TestInPlaceWhateverTheGate: a pod is updated in place whether or not it
// has the in-place gate the set's policy would give a new pod. A set
// switched to InPlaceIfPossible in the same edit as its image keeps its
// pods (made without the gate): each gets the patch alone. A set switched
// to Never keeps its gated pods too, their gates left open.
func TestInPlaceWhateverTheGate(t *testing.T) {
	tests := map[string]struct {
		before func() *everynodev1alpha1.DaemonSet
		edit   func(ru *everynodev1alpha1.RollingUpdateDaemonSet)
		gated  bool
	}{
		"Recreate to InPlaceIfPossible with the image": {
			before: func() *everynodev1alpha1.DaemonSet { return newSet("agent") },
			edit: func(ru *everynodev1alpha1.RollingUpdateDaemonSet) {
				ru.PodUpdatePolicy = everynodev1alpha1.PodUpdateInPlaceIfPossible
			},
		},
		"Always to Never with the image": {
			before: func() *everynodev1alpha1.DaemonSet { return inPlaceSet(true) },
			edit: func(ru *everynodev1alpha1.RollingUpdateDaemonSet) {
				ru.InPlaceReadinessGate = nil
				ru.InPlaceGatePolicy = everynodev1alpha1.InPlaceGateNever
			},
			gated: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			addNodes(f, 3)
			ds := tc.before()
			addSetWithRevision(f, ds)
			f.settle(ds)
			f.kubelet()
			f.settle(ds) // opens the gates of gated pods
			f.kubelet()
			uids := f.uidsByName()
			for _, p := range f.podList() {
				if got := placement.HasInPlaceGate(p); got != tc.gated {
					t.Fatalf("pod %s has the gate: %v, want %v", p.Name, got, tc.gated)
				}
			}

			// One edit: the strategy and the image.
			ds = f.set(ds).DeepCopy()
			tc.edit(ds.Spec.UpdateStrategy.RollingUpdate)
			ds.Spec.Template.Spec.Containers[0].Image = "agent:2"
			ds.Generation++
			f.update(ds)
			log := f.rollOut(ds, nil)

			if got := f.uidsByName(); !reflect.DeepEqual(got, uids) {
				t.Errorf("pods after the update %v, want the same pods %v", got, uids)
			}
			for name := range uids {
				if got := log[name]; !reflect.DeepEqual(got, []string{"patch"}) {
					t.Errorf("pod %s writes %q, want the patch alone", name, got)
				}
			}
			for _, p := range f.podList() {
				if got := p.Spec.Containers[0].Image; got != "agent:2" {
					t.Errorf("pod %s runs %s, want agent:2", p.Name, got)
				}
				if g := placement.InPlaceGateCondition(p); tc.gated && (g == nil || g.Status != corev1.ConditionTrue) {
					t.Errorf("pod %s gate %v, want it left True", p.Name, g)
				}
			}
		})
	}
}

// ifServedSet is a set that updates in place under inPlaceGatePolicy
// IfServed.
func ifServedSet() *everynodev1alpha1.DaemonSet {
	ds := inPlaceSet(true)
	ds.Spec.UpdateStrategy.RollingUpdate.InPlaceReadinessGate = nil
	ds.Spec.UpdateStrategy.RollingUpdate.InPlaceGatePolicy = everynodev1alpha1.InPlaceGateIfServed
	return ds
}

// agentService selects the pods of the sets the tests make ("app": "agent").
func agentService() *corev1.Service {
	return service(ns, "agent", map[string]string{"app": "agent"})
}

// startPods syncs ds and plays the kubelet until every node runs a pod in
// service, and returns every pod write on the way, by pod name.
func (f *fixture) startPods(ds *everynodev1alpha1.DaemonSet) map[string][]string {
	f.t.Helper()
	log := map[string][]string{}
	for i := 0; i < 5; i++ {
		f.mustSync(ds)
		for pod, w := range f.podWriteLog() {
			log[pod] = append(log[pod], w...)
		}
		f.syncCaches()
		f.kubelet()
	}
	for _, p := range f.podList() {
		if podDown(p) {
			f.t.Fatalf("pod %s is not in service after its creation", p.Name)
		}
	}
	return log
}

// TestInPlaceIfServedCreation: under IfServed a new pod gets the in-place
// gate, and so costs the write that opens it, only when a Service selects
// it.
func TestInPlaceIfServedCreation(t *testing.T) {
	for _, svc := range []bool{false, true} {
		t.Run(fmt.Sprintf("service=%v", svc), func(t *testing.T) {
			f := newFixture(t)
			addNodes(f, 2)
			if svc {
				f.add(agentService())
			}
			f.add(service(ns, "other", map[string]string{"app": "other"}))
			ds := ifServedSet()
			addSetWithRevision(f, ds)
			log := f.startPods(ds)
			want := []string(nil)
			if svc {
				want = []string{"gate True"}
			}
			for _, p := range f.podList() {
				if got := placement.HasInPlaceGate(p); got != svc {
					t.Errorf("pod %s has the gate: %v, want %v", p.Name, got, svc)
				}
				if got := log[p.Name]; !reflect.DeepEqual(got, want) {
					t.Errorf("pod %s writes %q, want %q", p.Name, got, want)
				}
			}
		})
	}
}

// TestInPlaceIfServed: under IfServed, an in-place update of a pod that an
// EndpointSlice lists is the full gate sequence, in order: gate False,
// patch, gate True; of a pod none lists, the patch alone, its gate left
// True. Two nodes, maxUnavailable 1; a Service selects the pods, so they
// have the gate.
func TestInPlaceIfServed(t *testing.T) {
	tests := map[string]struct {
		listed map[string]bool // by node
	}{
		"listed":      {listed: map[string]bool{"node-0": true, "node-1": true}},
		"unlisted":    {},
		"one of each": {listed: map[string]bool{"node-1": true}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			addNodes(f, 2)
			f.add(agentService())
			ds := ifServedSet()
			addSetWithRevision(f, ds)
			f.startPods(ds)
			var refs []*corev1.ObjectReference
			for _, p := range f.podList() {
				if !placement.HasInPlaceGate(p) {
					t.Fatalf("pod %s has no gate; a Service selects it", p.Name)
				}
				if tc.listed[p.Spec.NodeName] {
					refs = append(refs, podRef(p))
				}
			}
			f.add(endpointSlice(ns, "agent-abcde", refs...))
			uids := f.uidsByName()

			ds = f.changeTemplate(ds, "agent:2")
			log := f.rollOut(ds, nil)
			if got := f.uidsByName(); !reflect.DeepEqual(got, uids) {
				t.Errorf("pods after the update %v, want the same pods %v", got, uids)
			}
			for _, p := range f.podList() {
				want := []string{"patch"}
				if tc.listed[p.Spec.NodeName] {
					want = []string{"gate False", "patch", "gate True"}
				}
				if got := log[p.Name]; !reflect.DeepEqual(got, want) {
					t.Errorf("pod %s on %s writes %q, want %q", p.Name, p.Spec.NodeName, got, want)
				}
				if g := placement.InPlaceGateCondition(p); g == nil || g.Status != corev1.ConditionTrue {
					t.Errorf("pod %s gate %v, want True", p.Name, g)
				}
			}
		})
	}
}

// patchedUnlisted is a set under IfServed on one node whose pod a
// Service selects (so it has the gate) and no EndpointSlice lists yet,
// its image changed: the sync patched the pod alone (asserted), the cache
// shows the patch, and the kubelet has not restarted anything yet.
func patchedUnlisted(t *testing.T) (*fixture, *everynodev1alpha1.DaemonSet, *corev1.Pod) {
	t.Helper()
	f := newFixture(t)
	addNodes(f, 1)
	f.add(agentService())
	ds := ifServedSet()
	addSetWithRevision(f, ds)
	f.startPods(ds)
	pod := f.podList()[0]
	ds = f.changeTemplate(ds, "agent:2")
	f.mustSync(ds)
	if got, want := f.podWriteLog()[pod.Name], []string{"patch"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("the update, unlisted: pod writes %q, want %q", got, want)
	}
	f.syncCaches()
	return f, ds, pod
}

// TestInPlaceIfServedListedMidUpdate: a pod patched under IfServed while
// no EndpointSlice listed it, that a slice lists before its new containers
// are ready, gets its gate closed as soon as the controller sees the
// slice, and opened once they are ready: patch, gate False, gate True.
// What this cannot undo: traffic the pod took between the patch and the
// closing, to containers the kubelet was stopping.
func TestInPlaceIfServedListedMidUpdate(t *testing.T) {
	f, ds, pod := patchedUnlisted(t)
	log := map[string][]string{pod.Name: {"patch"}}
	record := func(when string, want ...string) {
		t.Helper()
		got := f.podWriteLog()[pod.Name]
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: pod writes %q, want %q", when, got, want)
		}
		log[pod.Name] = append(log[pod.Name], got...)
	}

	// A slice that listed the pod before and after a change of its own
	// lists nothing new: no wake-up. (The handler alone, on made-up
	// events.)
	f.queue.drain()
	slice := endpointSlice(ns, "agent-abcde", podRef(pod))
	changed := slice.DeepCopy()
	changed.ResourceVersion = "2"
	f.c.updateSlice(klogDiscard, slice, changed)
	if got := f.queue.drain(); len(got) != 0 {
		t.Fatalf("queued %v for a slice that listed the pod already", got)
	}
	// A slice lists the pod: the handler wakes the set.
	f.add(slice)
	f.c.addSlice(klogDiscard, slice)
	if got, want := f.queue.drain(), []string{ns + "/" + ds.Name}; !reflect.DeepEqual(got, want) {
		t.Fatalf("queued %v after the slice, want %v", got, want)
	}
	f.mustSync(ds)
	record("the sync after the slice", "gate False")
	if g := placement.InPlaceGateCondition(f.podList()[0]); g == nil || g.Status != corev1.ConditionFalse {
		t.Fatalf("gate %v after the sync, want False", g)
	}
	f.mustSync(ds)
	record("again before the cache shows the closing")
	f.syncCaches()
	f.mustSync(ds)
	record("again before the new containers are ready")

	f.kubelet()
	if p := f.podList()[0]; !podDown(p) || placement.IsPodReady(p) {
		t.Fatal("the pod is Ready with its gate closed")
	}
	f.mustSync(ds)
	record("once the new containers are ready", "gate True")
	f.syncCaches()
	f.kubelet()
	f.mustSync(ds)
	record("after")
	if p := f.podList()[0]; podDown(p) || p.UID != pod.UID {
		t.Errorf("pod %s (uid %s) not in service after the update, or not the same pod", p.Name, p.UID)
	}
	if got, want := log[pod.Name], []string{"patch", "gate False", "gate True"}; !reflect.DeepEqual(got, want) {
		t.Errorf("pod writes %q, want %q", got, want)
	}

	// A slice that lists the pod once its update is done wakes no set.
	f.queue.drain()
	other := endpointSlice(ns, "agent-fghij", podRef(pod))
	f.add(other)
	f.c.addSlice(klogDiscard, other)
	if got := f.queue.drain(); len(got) != 0 {
		t.Errorf("queued %v for a slice that lists no updating pod", got)
	}
}
