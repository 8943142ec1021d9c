package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// In-place updates: kwok plays the kubelet's part (e2e/kwok: a running
// pod whose image changes restarts that container after a second).

const inPlaceNodes, inPlaceMaxUnavailable = 6, 2

// podRecord is what an in-place update must keep of a pod.
type podRecord struct {
	uid, ip  string
	restarts int32
}

func recordPods(t *testing.T, ns, set string) map[string]podRecord {
	t.Helper()
	out := map[string]podRecord{}
	for _, p := range daemonPods(t, ns, set) {
		var restarts int32
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
		out[p.Spec.NodeName] = podRecord{uid: string(p.UID), ip: p.Status.PodIP, restarts: restarts}
	}
	return out
}

// outOfService reports whether a pod is out of service as a user sees it:
// not Ready, its in-place gate not True, or a container not yet running
// the image of its spec.
func outOfService(p *corev1.Pod) bool {
	if podCondition(p, corev1.PodReady) != corev1.ConditionTrue {
		return true
	}
	for _, g := range p.Spec.ReadinessGates {
		if podCondition(p, g.ConditionType) != corev1.ConditionTrue {
			return true
		}
	}
	for _, c := range p.Spec.Containers {
		if cs := containerStatus(p, c.Name); cs == nil || cs.Image != c.Image {
			return true
		}
	}
	return false
}

// serviceWatch keeps, from a namespace's pods' events, the most pods out
// of service at once and every pod created or deleted, from start to
// finish.
type serviceWatch struct {
	down     map[string]bool
	mostDown int
	created  []string
	deleted  []string
	stop     func()
}

func watchService(t *testing.T, ns string) *serviceWatch {
	t.Helper()
	s := &serviceWatch{down: map[string]bool{}}
	s.stop = watchPods(t, ns, func(initial []corev1.Pod) {
		for i := range initial {
			s.down[initial[i].Name] = outOfService(&initial[i])
		}
	}, s.see)
	return s
}

// see takes one pod event.
func (s *serviceWatch) see(ev watch.EventType, p *corev1.Pod) {
	switch {
	case ev == watch.Added:
		s.created = append(s.created, p.Name)
	case ev == watch.Deleted:
		s.deleted = append(s.deleted, p.Name)
	case p.DeletionTimestamp != nil && !slices.Contains(s.deleted, p.Name):
		s.deleted = append(s.deleted, p.Name)
	}
	if ev == watch.Deleted {
		delete(s.down, p.Name)
	} else {
		s.down[p.Name] = outOfService(p)
	}
	n := 0
	for _, d := range s.down {
		if d {
			n++
		}
	}
	s.mostDown = max(s.mostDown, n)
}

// finish stops the watch and returns what it saw.
func (s *serviceWatch) finish() (mostDown int, created, deleted []string) {
	s.stop()
	return s.mostDown, s.created, s.deleted
}

func inPlaceEvents(t *testing.T, ns string) int {
	t.Helper()
	list, err := kube.CoreV1().Events(ns).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Reason == "SuccessfulUpdateInPlace" {
			n += int(max(e.Count, 1))
		}
	}
	return n
}

