package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// Start order (spec.startAfter). The dependency is slow to turn Ready
// because its pods carry a readiness gate that only the test opens, node by
// node (kwok holds Ready until then, as a kubelet would: e2e/kwok): so the
// order of events is the test's, and no step depends on a delay.

// slowGate is the readiness gate that holds a dependency's pods not Ready.
const slowGate = "e2e.everynode.io/slow"

func withSlowGate(spec *corev1.PodSpec) {
	spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: slowGate}}
}

// openSlowGate makes pod Ready: its gate's condition True.
func openSlowGate(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":"True"}]}}`, slowGate)
	if _, err := kube.CoreV1().Pods(pod.Namespace).Patch(ctx(t), pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("open the slow gate of %s: %v", pod.Name, err)
	}
}

func hasStartGate(p *corev1.Pod) bool {
	for _, g := range p.Spec.SchedulingGates {
		if g.Name == everynodev1alpha1.SchedulingGateStartAfter {
			return true
		}
	}
	return false
}

// podsByTarget returns pods by the node they are made for.
func podsByTarget(pods []corev1.Pod) map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	for i := range pods {
		out[pods[i].Annotations[everynodev1alpha1.AnnotationTargetNode]] = &pods[i]
	}
	return out
}

// conditionTime is when the pod's condition of type typ last turned
// True; ok is false if it is not True.
func conditionTime(p *corev1.Pod, typ corev1.PodConditionType) (time.Time, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// gatedAndUnbound checks that on every node of nodes the set has exactly
// one pod, which holds the start-after gate and is bound to no node.
func gatedAndUnbound(t *testing.T, ns, set string, nodes []string) (bool, string, error) {
	by := podsByTarget(daemonPods(t, ns, set))
	var problems []string
	for _, n := range nodes {
		p := by[n]
		switch {
		case p == nil:
			problems = append(problems, n+": no pod yet")
		case !hasStartGate(p):
			problems = append(problems, fmt.Sprintf("%s: pod %s has no start-after gate", n, p.Name))
		case p.Spec.NodeName != "":
			problems = append(problems, fmt.Sprintf("%s: pod %s is bound", n, p.Name))
		}
	}
	return len(problems) == 0, strings.Join(problems, "; "), nil
}

// podEvents records, from one watch of a namespace's pods, the position in
// the watch of the first event that showed each set's pod for each node
// Ready, and bound. One watch delivers a namespace's changes in the order
// kube-apiserver made them (resourceVersion order, resumed where it left
// off if the watch is cut), so comparing positions orders two events
// without comparing clocks, whose conditions keep whole seconds only.
type podEvents struct {
	mu           sync.Mutex
	n            int
	ready, bound map[string]int // "set/node" -> position
	err          error
}

func watchPodEvents(t *testing.T, ns string) *podEvents {
	t.Helper()
	list, err := kube.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	w, err := watchtools.NewRetryWatcherWithContext(wctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(c context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return kube.CoreV1().Pods(ns).Watch(c, o)
		},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	e := &podEvents{ready: map[string]int{}, bound: map[string]int{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				e.mu.Lock()
				e.err = fmt.Errorf("watch event %s of %T", ev.Type, ev.Object)
				e.mu.Unlock()
				continue
			}
			ref := metav1.GetControllerOf(p)
			if ref == nil {
				continue
			}
			key := ref.Name + "/" + p.Annotations[everynodev1alpha1.AnnotationTargetNode]
			e.mu.Lock()
			e.n++
			if _, seen := e.ready[key]; !seen && podCondition(p, corev1.PodReady) == corev1.ConditionTrue {
				e.ready[key] = e.n
			}
			if _, seen := e.bound[key]; !seen && p.Spec.NodeName != "" {
				e.bound[key] = e.n
			}
			e.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Stop(); cancel(); <-done })
	return e
}

// order returns the positions of set's pod for node turning Ready and
// being bound; 0 for not seen.
func (e *podEvents) order(set, node string) (ready, bound int, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ready[set+"/"+node], e.bound[set+"/"+node], e.err
}

// TestStartAfterWaitsForDependencyOnEachNode: set b starts after set a,
// whose pods are slow to turn Ready. On 5 nodes and one that joins later,
// b's pod on a node is created with the start-after gate and stays
// unbound until a's pod on that node is Ready, and only there: opening a's
// pods one node at a time, every node not yet opened still holds b's pod
// gated and unbound. At the end, on every node, b's pod was bound after
// a's pod there turned Ready, in the order of one watch of the pods (and
// its PodScheduled is no earlier than a's Ready, to the second). A
// controller that never gates fails the first check (b's pods are bound at
// once); one that ungates every node when one turns Ready fails the
// per-node check.
func TestStartAfterWaitsForDependencyOnEachNode(t *testing.T) {
	ns := newNamespace(t)
	events := watchPodEvents(t, ns)
	sel := map[string]string{scenarioLabel: "order-" + randSuffix()}
	nodes := createNodes(t, "order", 5, sel)
	a := simpleSet(ns, "a", sel)
	withSlowGate(&a.Spec.Template.Spec)
	createSet(t, a)
	b := simpleSet(ns, "b", sel)
	b.Spec.StartAfter = []everynodev1alpha1.StartDependency{{Name: "a"}}
	createSet(t, b)

	eventually(t, settle, "a's pods Running, not Ready, on the 5 nodes", func() (bool, string, error) {
		return aRunningNotReady(t, ns, nodes)
	})
	eventually(t, settle, "b's pods gated and unbound on the 5 nodes", func() (bool, string, error) {
		return gatedAndUnbound(t, ns, "b", nodes)
	})

	t.Log("a node joins while a is not Ready anywhere")
	nodes = append(nodes, createNodes(t, "order", 1, sel)...)
	eventually(t, settle, "a's and b's pods for the new node", func() (bool, string, error) {
		if ok, msg, err := aRunningNotReady(t, ns, nodes); !ok {
			return ok, msg, err
		}
		return gatedAndUnbound(t, ns, "b", nodes)
	})

	// Open a's pods one node at a time, the joined node among them.
	order := slices.Clone(nodes)
	slices.Reverse(order)
	for i, n := range order {
		t.Logf("a's pod on %s turns Ready", n)
		openSlowGate(t, podsByTarget(daemonPods(t, ns, "a"))[n])
		eventually(t, settle, "b's pod Running and Ready on "+n, func() (bool, string, error) {
			return readyOn(t, ns, "b", order[:i+1])
		})
		if rest := order[i+1:]; len(rest) > 0 {
			if ok, msg, err := gatedAndUnbound(t, ns, "b", rest); err != nil || !ok {
				t.Fatalf("b's pods on the nodes where a is not Ready yet: %s %v", msg, err)
			}
		}
	}

	aPods, bPods := podsByTarget(daemonPods(t, ns, "a")), podsByTarget(daemonPods(t, ns, "b"))
	for _, n := range nodes {
		readyAt, ok := conditionTime(aPods[n], corev1.PodReady)
		if !ok {
			t.Fatalf("a's pod on %s is not Ready", n)
		}
		scheduledAt, ok := conditionTime(bPods[n], corev1.PodScheduled)
		if !ok {
			t.Fatalf("b's pod on %s is not scheduled", n)
		}
		aReady, _, errA := events.order("a", n)
		_, bBound, errB := events.order("b", n)
		switch err := errors.Join(errA, errB); {
		case err != nil:
			t.Errorf("watching the pods: %v", err)
		case aReady == 0 || bBound == 0:
			t.Errorf("%s: the watch saw a's pod Ready at event %d, b's pod bound at event %d (0: not seen)", n, aReady, bBound)
		case bBound < aReady:
			t.Errorf("%s: b's pod bound at event %d of the watch, before a's pod turned Ready at event %d", n, bBound, aReady)
		}
		if scheduledAt.Before(readyAt) {
			t.Errorf("%s: b's pod scheduled at %s, before a's pod turned Ready at %s", n, scheduledAt.Format(time.RFC3339), readyAt.Format(time.RFC3339))
		}
		// The gate came off in one write: generation 1 at creation, 2
		// after (kube-apiserver counts spec changes of pods).
		if g := bPods[n].Generation; g != 2 {
			t.Errorf("%s: b's pod has generation %d, want 2 (created gated, one update removing the gate)", n, g)
		}
		t.Logf("%s: a Ready at %s (watch event %d), b scheduled at %s (bound: watch event %d)", n, readyAt.Format(time.RFC3339), aReady, scheduledAt.Format(time.RFC3339), bBound)
	}
}

// readyOn checks that the set's pod made for each of nodes is bound there,
// Running and Ready; pods made for other nodes may be in any state.
func readyOn(t *testing.T, ns, set string, nodes []string) (bool, string, error) {
	by := podsByTarget(daemonPods(t, ns, set))
	for _, n := range nodes {
		p := by[n]
		if p == nil || p.Spec.NodeName != n || !isRunningReady(p) {
			state := "no pod"
			if p != nil {
				state = describePod(p)
			}
			return false, n + ": " + state, nil
		}
	}
	return true, "", nil
}

func aRunningNotReady(t *testing.T, ns string, nodes []string) (bool, string, error) {
	by := podsByTarget(daemonPods(t, ns, "a"))
	for _, n := range nodes {
		p := by[n]
		if p == nil || p.Status.Phase != corev1.PodRunning || podCondition(p, corev1.PodReady) == corev1.ConditionTrue {
			state := "no pod"
			if p != nil {
				state = describePod(p)
			}
			return false, n + ": " + state, nil
		}
	}
	return true, "", nil
}

// TestStartAfterReadyDependencyNoGate: when the dependency is Ready on
// every node, the dependent's pods are created without the gate: no extra
// write. A pod's generation counts its spec changes (1 at creation), so a
// pod created gated and ungated at once shows 2, which is what a
// controller that always gates would leave.
func TestStartAfterReadyDependencyNoGate(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "order-ready-" + randSuffix()}
	nodes := createNodes(t, "ready", 5, sel)
	createSet(t, simpleSet(ns, "a", sel))
	eventually(t, settle, "a Ready on the 5 nodes", func() (bool, string, error) {
		return podsOnNodes(t, ns, "a", nodes, nil)
	})
	c := simpleSet(ns, "c", sel)
	c.Spec.StartAfter = []everynodev1alpha1.StartDependency{{Name: "a"}}
	createSet(t, c)
	eventually(t, settle, "c Ready on the 5 nodes, created without the gate", func() (bool, string, error) {
		return podsOnNodes(t, ns, "c", nodes, func(p *corev1.Pod) string {
			if p.Generation != 1 {
				return fmt.Sprintf("pod %s has generation %d: its spec changed after creation (a gate removed)", p.Name, p.Generation)
			}
			return ""
		})
	})
}

