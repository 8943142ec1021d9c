package controller

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/controller/internal/testobj"
)

var withRestarts = testobj.WithRestarts

var updatedInPlace = testobj.UpdatedInPlace

var imagePullBackOff = testobj.ImagePullBackOff

var failingSet = testobj.FailingSet

// badRollout runs ds on n fresh nodes to a complete rollout, then changes
// its image to image and lets one rolling update step run, with the
// updated pod on node-0 made broken by opts. It returns the set as the
// API server holds it and the first revision's hash.
func (f *fixture) badRollout(ds *everynodev1alpha1.DaemonSet, n int, image string, opts ...podOpt) (*everynodev1alpha1.DaemonSet, string) {
	f.t.Helper()
	addNodes(f, n)
	oldHash := addSetWithRevision(f, ds)
	for i := 0; i < n; i++ {
		f.add(newPod(ds, fmt.Sprintf("node-%d", i), oldHash))
	}
	f.settle(ds)
	f.syncCaches()
	ds = f.changeTemplate(ds, image)
	f.stepRollout(ds)
	f.breakPod(ds, "node-0", opts...)
	return ds, oldHash
}

// stepRollout runs one rolling update step: the first sync deletes an old
// pod, the next creates its replacement, which then runs.
func (f *fixture) stepRollout(ds *everynodev1alpha1.DaemonSet) {
	f.t.Helper()
	f.mustSync(ds)
	f.syncCaches()
	f.mustSync(ds)
	f.syncCaches()
	f.runPods()
}

// breakPod makes the set's live pod on node look as opt says, in the API
// server and the cache.
func (f *fixture) breakPod(ds *everynodev1alpha1.DaemonSet, node string, opts ...podOpt) {
	f.t.Helper()
	list, err := f.kube.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), "")
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range list.(*corev1.PodList).Items {
		p := list.(*corev1.PodList).Items[i].DeepCopy()
		if p.DeletionTimestamp != nil || p.Annotations[everynodev1alpha1.AnnotationTargetNode] != node {
			continue
		}
		for _, o := range opts {
			o(p)
		}
		p.ResourceVersion = "b" + p.ResourceVersion
		f.update(p)
		return
	}
	f.t.Fatalf("no live pod on %s", node)
}

// A crash-looping updated pod stops the rollout: no healthy old pod is
// replaced after it, though maxUnavailable would allow one more, new nodes still get a pod, the condition and a
// Warning say why. Resume lets the revision go on; a new template clears
// the stop.
func TestRolloutPausesItself(t *testing.T) {
	f := newFixture(t)
	ds := failingSet(everynodev1alpha1.RolloutFailurePause)
	// Two at a time: with one, maxUnavailable alone would hold the rollout
	// up behind a failing pod, stopped or not.
	ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("2")
	ds, oldHash := f.badRollout(ds, 4, "agent:crash", crashLooping, withRestarts(3))
	if got := f.set(ds).Status.AvailableRevision; got != oldHash {
		t.Fatalf("availableRevision = %q after the complete first rollout, want %s", got, oldHash)
	}

	stoppedBefore := testutil.ToFloat64(rolloutsStopped.WithLabelValues(ns, ds.Name, "Pause"))
	f.mustSync(ds)
	if d, c := f.podDeletes(), f.podCreates(); len(d) > 0 || len(c) > 0 {
		t.Fatalf("deleted %v, created %d with the updated pod failing; want nothing", d, len(c))
	}
	st := f.set(ds).Status
	c := meta.FindStatusCondition(st.Conditions, everynodev1alpha1.ConditionProgressing)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != everynodev1alpha1.ReasonRolloutFailing || !strings.Contains(c.Message, "node-0 (CrashLoopBackOff, 3 restarts)") {
		t.Fatalf("Progressing = %+v, want False/RolloutFailing naming node-0", c)
	}
	if st.RolloutFailure == nil || st.RolloutFailure.Revision != revisionHash(ds) {
		t.Fatalf("rolloutFailure = %+v, want revision %s", st.RolloutFailure, revisionHash(ds))
	}
	if ev := f.events(); !hasEvent(ev, "Warning RolloutFailing Rollout paused: 1 pod of revision 2 failing") {
		t.Errorf("events %v, want the Warning", ev)
	}
	if n := testutil.ToFloat64(rolloutsStopped.WithLabelValues(ns, ds.Name, "Pause")) - stoppedBefore; n != 1 {
		t.Errorf("rollouts_stopped_total{action=Pause} rose by %v, want 1", n)
	}

	// Stopped even once the pod heals and its restarts are old news; a
	// new node still gets a pod.
	f.syncCaches()
	f.breakPod(ds, "node-0", func(p *corev1.Pod) {
		p.Status.ContainerStatuses = nil
		p.Status.Conditions[0].Status = corev1.ConditionTrue
	})
	f.add(newNode("node-new", nil))
	f.mustSync(ds)
	if d, c := f.podDeletes(), f.createdNodes(); len(d) > 0 || !reflect.DeepEqual(c, []string{"node-new"}) {
		t.Fatalf("deleted %v, created on %v while stopped; want only node-new created", d, c)
	}
	if ev := f.events(); hasEvent(ev, "Warning RolloutFailing") {
		t.Errorf("the Warning again on a later sync: %v", ev)
	}

	// Resume: the revision rolls on to every node.
	f.syncCaches()
	f.runPods()
	ds = f.set(ds).DeepCopy()
	ds.Annotations = map[string]string{everynodev1alpha1.AnnotationResumeRevision: revisionHash(ds)}
	f.update(ds)
	f.rollout(ds, 5, 2)
	if _, old, _ := f.podsByRevision(revisionHash(ds), 5); len(old) > 0 {
		t.Errorf("old pods on %v after resume", old)
	}
	if st := f.set(ds).Status; st.RolloutFailure != nil {
		t.Errorf("rolloutFailure = %+v after resume, want none", st.RolloutFailure)
	}
}

