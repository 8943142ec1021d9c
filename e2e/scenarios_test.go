package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"

	"everynode.io/e2e/cluster"
)

// Generous upper bounds for a loaded 2-core CI machine; not performance
// assertions (the benchmarks measure speed).
const (
	settle  = 2 * time.Minute
	quietly = 8 * time.Second
)

func readyNodes(t *testing.T) []string {
	t.Helper()
	list, err := kube.CoreV1().Nodes().List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range list.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && len(n.Spec.Taints) == 0 {
				out = append(out, n.Name)
			}
		}
	}
	return out
}

// The canonical case: the upstream docs' fluentd-elasticsearch DaemonSet,
// only its apiVersion changed, lands one Running pod on every node.
func TestSeedManifestRunsOnEveryNode(t *testing.T) {
	ds := loadDaemonSet(t, filepath.Join(repoRoot, "examples", "fluentd-elasticsearch.yaml"))
	nodes := readyNodes(t)
	if len(nodes) == 0 {
		t.Fatal("the cluster has no Ready nodes")
	}
	createSet(t, ds)
	t.Cleanup(func() {
		_ = everynode.EverynodeV1alpha1().DaemonSets(ds.Namespace).Delete(ctx(t), ds.Name, metav1.DeleteOptions{})
	})
	eventually(t, settle, "one Running fluentd pod per node", func() (bool, string, error) {
		return podsOnNodes(t, ds.Namespace, ds.Name, nodes, nil)
	})
	eventually(t, settle, "status to count every node", func() (bool, string, error) {
		s := getSet(t, ds.Namespace, ds.Name).Status
		want := int32(len(nodes))
		ok := s.DesiredNumberScheduled == want && s.CurrentNumberScheduled == want && s.NumberReady == want &&
			s.NumberAvailable == want && s.UpdatedNumberScheduled == want && s.NumberMisscheduled == 0
		return ok, fmt.Sprintf("%+v", s), nil
	})
	// Its Normal events take only spare tokens of the controller's client
	// budget (package budget): on a cluster this small the budget is idle
	// once the pods are made, and they must arrive.
	eventually(t, settle, "a SuccessfulCreate event on the set", func() (bool, string, error) {
		evs, err := kube.CoreV1().Events(ds.Namespace).List(ctx(t), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=DaemonSet,involvedObject.name=" + ds.Name + ",reason=SuccessfulCreate,source=everynode-controller",
		})
		if err != nil {
			return false, "", err
		}
		return len(evs.Items) > 0, fmt.Sprintf("%d events", len(evs.Items)), nil
	})
}

// unschedulable is an extended resource no node offers: a pod asking for it
// is never bound.
const unschedulable = corev1.ResourceName("e2e.everynode.io/unschedulable")

// unboundPodsFor checks that the set has exactly one pod for each of nodes,
// by target node, none of them bound, and no pod for any other node.
func unboundPodsFor(t *testing.T, ns, set string, nodes []string) (bool, string, error) {
	var problems []string
	byTarget := map[string][]string{}
	for _, p := range daemonPods(t, ns, set) {
		if p.Spec.NodeName != "" {
			problems = append(problems, fmt.Sprintf("pod %s is bound to %s", p.Name, p.Spec.NodeName))
		}
		target, _ := placement.TargetNode(&p)
		byTarget[target] = append(byTarget[target], p.Name)
	}
	for _, n := range nodes {
		if len(byTarget[n]) != 1 {
			problems = append(problems, fmt.Sprintf("%s: %d pods", n, len(byTarget[n])))
		}
		delete(byTarget, n)
	}
	for n, pods := range byTarget {
		problems = append(problems, fmt.Sprintf("pods %v for node %s", pods, n))
	}
	slices.Sort(problems)
	return len(problems) == 0, strings.Join(problems, "; "), nil
}