// An image-only update under InPlaceIfPossible, on 6 nodes with
// maxUnavailable 2: every pod keeps its UID and IP, its container restarts
// once, no pod is created or deleted, and never more than 2 pods are out of
// service (Ready, the gate, or the running image, from a watch of every pod
// change). An image-only rollback is in place too. Switching the gate
// policy to Never with an image change updates the gated pods in place,
// their gates left open, and so does the next image update. Then an env
// change recreates every pod, without the gate.
func TestInPlaceUpdate(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "inplace-" + randSuffix()}
	nodes := createNodes(t, "inplace", inPlaceNodes, sel)
	ds := simpleSet(ns, "agent", sel)
	ds.Spec.UpdateStrategy.RollingUpdate = &everynodev1alpha1.RollingUpdateDaemonSet{
		MaxUnavailable:  ptr.To(intstr.FromInt32(inPlaceMaxUnavailable)),
		PodUpdatePolicy: everynodev1alpha1.PodUpdateInPlaceIfPossible,
	}
	createSet(t, ds)
	const v1, v2 = "registry.example/agent:v1", "registry.example/agent:v2"
	eventually(t, settle, "v1 everywhere, gates open", rolledOut(t, ns, "agent", nodes, v1))
	for _, p := range daemonPods(t, ns, "agent") {
		if len(p.Spec.ReadinessGates) != 1 || p.Spec.ReadinessGates[0].ConditionType != everynodev1alpha1.ConditionInPlaceUpdateReady {
			t.Fatalf("pod %s has readiness gates %v, want the in-place gate", p.Name, p.Spec.ReadinessGates)
		}
	}

	// countEvents: the event recorder lets 25 events of one set through,
	// then one per 5 minutes, so only the first step's can be counted.
	step := func(what, img string, countEvents bool, change func(*everynodev1alpha1.DaemonSet)) {
		t.Helper()
		before := recordPods(t, ns, "agent")
		events := inPlaceEvents(t, ns)
		w := watchService(t, ns)
		updateSet(t, ns, "agent", change)
		eventually(t, settle, what, rolledOut(t, ns, "agent", nodes, img))
		mostDown, created, deleted := w.finish()
		after := recordPods(t, ns, "agent")
		t.Logf("%s: at most %d of %d pods out of service; %d created, %d deleted; %d in-place events",
			what, mostDown, len(nodes), len(created), len(deleted), inPlaceEvents(t, ns)-events)
		if mostDown > inPlaceMaxUnavailable {
			t.Errorf("%s: %d pods out of service at once, maxUnavailable %d", what, mostDown, inPlaceMaxUnavailable)
		}
		if len(created)+len(deleted) > 0 {
			t.Errorf("%s: pods created %v, deleted %v; an in-place update makes none", what, created, deleted)
		}
		var changed []string
		for node, b := range before {
			a := after[node]
			if a.uid != b.uid || a.ip != b.ip || a.restarts != b.restarts+1 {
				changed = append(changed, fmt.Sprintf("%s: uid %s->%s ip %s->%s restarts %d->%d", node, b.uid, a.uid, b.ip, a.ip, b.restarts, a.restarts))
			}
		}
		sort.Strings(changed)
		if len(changed) > 0 {
			t.Errorf("%s: want the same UID and IP and one more restart on every node:\n%s", what, strings.Join(changed, "\n"))
		}
		if got := inPlaceEvents(t, ns) - events; countEvents && got != len(nodes) {
			t.Errorf("%s: %d SuccessfulUpdateInPlace events, want %d", what, got, len(nodes))
		}
	}

	step("v2 in place", v2, true, func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = v2 })

	revs := revisions(t, ns, "agent")
	var first struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(revs[0].Data.Raw, &first); err != nil {
		t.Fatal(err)
	}
	step("rollback to v1 in place", v1, false, func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template = first.Spec.Template })

	t.Log("Never: the gated pods are updated in place, their gates left open")
	const v3 = "registry.example/agent:v3"
	step("v3 in place, gate policy Never in the same edit", v3, false, func(ds *everynodev1alpha1.DaemonSet) {
		ds.Spec.UpdateStrategy.RollingUpdate.InPlaceGatePolicy = everynodev1alpha1.InPlaceGateNever
		ds.Spec.Template.Spec.Containers[0].Image = v3
	})
	for _, p := range daemonPods(t, ns, "agent") {
		if g := placement.InPlaceGateCondition(&p); len(p.Spec.ReadinessGates) != 1 || g == nil || g.Status != corev1.ConditionTrue {
			t.Errorf("pod %s: readiness gates %v, gate condition %v; want the gate kept, True", p.Name, p.Spec.ReadinessGates, g)
		}
	}
	// With the gate not closed, a patched pod stays Ready until the
	// kubelet restarts its container (a second, in kwok): only the
	// controller's own count keeps the budget.
	step("v2 in place, gate not closed", v2, false, func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = v2 })

	t.Log("an env change recreates")
	before := recordPods(t, ns, "agent")
	updateSet(t, ns, "agent", func(ds *everynodev1alpha1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "b"}}
	})
	eventually(t, settle, "the env change everywhere", func() (bool, string, error) {
		ok, msg, err := podsOnNodes(t, ns, "agent", nodes, func(p *corev1.Pod) string {
			if len(p.Spec.Containers[0].Env) != 1 {
				return "old env"
			}
			return ""
		})
		if !ok || err != nil {
			return ok, msg, err
		}
		return rolledOut(t, ns, "agent", nodes, v2)()
	})
	for node, a := range recordPods(t, ns, "agent") {
		if a.uid == before[node].uid {
			t.Errorf("node %s: pod %s kept its UID across an env change", node, a.uid)
		}
	}
	// Recreated under Never: without the gate.
	for _, p := range daemonPods(t, ns, "agent") {
		if len(p.Spec.ReadinessGates) != 0 {
			t.Errorf("pod %s recreated under gate policy Never has readiness gates %v", p.Name, p.Spec.ReadinessGates)
		}
	}
}