// With action Rollback the set gets the template of its last available
// revision back, and the status says why first.
func TestRolloutRollsBack(t *testing.T) {
	f := newFixture(t)
	ds, oldHash := f.badRollout(failingSet(everynodev1alpha1.RolloutFailureRollback), 3, "agent:crash", crashLooping, withRestarts(3))

	f.mustSync(ds)
	var patched, updated bool
	for _, a := range f.client.Actions() {
		switch {
		case a.GetVerb() == "patch" && a.GetSubresource() == "status":
			patched = true
			if updated {
				t.Error("the set was updated before its status recorded the failure")
			}
		case a.GetVerb() == "update" && a.GetSubresource() == "":
			updated = true
			back := a.(clienttesting.UpdateAction).GetObject().(*everynodev1alpha1.DaemonSet)
			if img := back.Spec.Template.Spec.Containers[0].Image; img != "agent:1" {
				t.Errorf("rolled back to image %s, want agent:1", img)
			}
		}
	}
	if !patched || !updated {
		t.Fatalf("status patched %v, set updated %v; want both (actions %v)", patched, updated, f.client.Actions())
	}
	got := f.set(ds)
	if rec := got.Status.RolloutFailure; rec == nil || rec.Action != everynodev1alpha1.RolloutFailureRollback || rec.RolledBackTo != oldHash {
		t.Fatalf("rolloutFailure = %+v, want Rollback to %s", rec, oldHash)
	}
	if ev := f.events(); !hasEvent(ev, "Warning RolloutFailing Rollout is rolling back") {
		t.Errorf("events %v, want the Warning", ev)
	}

	// The rollback rolls out; Progressing says why until it is done.
	f.syncCaches()
	got.Generation++
	f.update(got)
	f.mustSync(got)
	if c := progressing(f.set(got)); c.Reason != everynodev1alpha1.ReasonRolledBack {
		t.Errorf("Progressing = %s (%s) while rolling back, want %s", c.Reason, c.Message, everynodev1alpha1.ReasonRolledBack)
	}
	f.syncCaches()
	f.rollout(got, 3, 1)
	if _, old, _ := f.podsByRevision(oldHash, 3); len(old) > 0 {
		t.Errorf("pods on %v not rolled back", old)
	}
}

// A pod that never pulls its image holds the rollout up; at the deadline
// Progressing turns False with ProgressDeadlineExceeded and names it.
func TestProgressDeadline(t *testing.T) {
	f := newFixture(t)
	ds := newSet("agent")
	ds.Spec.ProgressDeadlineSeconds = ptr.To[int32](60)
	ds, _ = f.badRollout(ds, 3, "agent:non-existent", imagePullBackOff)
	f.queue.takeDelayed()
	f.mustSync(ds)
	if c := progressing(f.set(ds)); c.Reason != everynodev1alpha1.ReasonImagePullBackOff {
		t.Fatalf("Progressing = %s (%s) before the deadline, want %s", c.Reason, c.Message, everynodev1alpha1.ReasonImagePullBackOff)
	}
	f.syncCaches()

	f.clock.Step(61 * time.Second)
	f.mustSync(ds)
	c := progressing(f.set(ds))
	if c.Status != metav1.ConditionFalse || c.Reason != everynodev1alpha1.ReasonProgressDeadlineExceeded ||
		!strings.Contains(c.Message, "on node node-0 (ImagePullBackOff)") {
		t.Fatalf("Progressing = %s/%s (%s), want False/%s naming node-0", c.Status, c.Reason, c.Message, everynodev1alpha1.ReasonProgressDeadlineExceeded)
	}
	if d := f.podDeletes(); len(d) > 0 {
		t.Errorf("deleted %v past the deadline; without onFailure the rollout waits, within maxUnavailable", d)
	}
}

// A stop found on a sync that waits for earlier pod changes (expectations
// unsatisfied) is reported too: that sync's status records it, so no later
// sync would find it fresh.
func TestStopReportedWhileWaiting(t *testing.T) {
	f := newFixture(t)
	ds, _ := f.badRollout(failingSet(everynodev1alpha1.RolloutFailurePause), 3, "agent:crash", crashLooping, withRestarts(3))
	f.events()

	f.c.state.expectCreations(cache.MetaObjectToName(ds), []string{"node-elsewhere"})
	f.mustSync(ds)
	if st := f.set(ds).Status; st.RolloutFailure == nil {
		t.Fatalf("rolloutFailure not recorded by the waiting sync: %+v", st)
	}
	if ev := f.events(); !hasEvent(ev, "Warning RolloutFailing") {
		t.Errorf("events %v, want the Warning from the sync that recorded the stop", ev)
	}
}