// A node that joins gets the set's pod; a node that leaves loses it.
//
// A Running pod leaving with its node proves nothing about everynode:
// kube-controller-manager's PodGC deletes the pods bound to a node that no
// longer exists itself (after a 40 s quarantine). So a second set, parked,
// asks for a resource no node has: its pods stay Pending, never bound. PodGC
// only collects pods bound to a missing node, and the scheduler only keeps
// retrying a pod pinned to a node that is gone, so parked's pod for the
// deleted node goes only if everynode's controller, which knows each pod's
// target node, deletes it; without that the last wait times out. (Bound or
// not, everynode treats a pod whose target node is gone the same way.)
func TestNodeJoinsAndLeaves(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "join-" + randSuffix()}
	nodes := createNodes(t, "join", 2, sel)
	createSet(t, simpleSet(ns, "agent", sel))
	parked := simpleSet(ns, "parked", sel)
	one := corev1.ResourceList{unschedulable: resource.MustParse("1")}
	parked.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: one, Limits: one}
	createSet(t, parked)
	eventually(t, settle, "a pod on each of the 2 nodes", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, nil)
	})
	eventually(t, settle, "an unbound parked pod for each of the 2 nodes", func() (bool, string, error) {
		return unboundPodsFor(t, ns, "parked", nodes)
	})

	t.Log("a node joins: a pod follows")
	nodes = append(nodes, createNodes(t, "join", 1, sel)...)
	eventually(t, settle, "a pod on the new node", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, nil)
	})
	eventually(t, settle, "an unbound parked pod for the new node", func() (bool, string, error) {
		return unboundPodsFor(t, ns, "parked", nodes)
	})

	t.Log("a node leaves: its pods are collected")
	gone := nodes[0]
	if err := kube.CoreV1().Nodes().Delete(ctx(t), gone, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, settle, "the pod of the deleted node to go", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes[1:], nil)
	})
	eventually(t, settle, "everynode to delete the unbound parked pod of the deleted node", func() (bool, string, error) {
		return unboundPodsFor(t, ns, "parked", nodes[1:])
	})
}

func TestNodeLabelLeavesSelector(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "label-" + randSuffix()}
	nodes := createNodes(t, "label", 2, sel)
	createSet(t, simpleSet(ns, "agent", sel))
	eventually(t, settle, "a pod on each node", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, nil)
	})
	node, err := kube.CoreV1().Nodes().Get(ctx(t), nodes[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Labels[scenarioLabel] = "elsewhere"
	if _, err := kube.CoreV1().Nodes().Update(ctx(t), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, settle, "the pod to leave the relabelled node", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes[1:], nil)
	})
}

