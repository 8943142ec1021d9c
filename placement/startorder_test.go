package placement_test

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

func startPod(ready, deleting bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "dep-x"}}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	if deleting {
		now := metav1.Now()
		p.DeletionTimestamp = &now
	}
	return p
}

// The dependency rule: which dependencies a node's pod waits for, given
// the dependencies, their eligibility on the node and their pods there.
func TestStartOrderWaits(t *testing.T) {
	key := placement.StartKey{Group: "everynode.io", Namespace: "ns", Name: "dep"}
	plain := eligibilitySet(nil)
	onlySSD := eligibilitySet(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"disk": "ssd"} })
	node := eligibilityNode("n1", map[string]string{"disk": "hdd"})
	noSchedule := eligibilityNode("n1", nil, taint("gpu", corev1.TaintEffectNoSchedule))
	noExecute := eligibilityNode("n1", nil, taint("gpu", corev1.TaintEffectNoExecute))

	cases := map[string]struct {
		dep  placement.StartDependency
		node *corev1.Node
		pods []*corev1.Pod
		want string // the reason waited for; "" for none
	}{
		"missing set waits":                 {dep: placement.StartDependency{Key: key}, node: node, want: placement.WaitNotFound},
		"cyclic dependency is not waited":   {dep: placement.StartDependency{Key: key, Set: plain, Cyclic: true}, node: node},
		"cyclic missing is not waited":      {dep: placement.StartDependency{Key: key, Cyclic: true}, node: node},
		"eligible, no pod yet":              {dep: placement.StartDependency{Key: key, Set: plain}, node: node, want: placement.WaitNoPod},
		"eligible, pod not Ready":           {dep: placement.StartDependency{Key: key, Set: plain}, node: node, pods: []*corev1.Pod{startPod(false, false)}, want: placement.WaitNotReady},
		"eligible, pod Ready":               {dep: placement.StartDependency{Key: key, Set: plain}, node: node, pods: []*corev1.Pod{startPod(true, false)}},
		"eligible, Ready pod being deleted": {dep: placement.StartDependency{Key: key, Set: plain}, node: node, pods: []*corev1.Pod{startPod(true, true)}, want: placement.WaitNoPod},
		"old pod deleting, new Ready":       {dep: placement.StartDependency{Key: key, Set: plain}, node: node, pods: []*corev1.Pod{startPod(true, true), startPod(true, false)}},
		"one of two Ready":                  {dep: placement.StartDependency{Key: key, Set: plain}, node: node, pods: []*corev1.Pod{startPod(false, false), startPod(true, false)}},
		"selector excludes the node":        {dep: placement.StartDependency{Key: key, Set: onlySSD}, node: node},
		"NoExecute taint excludes the node": {dep: placement.StartDependency{Key: key, Set: plain}, node: noExecute},
		"NoSchedule taint, no pod":          {dep: placement.StartDependency{Key: key, Set: plain}, node: noSchedule},
		"NoSchedule taint, pod not Ready":   {dep: placement.StartDependency{Key: key, Set: plain}, node: noSchedule, pods: []*corev1.Pod{startPod(false, false)}, want: placement.WaitNotReady},
		"NoSchedule taint, pod Ready":       {dep: placement.StartDependency{Key: key, Set: plain}, node: noSchedule, pods: []*corev1.Pod{startPod(true, false)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := placement.NewStartOrder([]placement.StartDependency{tc.dep})
			got := o.Waits(tc.node, func(i int) []*corev1.Pod {
				if i != 0 {
					t.Fatalf("podsOf(%d) for one dependency", i)
				}
				return tc.pods
			})
			switch {
			case tc.want == "" && len(got) != 0:
				t.Errorf("waits for %v, want nothing", got)
			case tc.want != "" && (len(got) != 1 || got[0].Why != tc.want || got[0].Key != key):
				t.Errorf("waits for %v, want %s: %s", got, key, tc.want)
			}
		})
	}
}

// Several dependencies: the waits come in spec order, and the pods asked
// for are each dependency's own.
func TestStartOrderWaitsSeveral(t *testing.T) {
	a := placement.StartKey{Group: "everynode.io", Namespace: "ns", Name: "a"}
	b := placement.StartKey{Group: "apps", Namespace: "kube-system", Name: "b"}
	c := placement.StartKey{Group: "everynode.io", Namespace: "ns", Name: "c"}
	o := placement.NewStartOrder([]placement.StartDependency{
		{Key: a, Set: eligibilitySet(nil)}, {Key: b, Set: eligibilitySet(nil)}, {Key: c},
	})
	pods := map[int][]*corev1.Pod{0: {startPod(false, false)}, 1: {startPod(true, false)}}
	got := o.Waits(eligibilityNode("n1", nil), func(i int) []*corev1.Pod { return pods[i] })
	want := []placement.StartWait{{Key: a, Why: placement.WaitNotReady}, {Key: c, Why: placement.WaitNotFound}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}
	if (*placement.StartOrder)(nil).Waits(eligibilityNode("n1", nil), nil) != nil {
		t.Error("a set without dependencies waits")
	}
}