// TestStartAfterCycleRefused: the webhook refuses a startAfter that closes
// a cycle, naming it; a dependency that does not exist yet is accepted
// (and waited for).
func TestStartAfterCycleRefused(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "order-cycle-" + randSuffix()}
	x := simpleSet(ns, "x", sel)
	x.Spec.StartAfter = []everynodev1alpha1.StartDependency{{Name: "y"}}
	createSet(t, x)
	y := simpleSet(ns, "y", sel)
	y.Spec.StartAfter = []everynodev1alpha1.StartDependency{{Name: "x"}}
	// The webhook reads sets from its cache: x may take a moment to show.
	eventually(t, time.Minute, "y refused for closing the cycle", func() (bool, string, error) {
		_, err := everynode.EverynodeV1alpha1().DaemonSets(ns).Create(ctx(t), y, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return false, "accepted", nil
		}
		want := fmt.Sprintf("everynode.io/%s/y -> everynode.io/%s/x -> everynode.io/%s/y", ns, ns, ns)
		if !strings.Contains(err.Error(), want) {
			return false, "", fmt.Errorf("refused, but without naming the cycle %s: %w", want, err)
		}
		return true, "", nil
	})
	self := simpleSet(ns, "self", sel)
	self.Spec.StartAfter = []everynodev1alpha1.StartDependency{{Name: "self"}}
	if _, err := everynode.EverynodeV1alpha1().DaemonSets(ns).Create(ctx(t), self, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("a set starting after itself: %v, want a refusal naming the cycle", err)
	}
}