func setTaint(t *testing.T, nodeName string, taint corev1.Taint) {
	t.Helper()
	node, err := kube.CoreV1().Nodes().Get(ctx(t), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Spec.Taints = append(node.Spec.Taints, taint)
	if _, err := kube.CoreV1().Nodes().Update(ctx(t), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// carries is a podsOnNodes check that the pod has the toleration tol.
func carries(tol corev1.Toleration) func(*corev1.Pod) string {
	return func(p *corev1.Pod) string {
		for _, got := range p.Spec.Tolerations {
			if got.MatchToleration(&tol) {
				return ""
			}
		}
		return fmt.Sprintf("pod %s lacks the toleration %s:%s", p.Name, tol.Key, tol.Effect)
	}
}

// NoSchedule stops new pods but keeps a running one; NoExecute removes it.
//
// A NoExecute taint that the pod does not tolerate proves nothing about
// everynode: kube-controller-manager's taint eviction deletes such a pod
// itself. So here the pods tolerate the NoExecute taint and the set does not:
// the set tolerated it when its pods were made, then dropped the toleration,
// and OnDelete keeps the pods as they were. Taint eviction leaves a pod that
// tolerates its node's taints alone (a toleration without tolerationSeconds
// tolerates forever), and the node still exists, so PodGC does not act
// either: the pod goes only if everynode's controller, which decides from the
// set's template, deletes it. Without that the wait below times out.
func TestTaints(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "taint-" + randSuffix()}
	nodes := createNodes(t, "taint", 2, sel)
	evict := corev1.Taint{Key: "e2e/evict", Value: "x", Effect: corev1.TaintEffectNoExecute}
	tolerateEvict := corev1.Toleration{Key: evict.Key, Operator: corev1.TolerationOpExists, Effect: evict.Effect}
	ds := simpleSet(ns, "agent", sel)
	ds.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType
	ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{tolerateEvict}
	createSet(t, ds)
	eventually(t, settle, "a pod on each node, tolerating "+evict.Key, func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, carries(tolerateEvict))
	})

	setTaint(t, nodes[0], corev1.Taint{Key: "e2e/dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule})
	never(t, quietly, "the pod on the NoSchedule-tainted node being removed", func() (bool, string, error) {
		ok, msg, err := podsOnNodes(t, ns, "agent", nodes, nil)
		return !ok, msg, err
	})
	tainted := createNodes(t, "taint", 1, sel, corev1.Taint{Key: "e2e/dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule})
	never(t, quietly, "a pod landing on a new NoSchedule-tainted node", func() (bool, string, error) {
		for _, p := range daemonPods(t, ns, "agent") {
			if target, _ := placement.TargetNode(&p); target == tainted[0] {
				return true, p.Name, nil
			}
		}
		return false, "", nil
	})

	t.Log("the set stops tolerating " + evict.Key + " (its pods still do), then a node gets that NoExecute taint")
	updateSet(t, ns, "agent", func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.Tolerations = nil })
	setTaint(t, nodes[1], evict)
	eventually(t, settle, "everynode to remove the pod from the NoExecute-tainted node", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes[:1], nil)
	})
}

// Daemon pods carry exactly one required node affinity term pinning them to
// their node, and the upstream default daemon tolerations.
//
// Daemon pods are pinned to their node (the user's required node affinity
// replaced, the preferred kept) and carry the default daemon tolerations
// once each (network-unavailable only with hostNetwork), and a node
// override applies on its node only. The controller makes the pods that
// way itself (placement.NewPodFor: template, overrides, stamp), so this
// holds where no webhook runs; /mutate/pod stamps again (a no-op for the
// controller's pods). An override may no longer change the affinity or
// tolerations (validation refuses it: TestInvalidSetsAreRefused), so this
// one sets a label, which must be on that node's pod only.
func TestPodsArePinnedAndTolerate(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "pin-" + randSuffix()}
	nodes := createNodes(t, "pin", 2, sel)
	ds := simpleSet(ns, "agent", sel)
	// A required affinity term of the user's is replaced; preferred kept.
	ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: scenarioLabel, Operator: corev1.NodeSelectorOpExists}},
		}}},
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpExists}},
		}}},
	}}
	overridden := nodes[1]
	const overrideLabel = "e2e.everynode.io/override"
	patch := []byte(`{"metadata":{"labels":{"` + overrideLabel + `":"applied"}}}`)
	ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{{
		NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelHostname: overridden}},
		Patch:        runtime.RawExtension{Raw: patch},
	}}
	createSet(t, ds)
	hostNet := simpleSet(ns, "hostnet", sel)
	hostNet.Spec.Template.Spec.HostNetwork = true
	createSet(t, hostNet)

	check := func(hostNetwork bool) func(p *corev1.Pod) string {
		return func(p *corev1.Pod) string {
			want := placement.PinToNode(ds.Spec.Template.Spec.Affinity, p.Spec.NodeName)
			if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil {
				return "no node affinity"
			}
			gotReq, _ := json.Marshal(p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
			wantReq, _ := json.Marshal(want.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
			if string(gotReq) != string(wantReq) {
				return fmt.Sprintf("required affinity %s, want %s", gotReq, wantReq)
			}
			if !hostNetwork && len(p.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
				return "preferred node affinity was not kept"
			}
			for _, tol := range placement.DaemonTolerations(hostNetwork) {
				n := 0
				for _, got := range p.Spec.Tolerations {
					if got.MatchToleration(&tol) {
						n++
					}
				}
				if n != 1 {
					return fmt.Sprintf("toleration %s:%s present %d times, want once", tol.Key, tol.Effect, n)
				}
			}
			if hostNetwork {
				return ""
			}
			for _, got := range p.Spec.Tolerations {
				if got.Key == corev1.TaintNodeNetworkUnavailable {
					return "network-unavailable toleration on a pod without hostNetwork"
				}
			}
			switch overrideApplied := p.Labels[overrideLabel] == "applied"; {
			case p.Spec.NodeName == overridden && !overrideApplied:
				return "no " + overrideLabel + " label: the set's nodeOverride was not applied"
			case p.Spec.NodeName != overridden && overrideApplied:
				return "the nodeOverride for " + overridden + " was applied on another node"
			}
			return ""
		}
	}
	eventually(t, settle, "pinned, tolerating pods, the override applied on "+overridden, func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, check(false))
	})
	eventually(t, settle, "pinned, tolerating hostNetwork pods", func() (bool, string, error) {
		return podsOnNodes(t, ns, "hostnet", nodes, check(true))
	})
}

