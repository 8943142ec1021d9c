package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// Per-node sizing (spec.nodeSizing) on the real control plane, with kwok
// answering resizes as a kubelet does (e2e/kwok, kubelet-resize).

func cpuSize(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
}

// sizedSet asks, for its agent, fraction of the node's cpu (at least
// 100m) and 1% of its memory, with a limit of 2%.
func sizedSet(ns, name string, sel map[string]string, fraction string) *everynodev1alpha1.DaemonSet {
	ds := simpleSet(ns, name, sel)
	ds.Spec.Template.Spec.Containers[0].Resources.Requests = cpuSize("50m", "32Mi")
	ds.Spec.NodeSizing = []everynodev1alpha1.ContainerSizing{{Name: "agent", Resources: []everynodev1alpha1.ResourceSizing{
		{Resource: corev1.ResourceCPU, Requests: everynodev1alpha1.ResourceShare{Fraction: fraction, Min: ptrQuantity("100m")}},
		{Resource: corev1.ResourceMemory, Requests: everynodev1alpha1.ResourceShare{Fraction: "0.01"}, Limits: &everynodev1alpha1.ResourceShare{Fraction: "0.02"}},
	}}}
	return ds
}

func ptrQuantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// podCPU is the agent's cpu request in the pod's spec and, "" when the
// kubelet has reported none, in its status.
func podCPU(p *corev1.Pod) (spec, status string) {
	q := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
	spec = q.String()
	if st := containerStatus(p, "agent"); st != nil && st.Resources != nil {
		s := st.Resources.Requests[corev1.ResourceCPU]
		status = s.String()
	}
	return spec, status
}