// inPlaceGatePolicy IfServed, with a Service that selects the pods of two
// of four nodes (a node override labels them): only those get the gate
// when made, and an image update closes the gate of only those (gate
// False before the image changes, True after); the other two are patched
// with no gate write at all. Every pod keeps its UID.
func TestInPlaceIfServed(t *testing.T) {
	ns := newNamespace(t)
	scenario := "ifserved-" + randSuffix()
	sel := map[string]string{scenarioLabel: scenario}
	served := createNodes(t, "served", 2, map[string]string{scenarioLabel: scenario, "served": "yes"})
	unserved := createNodes(t, "unserved", 2, sel)
	nodes := append(append([]string(nil), served...), unserved...)

	_, err := kube.CoreV1().Services(ns).Create(ctx(t), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "agent", "served": "yes"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds := simpleSet(ns, "agent", sel)
	ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{{
		NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"served": "yes"}},
		Patch:        runtime.RawExtension{Raw: []byte(`{"metadata":{"labels":{"served":"yes"}}}`)},
	}}
	ds.Spec.UpdateStrategy.RollingUpdate = &everynodev1alpha1.RollingUpdateDaemonSet{
		MaxUnavailable:    ptr.To(intstr.FromInt32(4)),
		PodUpdatePolicy:   everynodev1alpha1.PodUpdateInPlaceIfPossible,
		InPlaceGatePolicy: everynodev1alpha1.InPlaceGateIfServed,
	}
	createSet(t, ds)
	const v1, v2 = "registry.example/agent:v1", "registry.example/agent:v2"
	eventually(t, settle, "v1 everywhere", rolledOut(t, ns, "agent", nodes, v1))
	isServed := map[string]bool{served[0]: true, served[1]: true}
	for _, p := range daemonPods(t, ns, "agent") {
		if gated := len(p.Spec.ReadinessGates) == 1; gated != isServed[p.Spec.NodeName] {
			t.Errorf("pod %s on %s: readiness gates %v; want the gate only on the pods the Service selects", p.Name, p.Spec.NodeName, p.Spec.ReadinessGates)
		}
	}
	eventually(t, settle, "the Service's EndpointSlice to list the 2 served pods", func() (bool, string, error) {
		slices, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx(t), metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=agent"})
		if err != nil {
			return false, "", err
		}
		n := 0
		for _, s := range slices.Items {
			n += len(s.Endpoints)
		}
		return n == 2, fmt.Sprintf("%d endpoints", n), nil
	})

	// Each pod's story, from every change: its gate's condition status
	// each time the pod changed, and when its image did.
	type story struct {
		gate            []corev1.ConditionStatus
		closedThenImage bool
		imageChanged    bool
	}
	stories := map[string]*story{}
	var mu sync.Mutex
	before := recordPods(t, ns, "agent")
	stop := watchPods(t, ns, nil, func(ev watch.EventType, p *corev1.Pod) {
		mu.Lock()
		defer mu.Unlock()
		s := stories[p.Spec.NodeName]
		if s == nil {
			s = &story{}
			stories[p.Spec.NodeName] = s
		}
		g := corev1.ConditionStatus("")
		if c := placement.InPlaceGateCondition(p); c != nil {
			g = c.Status
		}
		if n := len(s.gate); n == 0 || s.gate[n-1] != g {
			s.gate = append(s.gate, g)
		}
		if !s.imageChanged && p.Spec.Containers[0].Image == v2 {
			s.imageChanged = true
			s.closedThenImage = g == corev1.ConditionFalse
		}
	})
	updateSet(t, ns, "agent", func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = v2 })
	eventually(t, settle, "v2 everywhere, gates open", rolledOut(t, ns, "agent", nodes, v2))
	stop()
	after := recordPods(t, ns, "agent")
	mu.Lock()
	defer mu.Unlock()
	for _, node := range nodes {
		s := stories[node]
		if s == nil {
			t.Errorf("%s: the pod never changed", node)
			continue
		}
		t.Logf("%s (served %v): gate %v, closed before the image changed %v", node, isServed[node], s.gate, s.closedThenImage)
		if before[node].uid != after[node].uid {
			t.Errorf("%s: pod recreated (%s -> %s)", node, before[node].uid, after[node].uid)
		}
		switch {
		case isServed[node] && (!s.closedThenImage || s.gate[len(s.gate)-1] != corev1.ConditionTrue):
			t.Errorf("%s: a served pod's gate must close before its image changes and open after: %v", node, s.gate)
		case !isServed[node] && (len(s.gate) != 1 || s.gate[0] != ""):
			t.Errorf("%s: an unserved pod has no gate, and none is written: %v", node, s.gate)
		}
	}
}