// Invalid sets are refused at apply time with the field path in the message.
func TestInvalidSetsAreRefused(t *testing.T) {
	ns := newNamespace(t)
	tests := map[string]struct {
		change    func(*everynodev1alpha1.DaemonSet)
		wantField string
	}{
		"selector does not match template labels": {
			change:    func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Labels = map[string]string{"app": "other"} },
			wantField: "spec.template.metadata.labels",
		},
		"restartPolicy Never": {
			change:    func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			wantField: "spec.template.spec.restartPolicy",
		},
		"maxUnavailable and maxSurge both zero": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate = &everynodev1alpha1.RollingUpdateDaemonSet{
					MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(0)),
				}
			},
			wantField: "spec.updateStrategy.rollingUpdate",
		},
		"invalid container name": {
			change:    func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Name = "Not_A_DNS_Label" },
			wantField: "spec.template.spec.containers[0].name",
		},
		// Eligibility is the template's: an override may not change it.
		"a node override that adds a toleration": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{{
					NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "gpu"}},
					Patch:        runtime.RawExtension{Raw: []byte(`{"spec":{"tolerations":[{"key":"gpu","operator":"Exists"}]}}`)},
				}}
			},
			wantField: "spec.nodeOverrides[0].patch",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ds := simpleSet(ns, "bad-"+randSuffix(), map[string]string{scenarioLabel: "none"})
			tc.change(ds)
			_, err := everynode.EverynodeV1alpha1().DaemonSets(ns).Create(ctx(t), ds, metav1.CreateOptions{})
			if err == nil {
				t.Fatal("the invalid set was accepted")
			}
			if !strings.Contains(err.Error(), tc.wantField) {
				t.Fatalf("error %q does not name %s", err, tc.wantField)
			}
		})
	}
}

func TestValidSetIsStoredWithDefaults(t *testing.T) {
	ns := newNamespace(t)
	ds := createSet(t, simpleSet(ns, "agent", map[string]string{scenarioLabel: "none"}))
	s := ds.Spec
	switch {
	case s.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType:
		t.Errorf("updateStrategy.type %q, want RollingUpdate", s.UpdateStrategy.Type)
	case s.UpdateStrategy.RollingUpdate == nil || s.UpdateStrategy.RollingUpdate.MaxUnavailable.String() != "1" || s.UpdateStrategy.RollingUpdate.MaxSurge.String() != "0":
		t.Errorf("rollingUpdate %+v, want maxUnavailable 1, maxSurge 0", s.UpdateStrategy.RollingUpdate)
	case s.RevisionHistoryLimit == nil || *s.RevisionHistoryLimit != 10:
		t.Errorf("revisionHistoryLimit %v, want 10", s.RevisionHistoryLimit)
	case s.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways || s.Template.Spec.DNSPolicy != corev1.DNSClusterFirst ||
		s.Template.Spec.SchedulerName != corev1.DefaultSchedulerName || ptr.Deref(s.Template.Spec.TerminationGracePeriodSeconds, 0) != 30:
		t.Errorf("pod template not defaulted: %+v", s.Template.Spec)
	}
}

