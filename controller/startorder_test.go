package controller

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clienttesting "k8s.io/client-go/testing"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/controller/internal/testobj"
	"everynode.io/everynode/placement"
)

// startPatches returns the names of the pods the last sync removed the
// start-after gate of.
func (f *fixture) startPatches() []string {
	var out []string
	for _, a := range f.kube.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && a.GetResource().Resource == "pods" && string(p.GetPatch()) == string(placement.StartGateRemovalPatch()) {
			out = append(out, p.GetName())
		}
	}
	return out
}

func gatedNodes(pods []*corev1.Pod) (gated, open []string) {
	for _, p := range pods {
		node, _ := placement.TargetNode(p)
		if placement.HasStartGate(p) {
			gated = append(gated, node)
		} else {
			open = append(open, node)
		}
	}
	sortStrings(gated)
	sortStrings(open)
	return gated, open
}

// B starts after A: its pod is gated only on the node where A's pod is not
// Ready, the gate comes off in one patch once it is, and only once.
func TestStartAfterGatesOnlyWhereTheDependencyIsNotReady(t *testing.T) {
	f := newFixture(t)
	a, b := testobj.Set("a"), testobj.Set("b")
	b.Spec.StartAfter = []everynodev1alpha1.StartDependency{{Name: "a"}}
	hashA := addSetWithRevision(f, a)
	addSetWithRevision(f, b)
	f.add(newNode("ready", nil), newNode("slow", nil), newNode("bare", nil))
	slow := testobj.Pod(a, "slow", hashA, testobj.NotReady)
	f.add(testobj.Pod(a, "ready", hashA), slow)

	f.mustSync(b)
	gated, open := gatedNodes(f.podCreates())
	if len(gated) != 2 || gated[0] != "bare" || gated[1] != "slow" || len(open) != 1 || open[0] != "ready" {
		t.Fatalf("gated %v, open %v: want [bare slow] gated, [ready] open", gated, open)
	}
	f.syncCaches()
	f.mustSync(b)
	if got := f.startPatches(); len(got) != 0 {
		t.Fatalf("gates removed while A is not Ready: %v", got)
	}
	// Waiting its turn is no stuck rollout.
	st := f.set(b).Status
	if c := meta.FindStatusCondition(st.Conditions, everynodev1alpha1.ConditionAvailable); c == nil || c.Reason != everynodev1alpha1.ReasonPodsWaitingForDependencies {
		t.Errorf("Available %+v, want reason %s", c, everynodev1alpha1.ReasonPodsWaitingForDependencies)
	}
	if c := meta.FindStatusCondition(st.Conditions, everynodev1alpha1.ConditionProgressing); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Progressing %+v, want True while pods wait for their dependencies", c)
	}

	readyNow := slow.DeepCopy()
	readyNow.Status.Conditions[0].Status = corev1.ConditionTrue
	readyNow.ResourceVersion = "2"
	f.update(readyNow)
	f.queue.drain()
	f.c.startOrderPodHandler(klogDiscard).OnUpdate(slow, readyNow)
	if keys := f.queue.drain(); len(keys) != 1 || keys[0] != testobj.Namespace+"/b" {
		t.Errorf("A's pod turning Ready queued %v, want B", keys)
	}
	f.mustSync(b)
	if got := f.startPatches(); len(got) != 1 {
		t.Fatalf("removed %v, want the pod on node slow only", got)
	}
	// Until the cache shows the removal, the set waits for it: no second
	// write.
	f.mustSync(b)
	if got := f.startPatches(); len(got) != 0 {
		t.Fatalf("removed again before the cache showed it: %v", got)
	}
	f.syncCaches()
	f.mustSync(b)
	if got := f.startPatches(); len(got) != 0 {
		t.Fatalf("removed again after the cache showed it: %v", got)
	}
	if c := meta.FindStatusCondition(f.set(b).Status.Conditions, everynodev1alpha1.ConditionStartOrderBroken); c != nil {
		t.Errorf("StartOrderBroken with a healthy dependency: %+v", c)
	}
}

// A missing dependency is waited for and reported; a cycle is reported and
// not waited for.
func TestStartAfterMissingAndCycle(t *testing.T) {
	f := newFixture(t)
	missing := testobj.Set("missing")
	missing.Spec.StartAfter = []everynodev1alpha1.StartDependency{{Name: "nope"}}
	x, y := testobj.Set("x"), testobj.Set("y")
	x.Spec.StartAfter = []everynodev1alpha1.StartDependency{{Name: "y"}}
	y.Spec.StartAfter = []everynodev1alpha1.StartDependency{{Name: "x"}}
	for _, ds := range []*everynodev1alpha1.DaemonSet{missing, x, y} {
		addSetWithRevision(f, ds)
	}
	f.add(newNode("n1", nil))

	f.mustSync(missing)
	if gated, _ := gatedNodes(f.podCreates()); len(gated) != 1 {
		t.Errorf("a missing dependency: gated %v, want the pod gated", gated)
	}
	if c := meta.FindStatusCondition(f.set(missing).Status.Conditions, everynodev1alpha1.ConditionStartOrderBroken); c == nil || c.Reason != everynodev1alpha1.ReasonDependencyNotFound {
		t.Errorf("a missing dependency: condition %+v", c)
	}

	f.mustSync(x)
	if gated, open := gatedNodes(f.podCreates()); len(gated) != 0 || len(open) != 1 {
		t.Errorf("a cycle: gated %v, open %v: want the pod ungated", gated, open)
	}
	c := meta.FindStatusCondition(f.set(x).Status.Conditions, everynodev1alpha1.ConditionStartOrderBroken)
	if c == nil || c.Reason != everynodev1alpha1.ReasonDependencyCycle {
		t.Fatalf("a cycle: condition %+v", c)
	}
	if want := "everynode.io/" + testobj.Namespace + "/x -> everynode.io/" + testobj.Namespace + "/y -> everynode.io/" + testobj.Namespace + "/x"; !strings.Contains(c.Message, want) {
		t.Errorf("condition message %q does not name the cycle %s", c.Message, want)
	}
}