func TestStartAfterKeys(t *testing.T) {
	ds := eligibilitySet(nil)
	ds.Spec.StartAfter = []everynodev1alpha1.StartDependency{
		{Name: "a"}, {APIGroup: "apps", Namespace: "kube-system", Name: "kube-proxy"}, {APIGroup: "everynode.io", Namespace: "ns", Name: "a"},
	}
	got := placement.StartAfterKeys(ds)
	want := []placement.StartKey{{Group: "everynode.io", Namespace: "ns", Name: "a"}, {Group: "apps", Namespace: "kube-system", Name: "kube-proxy"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("keys %v, want %v", got, want)
	}
}

func TestStartCycle(t *testing.T) {
	k := func(name string) placement.StartKey {
		return placement.StartKey{Group: "everynode.io", Namespace: "ns", Name: name}
	}
	apps := placement.StartKey{Group: "apps", Namespace: "ns", Name: "a"}
	cases := map[string]struct {
		graph map[string][]placement.StartKey
		start string
		want  string
	}{
		"no edges":              {graph: map[string][]placement.StartKey{}, start: "a"},
		"chain":                 {graph: map[string][]placement.StartKey{"a": {k("b")}, "b": {k("c")}}, start: "a"},
		"self":                  {graph: map[string][]placement.StartKey{"a": {k("a")}}, start: "a", want: "everynode.io/ns/a -> everynode.io/ns/a"},
		"two":                   {graph: map[string][]placement.StartKey{"a": {k("b")}, "b": {k("a")}}, start: "a", want: "everynode.io/ns/a -> everynode.io/ns/b -> everynode.io/ns/a"},
		"three, found from b":   {graph: map[string][]placement.StartKey{"a": {k("b")}, "b": {k("c")}, "c": {k("a")}}, start: "b", want: "everynode.io/ns/b -> everynode.io/ns/c -> everynode.io/ns/a -> everynode.io/ns/b"},
		"cycle not through a":   {graph: map[string][]placement.StartKey{"a": {k("b")}, "b": {k("c")}, "c": {k("b")}}, start: "a"},
		"diamond, no cycle":     {graph: map[string][]placement.StartKey{"a": {k("b"), k("c")}, "b": {k("d")}, "c": {k("d")}}, start: "a"},
		"apps of the same name": {graph: map[string][]placement.StartKey{"a": {apps}}, start: "a"},
		"dead end then cycle":   {graph: map[string][]placement.StartKey{"a": {k("x"), k("b")}, "b": {k("a")}}, start: "a", want: "everynode.io/ns/a -> everynode.io/ns/b -> everynode.io/ns/a"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			edges := func(key placement.StartKey) []placement.StartKey {
				if key.Group != "everynode.io" {
					return nil
				}
				return tc.graph[key.Name]
			}
			got := placement.CycleString(placement.StartCycle(k(tc.start), edges))
			if got != tc.want {
				t.Errorf("cycle %q, want %q", got, tc.want)
			}
		})
	}
}

func TestStartGate(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "other"}}}}
	if placement.HasStartGate(pod) {
		t.Fatal("gate before WithStartGate")
	}
	placement.WithStartGate(pod)
	placement.WithStartGate(pod)
	if !placement.HasStartGate(pod) || len(pod.Spec.SchedulingGates) != 2 {
		t.Fatalf("gates %v", pod.Spec.SchedulingGates)
	}
	want := `{"spec":{"schedulingGates":[{"$patch":"delete","name":"everynode.io/start-after"}]}}`
	if got := string(placement.StartGateRemovalPatch()); got != want {
		t.Errorf("patch %s, want %s", got, want)
	}
	// The API server applies it as a strategic merge patch: only our gate
	// goes.
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	out, err := strategicpatch.StrategicMergePatch(raw, placement.StartGateRemovalPatch(), corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	var patched corev1.Pod
	if err := json.Unmarshal(out, &patched); err != nil {
		t.Fatal(err)
	}
	if placement.HasStartGate(&patched) || len(patched.Spec.SchedulingGates) != 1 || patched.Spec.SchedulingGates[0].Name != "other" {
		t.Errorf("gates after the patch: %v", patched.Spec.SchedulingGates)
	}
}