func TestSelectorIsImmutable(t *testing.T) {
	ns := newNamespace(t)
	createSet(t, simpleSet(ns, "agent", map[string]string{scenarioLabel: "none"}))
	var err error
	for range 10 { // the controller's status writes may conflict with ours
		ds := getSet(t, ns, "agent")
		ds.Spec.Selector.MatchLabels["extra"] = "x"
		ds.Spec.Template.Labels["extra"] = "x"
		_, err = everynode.EverynodeV1alpha1().DaemonSets(ns).Update(ctx(t), ds, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "spec.selector") {
		t.Fatalf("selector change: got %v, want a refusal naming spec.selector", err)
	}
}

func revisions(t *testing.T, ns, set string) []appsv1.ControllerRevision {
	t.Helper()
	list, err := kube.AppsV1().ControllerRevisions(ns).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []appsv1.ControllerRevision
	for _, r := range list.Items {
		if ref := metav1.GetControllerOf(&r); ref != nil && ref.Name == set && ref.Kind == "DaemonSet" {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b appsv1.ControllerRevision) int { return int(a.Revision - b.Revision) })
	return out
}

func image(want string) func(*corev1.Pod) string {
	return func(p *corev1.Pod) string {
		if got := p.Spec.Containers[0].Image; got != want {
			return "image " + got
		}
		return ""
	}
}

func rolledOut(t *testing.T, ns, name string, nodes []string, img string) func() (bool, string, error) {
	return func() (bool, string, error) {
		if ok, msg, err := podsOnNodes(t, ns, name, nodes, image(img)); !ok {
			return ok, msg, err
		}
		ds := getSet(t, ns, name)
		s, want := ds.Status, int32(len(nodes))
		ok := s.ObservedGeneration == ds.Generation && s.UpdatedNumberScheduled == want &&
			s.NumberAvailable == want && s.DesiredNumberScheduled == want
		return ok, fmt.Sprintf("status %+v", s), nil
	}
}

// A rolling update with maxUnavailable, then one with maxSurge, completes;
// history keeps every revision and a rollback restores the old template.
func TestRollingUpdateHistoryAndRollback(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "roll-" + randSuffix()}
	nodes := createNodes(t, "roll", 3, sel)
	createSet(t, simpleSet(ns, "agent", sel))
	eventually(t, settle, "v1 everywhere", rolledOut(t, ns, "agent", nodes, "registry.example/agent:v1"))

	t.Log("rolling update with maxUnavailable 1")
	updateSet(t, ns, "agent", func(ds *everynodev1alpha1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = "registry.example/agent:v2"
	})
	eventually(t, settle, "v2 everywhere", rolledOut(t, ns, "agent", nodes, "registry.example/agent:v2"))

	t.Log("rolling update with maxSurge 1")
	updateSet(t, ns, "agent", func(ds *everynodev1alpha1.DaemonSet) {
		ds.Spec.UpdateStrategy.RollingUpdate = &everynodev1alpha1.RollingUpdateDaemonSet{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1)),
		}
		ds.Spec.Template.Spec.Containers[0].Image = "registry.example/agent:v3"
	})
	eventually(t, settle, "v3 everywhere", rolledOut(t, ns, "agent", nodes, "registry.example/agent:v3"))

	revs := revisions(t, ns, "agent")
	if len(revs) != 3 {
		t.Fatalf("%d ControllerRevisions, want 3", len(revs))
	}

	t.Log("rollback to revision 1")
	var old struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(revs[0].Data.Raw, &old); err != nil {
		t.Fatalf("revision 1 data: %v", err)
	}
	updateSet(t, ns, "agent", func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template = old.Spec.Template })
	eventually(t, settle, "v1 everywhere again", rolledOut(t, ns, "agent", nodes, "registry.example/agent:v1"))
	first := revs[0].Name
	revs = revisions(t, ns, "agent")
	if len(revs) != 3 {
		t.Fatalf("%d revisions after rollback, want 3 (the old one reused)", len(revs))
	}
	if newest := revs[len(revs)-1]; newest.Name != first || newest.Revision != 4 {
		t.Errorf("newest revision is %s number %d, want %s reused as number 4", newest.Name, newest.Revision, first)
	}
}

func TestDeletingTheSetRemovesItsPods(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "del-" + randSuffix()}
	nodes := createNodes(t, "del", 2, sel)
	createSet(t, simpleSet(ns, "agent", sel))
	eventually(t, settle, "a pod on each node", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, nil)
	})
	if err := everynode.EverynodeV1alpha1().DaemonSets(ns).Delete(ctx(t), "agent", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, settle, "every pod of the set to go", func() (bool, string, error) {
		pods := daemonPods(t, ns, "agent")
		return len(pods) == 0, fmt.Sprintf("%d pods left", len(pods)), nil
	})
}