// A dependency that does not run on the node is not waited for there.
func TestStartAfterIneligibleDependency(t *testing.T) {
	f := newFixture(t)
	a, b := testobj.Set("a"), testobj.Set("b")
	a.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"}
	b.Spec.StartAfter = []everynodev1alpha1.StartDependency{{Name: "a"}}
	addSetWithRevision(f, a)
	addSetWithRevision(f, b)
	f.add(newNode("cpu", map[string]string{"pool": "cpu"}), newNode("gpu", map[string]string{"pool": "gpu"}))
	f.mustSync(b)
	gated, open := gatedNodes(f.podCreates())
	if len(gated) != 1 || gated[0] != "gpu" || len(open) != 1 || open[0] != "cpu" {
		t.Errorf("gated %v, open %v: want gpu gated (A runs there, no pod yet), cpu open", gated, open)
	}
}

// A dependency rolling (its pod on a node replaced, the new one not Ready
// yet) holds back no pod of the dependent set that already runs there:
// nothing is gated but what is created.
func TestStartAfterDependencyRolloutLeavesRunningPods(t *testing.T) {
	f := newFixture(t)
	a, b := testobj.Set("a"), testobj.Set("b")
	b.Spec.StartAfter = []everynodev1alpha1.StartDependency{{Name: "a"}}
	hashA := addSetWithRevision(f, a)
	hashB := addSetWithRevision(f, b)
	f.add(newNode("n1", nil), newNode("n2", nil))
	old := testobj.Pod(a, "n1", hashA)
	now := metav1.NewTime(testobj.T0)
	old.DeletionTimestamp = &now
	f.add(old, testobj.Pod(a, "n1", "new", testobj.NotReady), testobj.Pod(a, "n2", "new", testobj.NotReady))
	f.add(testobj.Pod(b, "n1", hashB), testobj.Pod(b, "n2", hashB))
	f.mustSync(b)
	for _, act := range f.kube.Actions() {
		if v := act.GetVerb(); act.GetResource().Resource == "pods" && (v == "create" || v == "patch" || v == "update" || v == "delete") {
			t.Errorf("dependency rolling: b's sync sent %s %s", v, act.GetResource().Resource)
		}
	}
}

// The sets that start after a dependency are queued when its spec changes
// (it may leave nodes where they wait), when it appears or goes, and when
// one of its pods turns Ready; nothing else about it wakes them.
func TestStartAfterWakesDependents(t *testing.T) {
	f := newFixture(t)
	a, b, other := testobj.Set("a"), testobj.Set("b"), testobj.Set("other")
	b.Spec.StartAfter = []everynodev1alpha1.StartDependency{{Name: "a"}}
	f.add(a, b, other)
	h := f.c.startOrderSetHandler(klogDiscard, f.c.setStartKeys)
	apps := f.c.startOrderSetHandler(klogDiscard, appsStartKeys)
	newer := a.DeepCopy()
	newer.Generation++
	relabeled := a.DeepCopy()
	relabeled.Labels = map[string]string{"x": "y"}
	want := testobj.Namespace + "/b"
	for name, tc := range map[string]struct {
		event func()
		wake  bool
	}{
		"a's spec changes":    {func() { h.OnUpdate(a, newer) }, true},
		"a's labels change":   {func() { h.OnUpdate(a, relabeled) }, false},
		"a appears":           {func() { h.OnAdd(a, false) }, true},
		"a goes":              {func() { h.OnDelete(a) }, true},
		"another set appears": {func() { h.OnAdd(other, false) }, false},
		"an apps/v1 a appears": {func() {
			apps.OnAdd(&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: testobj.Namespace, Name: "a"}}, false)
		}, false},
		"a's pod turns Ready": {func() {
			f.c.startOrderPodHandler(klogDiscard).OnUpdate(testobj.Pod(a, "n1", "h", testobj.NotReady), testobj.Pod(a, "n1", "h"))
		}, true},
		"a's pod stays Ready": {func() {
			f.c.startOrderPodHandler(klogDiscard).OnUpdate(testobj.Pod(a, "n1", "h"), testobj.Pod(a, "n1", "h"))
		}, false},
		"other's pod turns Ready": {func() {
			f.c.startOrderPodHandler(klogDiscard).OnUpdate(testobj.Pod(other, "n1", "h", testobj.NotReady), testobj.Pod(other, "n1", "h"))
		}, false},
	} {
		t.Run(name, func(t *testing.T) {
			f.queue.drain()
			tc.event()
			keys := f.queue.drain()
			for _, d := range f.queue.takeDelayed() {
				keys = append(keys, d.key)
			}
			if woke := slices.Contains(keys, want); woke != tc.wake {
				t.Errorf("queued %v; want b queued: %v", keys, tc.wake)
			}
		})
	}
}