// TestStartAfterAppsDaemonSet: an everynode set starts after an apps/v1
// DaemonSet (kube-controller-manager's pods, as kube-proxy's): its pods
// wait, gated and unbound, until the apps/v1 pod on their node is Ready.
func TestStartAfterAppsDaemonSet(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "order-apps-" + randSuffix()}
	nodes := createNodes(t, "apps", 5, sel)
	labels := map[string]string{"app": "proxy"}
	proxy := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "proxy", Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: sel,
					Containers:   []corev1.Container{{Name: "proxy", Image: "registry.example/proxy:v1"}},
				},
			},
		},
	}
	withSlowGate(&proxy.Spec.Template.Spec)
	if _, err := kube.AppsV1().DaemonSets(ns).Create(ctx(t), proxy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	proxyPods := func() map[string]*corev1.Pod {
		list, err := kube.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{LabelSelector: "app=proxy"})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*corev1.Pod{}
		for i := range list.Items {
			if p := &list.Items[i]; p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				out[p.Spec.NodeName] = p
			}
		}
		return out
	}
	eventually(t, settle, "the apps/v1 DaemonSet's pods running, not Ready, on the 5 nodes", func() (bool, string, error) {
		by := proxyPods()
		for _, n := range nodes {
			if p := by[n]; p == nil || p.Status.Phase != corev1.PodRunning {
				return false, n + ": no running pod", nil
			}
		}
		return true, "", nil
	})
	d := simpleSet(ns, "d", sel)
	d.Spec.StartAfter = []everynodev1alpha1.StartDependency{{APIGroup: everynodev1alpha1.GroupApps, Name: "proxy"}}
	createSet(t, d)
	eventually(t, settle, "d's pods gated and unbound on the 5 nodes", func() (bool, string, error) {
		return gatedAndUnbound(t, ns, "d", nodes)
	})
	openSlowGate(t, proxyPods()[nodes[0]])
	eventually(t, settle, "d's pod Running and Ready where the proxy is Ready", func() (bool, string, error) {
		return readyOn(t, ns, "d", nodes[:1])
	})
	if ok, msg, err := gatedAndUnbound(t, ns, "d", nodes[1:]); err != nil || !ok {
		t.Fatalf("d's pods where the proxy is not Ready: %s %v", msg, err)
	}
	for _, n := range nodes[1:] {
		openSlowGate(t, proxyPods()[n])
	}
	eventually(t, settle, "d Ready on the 5 nodes", func() (bool, string, error) {
		return podsOnNodes(t, ns, "d", nodes, nil)
	})
}