// A pod that claims to be a daemon pod but was not made by the controller is
// refused: it would otherwise gain the daemon tolerations and be taken for
// the daemon of its node.
func TestHandMadeDaemonPodIsRefused(t *testing.T) {
	ns := newNamespace(t)
	ds := createSet(t, simpleSet(ns, "agent", map[string]string{scenarioLabel: "none"}))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "impostor", Namespace: ns,
			Labels:      map[string]string{"app": "agent", everynodev1alpha1.LabelDaemonPod: "true"},
			Annotations: map[string]string{everynodev1alpha1.AnnotationTargetNode: "some-node"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds,
				everynodev1alpha1.SchemeGroupVersion.WithKind("DaemonSet"))},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "registry.example/agent:v1"}}},
	}
	_, err := kube.CoreV1().Pods(ns).Create(ctx(t), pod, metav1.CreateOptions{})
	if err == nil {
		t.Fatal("a hand-made daemon pod was admitted")
	}
	if !strings.Contains(err.Error(), "controller") {
		t.Fatalf("refusal %q does not say why (not created by the controller)", err)
	}
}

// The controller's own pods go to neither pod webhook (issue 35): it makes
// them whole itself (pin, tolerations, overrides, scheduler name) and
// marks them, and the chart's matchConditions leave out its identity
// (/validate/pod) and its marked pods (/mutate/pod): two admission calls
// less per pod. Counted by the API server itself, which decides the skip.
// A daemon pod the same identity creates without the mark (a replica of
// an older everynode during an upgrade) still goes through /mutate/pod and
// comes back pinned.
func TestControllerPodsSkipThePodWebhooks(t *testing.T) {
	const mutate, validate = "pod.mutate.everynode.io", "pod.validate.everynode.io"
	sel := map[string]string{scenarioLabel: "skip-" + randSuffix()}
	nodes := createNodes(t, "skip", 3, sel)
	ns := newNamespace(t)
	before := apiserverMetrics(t)
	createSet(t, simpleSet(ns, "agent", sel))
	eventually(t, settle, "a pinned pod, marked made whole, on every node", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, func(p *corev1.Pod) string {
			if p.Annotations[everynodev1alpha1.AnnotationMadeWhole] == "" {
				return "not marked made whole"
			}
			if !pinnedTo(p, p.Spec.NodeName) {
				return "not pinned"
			}
			return ""
		})
	})
	after := apiserverMetrics(t)
	delta := func(metric, webhook string) float64 {
		return counterDelta(before, after, metric, with(map[string]string{"name": webhook, "operation": "CREATE"}))
	}
	made := float64(len(nodes))
	for _, webhook := range []string{mutate, validate} {
		if n := delta("apiserver_admission_match_condition_exclusions_total", webhook); n < made {
			t.Errorf("%s was skipped by its matchConditions %v times for %v pods", webhook, n, made)
		}
		if n := delta("apiserver_admission_webhook_request_total", webhook); n != 0 {
			t.Errorf("%s was called %v times while only the controller created pods", webhook, n)
		}
	}

	// The controller's identity (the harness runs everynode with the
	// chart's ServiceAccount token), a pod without the mark, dry run.
	cfg, err := clientcmd.BuildConfigFromFlags("", harness.EverynodeKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	asController := kubernetes.NewForConfigOrDie(cfg)
	pod := daemonPods(t, ns, "agent")[0].DeepCopy()
	pod.ObjectMeta = metav1.ObjectMeta{
		GenerateName: "unmarked-", Namespace: ns, Labels: pod.Labels, OwnerReferences: pod.OwnerReferences,
		Annotations: map[string]string{everynodev1alpha1.AnnotationTargetNode: nodes[0]},
	}
	pod.Spec.Affinity, pod.Spec.NodeName, pod.Status = nil, "", corev1.PodStatus{}
	unmarked, err := asController.CoreV1().Pods(ns).Create(ctx(t), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatal(err)
	}
	if !pinnedTo(unmarked, nodes[0]) {
		t.Errorf("a daemon pod without the mark was not pinned by /mutate/pod: affinity %+v", unmarked.Spec.Affinity)
	}
}