// setNodeCPU changes a node's allocatable (and capacity) cpu, as a
// kubelet reports a node resized or reconfigured.
func setNodeCPU(t *testing.T, name, cpu string) {
	t.Helper()
	for range 10 {
		n, err := kube.CoreV1().Nodes().Get(ctx(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse(cpu)
		n.Status.Capacity[corev1.ResourceCPU] = resource.MustParse(cpu)
		if _, err = kube.CoreV1().Nodes().UpdateStatus(ctx(t), n, metav1.UpdateOptions{}); err == nil {
			return
		}
	}
	t.Fatalf("could not change node %s's cpu", name)
}

// Three node sizes, three pod sizes; a node that grows gets its pod
// resized in place; a new rule resizes every pod, one at a time
// (maxUnavailable 1); a rule that cannot fit is reported and left alone.
func TestPodsSizedPerNode(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "sizing-" + randSuffix()}
	small, medium, big := "sizing-small-"+randSuffix(), "sizing-medium-"+randSuffix(), "sizing-big-"+randSuffix()
	createNodeOfSize(t, small, sel, cpuSize("2", "8Gi"))
	createNodeOfSize(t, medium, sel, cpuSize("8", "32Gi"))
	createNodeOfSize(t, big, sel, cpuSize("32", "128Gi"))
	nodes := []string{small, medium, big}
	createSet(t, sizedSet(ns, "agent", sel, "0.05"))

	// 1. Three sizes at creation.
	want := map[string]string{small: "100m", medium: "400m", big: "1600m"}
	cpuIs := func(want map[string]string) func(*corev1.Pod) string {
		return func(p *corev1.Pod) string {
			if spec, _ := podCPU(p); spec != want[p.Spec.NodeName] {
				return fmt.Sprintf("cpu %s, want %s", spec, want[p.Spec.NodeName])
			}
			return ""
		}
	}
	// Sized, and reported by the kubelet (kwok reports a plain new pod's
	// resources a second after it starts; a real kubelet at once).
	reported := func(p *corev1.Pod) string {
		if spec, status := podCPU(p); status != spec {
			return fmt.Sprintf("kubelet reports cpu %q, spec %s", status, spec)
		}
		return ""
	}
	eventually(t, time.Minute, "pods sized for their nodes", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, func(p *corev1.Pod) string {
			if msg := cpuIs(want)(p); msg != "" {
				return msg
			}
			return reported(p)
		})
	})
	uids := map[string]types.UID{}
	for _, p := range daemonPods(t, ns, "agent") {
		uids[p.Spec.NodeName] = p.UID
		if lim := p.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]; p.Spec.NodeName == small && lim.String() != "163Mi" {
			t.Errorf("small node: memory limit %s, want 163Mi (2%% of 8Gi, rounded down to a Mi)", lim.String())
		}
	}
	sameUIDs := func(p *corev1.Pod) string {
		if p.UID != uids[p.Spec.NodeName] {
			return "recreated: UID " + string(p.UID)
		}
		return ""
	}
	eventually(t, 30*time.Second, "status.nodeSizing: 3 sized", func() (bool, string, error) {
		st := getSet(t, ns, "agent").Status.NodeSizing
		return st != nil && st.Sized == 3, fmt.Sprintf("%+v", st), nil
	})

	// 2. The medium node doubles: its pod is resized in place.
	setNodeCPU(t, medium, "16")
	want[medium] = "800m"
	eventually(t, time.Minute, "the medium node's pod resized in place", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, func(p *corev1.Pod) string {
			if msg := sameUIDs(p); msg != "" {
				return msg
			}
			if msg := cpuIs(want)(p); msg != "" {
				return msg
			}
			if spec, status := podCPU(p); p.Spec.NodeName == medium && status != spec {
				return "kubelet reports cpu " + status
			}
			return ""
		})
	})

	// 3. A new rule resizes every pod, never two at once.
	updateSet(t, ns, "agent", func(ds *everynodev1alpha1.DaemonSet) {
		ds.Spec.NodeSizing[0].Resources[0].Requests.Fraction = "0.1"
	})
	want = map[string]string{small: "200m", medium: "1600m", big: "3200m"}
	most := 0
	eventually(t, time.Minute, "every pod resized to the new rule", func() (bool, string, error) {
		inFlight := 0
		for _, p := range daemonPods(t, ns, "agent") {
			if spec, status := podCPU(&p); spec != status {
				inFlight++
			}
		}
		most = max(most, inFlight)
		return podsOnNodes(t, ns, "agent", nodes, func(p *corev1.Pod) string {
			if msg := sameUIDs(p); msg != "" {
				return msg
			}
			if spec, status := podCPU(p); spec != want[p.Spec.NodeName] || status != spec {
				return fmt.Sprintf("cpu %s (kubelet: %q), want %s", spec, status, want[p.Spec.NodeName])
			}
			return ""
		})
	})
	if most > 1 {
		t.Errorf("%d pods resizing at once, want at most maxUnavailable (1)", most)
	}
	if revs := revisions(t, ns, "agent"); len(revs) != 1 {
		t.Errorf("%d revisions: a new sizing rule is not a new revision", len(revs))
	}

	// 4. A min above two nodes' cpu: reported, and only the big node's
	// pod changes.
	updateSet(t, ns, "agent", func(ds *everynodev1alpha1.DaemonSet) {
		ds.Spec.NodeSizing[0].Resources[0].Requests.Min = ptrQuantity("20")
	})
	want[big] = "20"
	eventually(t, time.Minute, "NodeSizingDoesNotFit names the small and medium nodes", func() (bool, string, error) {
		ds := getSet(t, ns, "agent")
		c := meta.FindStatusCondition(ds.Status.Conditions, everynodev1alpha1.ConditionNodeSizingDoesNotFit)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, small+" (agent: cpu 20 > allocatable 2)") || !strings.Contains(c.Message, medium+" (agent: cpu 20 > allocatable 16)") {
			return false, fmt.Sprintf("%+v", c), nil
		}
		if st := ds.Status.NodeSizing; st == nil || st.DoesNotFit != 2 {
			return false, fmt.Sprintf("status.nodeSizing %+v", st), nil
		}
		return true, "", nil
	})
	eventually(t, time.Minute, "the big node's pod resized to the min", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, cpuIs(want))
	})
	never(t, 5*time.Second, "a pod the rule does not fit resized or recreated", func() (bool, string, error) {
		ok, msg, err := podsOnNodes(t, ns, "agent", nodes, func(p *corev1.Pod) string {
			if msg := sameUIDs(p); msg != "" {
				return msg
			}
			return cpuIs(want)(p)
		})
		return !ok, msg, err
	})
}

// A resize the kubelet refuses (PodResizePending Infeasible) is done by a
// new pod of the right size.
func TestRefusedResizeRecreatesThePod(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "resize-refused-" + randSuffix()}
	node := "resize-refused-" + randSuffix()
	createNodeOfSize(t, node, sel, cpuSize("4", "16Gi"))
	ds := sizedSet(ns, "agent", sel, "0.05")
	ds.Spec.Template.Spec.Containers[0].Image = "registry.example/agent:resize-infeasible"
	createSet(t, ds)
	var first types.UID
	eventually(t, time.Minute, "the pod sized for 4 cpus", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", []string{node}, func(p *corev1.Pod) string {
			first = p.UID
			if spec, status := podCPU(p); spec != "200m" || status != spec {
				return fmt.Sprintf("cpu %s (kubelet: %q)", spec, status)
			}
			return ""
		})
	})
	setNodeCPU(t, node, "8")
	eventually(t, time.Minute, "a new pod sized for 8 cpus", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", []string{node}, func(p *corev1.Pod) string {
			if p.UID == first {
				return "still the first pod"
			}
			if spec, _ := podCPU(p); spec != "400m" {
				return "cpu " + spec
			}
			return ""
		})
	})
	events, err := kube.CoreV1().Events(ns).List(ctx(t), metav1.ListOptions{FieldSelector: "reason=RecreatingForSize"})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) == 0 || !strings.Contains(events.Items[0].Message, "PodResizePending Infeasible") {
		t.Errorf("no RecreatingForSize event naming the refusal: %+v", events.Items)
	}
}