// pinnedTo reports whether pod's required node affinity pins it to node.
func pinnedTo(p *corev1.Pod, node string) bool {
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && len(f.Values) == 1 && f.Values[0] == node {
				return true
			}
		}
	}
	return false
}

// apiserverMetrics reads kube-apiserver's /metrics.
func apiserverMetrics(t *testing.T) metrics {
	t.Helper()
	b, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx(t))
	if err != nil {
		t.Fatalf("kube-apiserver /metrics: %v", err)
	}
	m, err := parseMetrics(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("kube-apiserver /metrics: %v", err)
	}
	return m
}

// step fails the test when a step of the harness does. Steps take no
// test context: they run in cleanups too, after it is done.
func step(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
}

// bg is the context of the harness's steps; each bounds its own waits.
var bg = context.Background()

// With everynode down, ordinary pods are still created and scheduled (the
// webhooks only see daemon pods, the extender is ignorable); a daemon pod
// for a new node waits, then arrives when everynode is back.
func TestEverynodeDown(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "down-" + randSuffix()}
	nodes := createNodes(t, "down", 1, sel)
	createSet(t, simpleSet(ns, "agent", sel))
	eventually(t, settle, "a pod on the node", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, nil)
	})

	step(t, harness.StopEverynode())
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			step(t, harness.StartEverynode(bg))
		}
	})

	plain := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "ordinary", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeSelector: sel,
			Containers:   []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}},
		},
	}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx(t), plain, metav1.CreateOptions{}); err != nil {
		t.Fatalf("an ordinary pod was refused while everynode is down: %v", err)
	}
	eventually(t, settle, "the ordinary pod to run", func() (bool, string, error) {
		p, err := kube.CoreV1().Pods(ns).Get(ctx(t), "ordinary", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return isRunningReady(p), string(p.Status.Phase), nil
	})

	newNode := createNodes(t, "down", 1, sel)
	never(t, quietly, "a daemon pod for the new node while everynode is down", func() (bool, string, error) {
		for _, p := range daemonPods(t, ns, "agent") {
			if target, _ := placement.TargetNode(&p); target == newNode[0] {
				return true, p.Name, nil
			}
		}
		return false, "", nil
	})

	step(t, harness.StartEverynode(bg))
	restarted = true
	eventually(t, settle, "the daemon pod to arrive on the new node", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", append(nodes, newNode...), nil)
	})
}

// The CRD has a structural schema: kubectl explain shows its fields.
func TestExplain(t *testing.T) {
	out, err := exec.Command(filepath.Join(repoRoot, ".e2e", "bin", "kubectl"), "explain", "daemonsets.everynode.io.spec").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl explain: %v\n%s", err, out)
	}
	for _, field := range []string{"selector", "template", "updateStrategy", "minReadySeconds", "revisionHistoryLimit", "nodeOverrides", "nodeReadinessGate"} {
		if !strings.Contains(string(out), field) {
			t.Errorf("kubectl explain does not show %s:\n%s", field, out)
		}
	}
}

// setPodReady flips a pod's Ready condition, as a kubelet would when its
// readiness probe fails or passes (kwok runs no probes).
func setPodReady(t *testing.T, ns, name string, ready bool) {
	t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	for range 10 {
		pod, err := kube.CoreV1().Pods(ns).Get(ctx(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
				pod.Status.Conditions[i].Status = status
				pod.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		// As a readiness probe would: the containers' ready says the same,
		// or kwok, playing the kubelet, works Ready out again from them
		// (e2e/kwok: kubelet-ready).
		for i := range pod.Status.ContainerStatuses {
			pod.Status.ContainerStatuses[i].Ready = ready
		}
		_, err = kube.CoreV1().Pods(ns).UpdateStatus(ctx(t), pod, metav1.UpdateOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("update status of pod %s: %v", name, err)
		}
	}
	t.Fatalf("update status of pod %s: too many conflicts", name)
}

// A set with nodeReadinessGate keeps ordinary pods off a node until its
// daemon pod there is Ready: the scheduler's extender call fails the node
// with a reason naming the set, and the pod lands once the daemon is Ready.
// The extender sees ordinary pods only without the daemon-pod marker:
// everynode runs with --daemon-resource="" and kube-scheduler calls the
// extender for every pod.
func TestNodeReadinessGate(t *testing.T) {
	kept, err := harness.Settings()
	step(t, err)
	step(t, harness.Reinstall(bg, func(s *cluster.Settings) {
		s.HelmArgs = append(s.HelmArgs, "--set", "scheduler.daemonResource=")
		s.EverynodeArgs = append(s.EverynodeArgs, "--daemon-resource=")
	}))
	t.Cleanup(func() {
		step(t, harness.Reinstall(bg, func(s *cluster.Settings) { s.HelmArgs, s.EverynodeArgs = kept.HelmArgs, kept.EverynodeArgs }))
	})
	step(t, harness.RestartScheduler(bg, cluster.WithExtenderForEveryPod))
	t.Cleanup(func() { step(t, harness.RestartScheduler(bg, cluster.WithExtender)) })

	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "gate-" + randSuffix()}
	nodes := createNodes(t, "gate", 1, sel)
	gate := simpleSet(ns, "cni", sel)
	gate.Spec.NodeReadinessGate = true
	createSet(t, gate)
	eventually(t, settle, "the gating daemon pod to run", func() (bool, string, error) {
		return podsOnNodes(t, ns, "cni", nodes, nil)
	})
	daemon := daemonPods(t, ns, "cni")[0]

	t.Log("the daemon pod turns not Ready: the node is gated")
	setPodReady(t, ns, daemon.Name, false)
	plain := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "workload", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeSelector: sel,
			Containers:   []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}},
		},
	}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx(t), plain, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, settle, "the scheduler to say the node waits for the gate", func() (bool, string, error) {
		p, err := kube.CoreV1().Pods(ns).Get(ctx(t), "workload", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if p.Spec.NodeName != "" {
			t.Fatalf("the pod was bound to %s while the gate was closed", p.Spec.NodeName)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "cni") {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("conditions %+v", p.Status.Conditions), nil
	})

	t.Log("the daemon pod turns Ready: the workload lands")
	setPodReady(t, ns, daemon.Name, true)
	eventually(t, 6*time.Minute, "the workload to be scheduled on the node", func() (bool, string, error) {
		p, err := kube.CoreV1().Pods(ns).Get(ctx(t), "workload", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return p.Spec.NodeName == nodes[0], "still pending", nil
	})
}

// Node overrides hold where no webhook runs (issue 31): the webhooks skip
// kube-system by design, so there only the controller can apply a set's
// overrides, and it does, per node, as it makes each pod.
func TestNodeOverridesInKubeSystem(t *testing.T) {
	sel := map[string]string{scenarioLabel: "ksov-" + randSuffix()}
	nodes := createNodes(t, "ksov", 2, sel)
	big := nodes[0]
	node, err := kube.CoreV1().Nodes().Get(ctx(t), big, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Labels["pool"] = "big"
	if _, err := kube.CoreV1().Nodes().Update(ctx(t), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := "agent-" + randSuffix()
	ds := simpleSet(metav1.NamespaceSystem, name, sel)
	ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{{
		NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "big"}},
		Patch:        runtime.RawExtension{Raw: []byte(`{"spec":{"containers":[{"name":"agent","image":"registry.example/agent:big"}]}}`)},
	}}
	createSet(t, ds)
	t.Cleanup(func() {
		_ = everynode.EverynodeV1alpha1().DaemonSets(metav1.NamespaceSystem).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	eventually(t, settle, "a pod on each node, the override on "+big, func() (bool, string, error) {
		return podsOnNodes(t, metav1.NamespaceSystem, name, nodes, func(p *corev1.Pod) string {
			want := "registry.example/agent:v1"
			if p.Spec.NodeName == big {
				want = "registry.example/agent:big"
			}
			if got := p.Spec.Containers[0].Image; got != want {
				return fmt.Sprintf("image %s, want %s", got, want)
			}
			return ""
		})
	})
}
