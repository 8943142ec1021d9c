package extender

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

func TestFilter(t *testing.T) {
	agent := daemonSet("agent", false)
	surging := daemonSet("agent", false, withMaxSurge(intstr.FromInt32(1)))
	surgingPct := daemonSet("agent", false, withMaxSurge(intstr.FromString("10%")))
	zeroSurge := daemonSet("agent", false, withMaxSurge(intstr.FromString("0%")))
	pooled := daemonSet("agent", false, withNodeSelector(map[string]string{"pool": "a"}))
	cni := daemonSet("cni", true)
	nodes := []runtime.Object{node("n0", nil), node("n1", nil), node("n2", map[string]string{"pool": "a"})}
	pending := daemonPod(agent, "agent-new", "n1", "v2")
	noTarget := daemonPod(agent, "agent-x", "", "v2")
	delete(noTarget.Annotations, everynodev1alpha1.AnnotationTargetNode)
	orphan := daemonPod(agent, "agent-new", "n1", "v2")
	orphan.OwnerReferences = nil
	stale := daemonPod(agent, "agent-new", "n1", "v2")
	stale.OwnerReferences[0].UID = "uid-of-a-deleted-set"

	big := daemonPod(agent, "agent-new", "n1", "v2")
	big.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), "everynode.io/daemon": resource.MustParse("1")}
	small := node("n1", nil)
	small.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	roomy := node("n1", nil)
	roomy.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}

	const (
		elsewhere = "everynode: daemon pod belongs to node n1"
	)
	tests := map[string]struct {
		objs       []runtime.Object
		pod        *corev1.Pod
		names      []string // nil: send neither NodeNames nor Nodes
		wantPassed []string
		wantFailed map[string]string
	}{
		"daemon pod: target node ok, others fail": {
			objs:       append(nodes, agent),
			pod:        pending,
			names:      []string{"n0", "n1", "n2"},
			wantPassed: []string{"n1"},
			wantFailed: map[string]string{"n0": elsewhere, "n2": elsewhere},
		},
		"daemon pod: target node is not a candidate": {
			objs:       append(nodes, agent),
			pod:        pending,
			names:      []string{"n0"},
			wantPassed: []string{},
			wantFailed: map[string]string{"n0": elsewhere},
		},
		"daemon pod: node gone": {
			objs:       []runtime.Object{node("n0", nil), agent},
			pod:        pending,
			names:      []string{"n1"},
			wantPassed: []string{},
			wantFailed: map[string]string{"n1": "everynode: target node n1 no longer exists"},
		},
		"daemon pod: node no longer matches the node selector": {
			objs:       append(nodes, pooled),
			pod:        pending,
			names:      []string{"n1"},
			wantPassed: []string{},
			wantFailed: map[string]string{"n1": "everynode: node no longer runs DaemonSet infra/agent: " + placement.ReasonNodeAffinity},
		},
		"daemon pod: node tainted NoSchedule": {
			objs: []runtime.Object{
				node("n1", nil, corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}), agent,
			},
			pod:        pending,
			names:      []string{"n1"},
			wantPassed: []string{},
			wantFailed: map[string]string{"n1": "everynode: node no longer runs DaemonSet infra/agent: " + placement.ReasonUntoleratedNoS},
		},
		"daemon pod: asks more than the node's allocatable": {
			objs:       []runtime.Object{small, agent},
			pod:        big,
			names:      []string{"n1"},
			wantPassed: []string{},
			wantFailed: map[string]string{"n1": "everynode: daemon pod of DaemonSet infra/agent asks more than the node's allocatable (cpu 4 > 2); no eviction makes room: lower the template's requests or the set's spec.nodeSizing (see its NodeSizingDoesNotFit condition)"},
		},
		"daemon pod: asks all of the node's allocatable": {
			objs:       []runtime.Object{roomy, agent},
			pod:        big,
			names:      []string{"n1"},
			wantPassed: []string{"n1"},
		},
		"daemon pod: cordoned node still eligible": {
			objs: []runtime.Object{
				node("n1", nil, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}), agent,
			},
			pod:        pending,
			names:      []string{"n1"},
			wantPassed: []string{"n1"},
		},
		"daemon pod: duplicate of the same revision": {
			objs:       append(nodes, agent, daemonPod(agent, "agent-old", "n1", "v2", ready)),
			pod:        pending,
			names:      []string{"n1"},
			wantPassed: []string{},
			wantFailed: map[string]string{"n1": "everynode: node already runs pod infra/agent-old of DaemonSet infra/agent"},
		},
		"daemon pod: old revision present, no surge": {
			objs:       append(nodes, agent, daemonPod(agent, "agent-old", "n1", "v1", ready)),
			pod:        pending,
			names:      []string{"n1"},
			wantPassed: []string{},
			wantFailed: map[string]string{"n1": "everynode: node already runs pod infra/agent-old of DaemonSet infra/agent"},
		},
		"daemon pod: a pod of an earlier set of the name does not count": {
			// Left by the garbage collector (it missed the cascade): the
			// controller does not see it as the set's, nor may the filter.
			objs:       append(nodes, agent, daemonPod(earlierIncarnation(agent), "agent-earlier", "n1", "v1", ready)),
			pod:        pending,
			names:      []string{"n1"},
			wantPassed: []string{"n1"},
		},
		"daemon pod: surge exception, maxSurge 1": {
			objs:       append(nodes, surging, daemonPod(surging, "agent-old", "n1", "v1", ready)),
			pod:        pending,
			names:      []string{"n1"},
			wantPassed: []string{"n1"},
		},
		"daemon pod: surge exception, maxSurge 10%": {
			objs:       append(nodes, surgingPct, daemonPod(surgingPct, "agent-old", "n1", "v1", ready)),
			pod:        pending,
			names:      []string{"n1"},
			wantPassed: []string{"n1"},
		},
		"daemon pod: maxSurge 0% is no surge": {
			objs:       append(nodes, zeroSurge, daemonPod(zeroSurge, "agent-old", "n1", "v1", ready)),
			pod:        pending,
			names:      []string{"n1"},
			wantPassed: []string{},
			wantFailed: map[string]string{"n1": "everynode: node already runs pod infra/agent-old of DaemonSet infra/agent"},
		},
		"daemon pod: surge does not excuse the same revision": {
			objs:       append(nodes, surging, daemonPod(surging, "agent-twin", "n1", "v2")),
			pod:        pending,
			names:      []string{"n1"},
			wantPassed: []string{},
			wantFailed: map[string]string{"n1": "everynode: node already runs pod infra/agent-twin of DaemonSet infra/agent"},
		},
		"daemon pod: surge allows one other pod, not two": {
			objs: append(nodes, surging,
				daemonPod(surging, "agent-a", "n1", "v1", ready), daemonPod(surging, "agent-b", "n1", "v0", ready)),
			pod:        pending,
			names:      []string{"n1"},
			wantPassed: []string{},
			wantFailed: map[string]string{"n1": "everynode: node already runs pod infra/agent-a of DaemonSet infra/agent"},
		},
		"daemon pod: terminating and failed pods do not count": {
			objs: append(nodes, agent,
				daemonPod(agent, "agent-a", "n1", "v1", ready, terminating), daemonPod(agent, "agent-b", "n1", "v2", failed)),
			pod:        pending,
			names:      []string{"n1"},
			wantPassed: []string{"n1"},
		},
		"daemon pod: itself in the cache is no duplicate": {
			objs:       append(nodes, agent, pending),
			pod:        pending,
			names:      []string{"n1"},
			wantPassed: []string{"n1"},
		},
		"daemon pod: pods of another set do not count": {
			objs:       append(nodes, agent, cni, daemonPod(cni, "cni-1", "n1", "v2", ready)),
			pod:        pending,
			names:      []string{"n1"},
			wantPassed: []string{"n1"},
		},
		"daemon pod: not held back by another set's gate": {
			objs:       append(nodes, agent, cni),
			pod:        pending,
			names:      []string{"n1"},
			wantPassed: []string{"n1"},
		},
		"daemon pod: set gone": {
			objs:       nodes,
			pod:        pending,
			names:      []string{"n1"},
			wantPassed: []string{},
			wantFailed: map[string]string{"n1": "everynode: DaemonSet infra/agent of this daemon pod no longer exists"},
		},
		"daemon pod: set replaced by one of the same name": {
			objs:       append(nodes, agent),
			pod:        stale,
			names:      []string{"n1"},
			wantPassed: []string{},
			wantFailed: map[string]string{"n1": "everynode: DaemonSet infra/agent of this daemon pod no longer exists"},
		},
		"daemon pod: no controlling set": {
			objs:       append(nodes, agent),
			pod:        orphan,
			names:      []string{"n1"},
			wantPassed: []string{},
			wantFailed: map[string]string{"n1": "everynode: daemon pod has no controlling everynode DaemonSet"},
		},
		"daemon pod: no target node": {
			objs:       append(nodes, agent),
			pod:        noTarget,
			names:      []string{"n0", "n1"},
			wantPassed: []string{},
			wantFailed: map[string]string{"n0": "everynode: daemon pod names no target node", "n1": "everynode: daemon pod names no target node"},
		},
		"daemon pod: empty node list": {
			objs:       append(nodes, agent),
			pod:        pending,
			names:      []string{},
			wantPassed: []string{},
		},
		"daemon pod: neither NodeNames nor Nodes": {
			objs:       append(nodes, agent),
			pod:        pending,
			wantPassed: []string{},
		},
		"other pod: no gated set, all pass": {
			objs:       append(nodes, agent),
			pod:        plainPod(),
			names:      []string{"n0", "n1", "n2"},
			wantPassed: []string{"n0", "n1", "n2"},
		},
		"other pod: gated node fails, naming the set": {
			objs:       append(nodes, cni, daemonPod(cni, "cni-0", "n0", "v1", ready), daemonPod(cni, "cni-1", "n1", "v1")),
			pod:        plainPod(),
			names:      []string{"n0", "n1", "n2"},
			wantPassed: []string{"n0"},
			wantFailed: map[string]string{
				"n1": "everynode: node waits for the pod of DaemonSet infra/cni to be Ready (nodeReadinessGate)",
				"n2": "everynode: node waits for the pod of DaemonSet infra/cni to be Ready (nodeReadinessGate)",
			},
		},
		"other pod: node gated by two sets names both": {
			objs:       []runtime.Object{node("n0", nil), cni, daemonSet("csi", true)},
			pod:        plainPod(),
			names:      []string{"n0"},
			wantPassed: []string{},
			wantFailed: map[string]string{
				"n0": "everynode: node waits for the pods of DaemonSets infra/cni, infra/csi to be Ready (nodeReadinessGate)",
			},
		},
		"other pod: gated set not meant for the node leaves it open": {
			objs: append(nodes, daemonSet("cni", true, withNodeSelector(map[string]string{"pool": "a"}))),
			pod:  plainPod(),
			// n9 is unknown to the cache: the scheduler's view may be ahead.
			names:      []string{"n0", "n1", "n9"},
			wantPassed: []string{"n0", "n1", "n9"},
		},
		"other pod: empty node list": {
			objs:       append(nodes, cni),
			pod:        plainPod(),
			names:      []string{},
			wantPassed: []string{},
		},
		"apps/v1 daemon pod: no readiness gate holds it back": {
			objs: append(nodes, cni),
			pod: func() *corev1.Pod {
				p := plainPod()
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "kube-proxy", Controller: ptr.To(true)}}
				return p
			}(),
			names:      []string{"n0", "n1"},
			wantPassed: []string{"n0", "n1"},
		},
		"other pod: owned, not controlled, by an apps/v1 DaemonSet is gated": {
			objs: append(nodes, cni),
			pod: func() *corev1.Pod {
				p := plainPod()
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "kube-proxy"}}
				return p
			}(),
			names:      []string{"n0"},
			wantPassed: []string{},
			wantFailed: map[string]string{"n0": "everynode: node waits for the pod of DaemonSet infra/cni to be Ready (nodeReadinessGate)"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, tc.objs...)
			args := &extenderv1.ExtenderArgs{Pod: tc.pod}
			if tc.names != nil {
				in := slices.Clone(tc.names)
				args.NodeNames = &in
			}
			got := f.ext.filter(args)
			if got.Error != "" {
				t.Fatalf("Error = %q", got.Error)
			}
			if got.NodeNames == nil || *got.NodeNames == nil {
				t.Fatal("NodeNames is nil: the scheduler would fail every node")
			}
			if !slices.Equal(*got.NodeNames, tc.wantPassed) {
				t.Errorf("NodeNames = %q, want %q", *got.NodeNames, tc.wantPassed)
			}
			if !maps.Equal(got.FailedNodes, tc.wantFailed) {
				t.Errorf("FailedNodes = %q, want %q", got.FailedNodes, tc.wantFailed)
			}
			if !maps.Equal(got.FailedAndUnresolvableNodes, tc.wantFailed) {
				t.Errorf("FailedAndUnresolvableNodes = %q, want %q", got.FailedAndUnresolvableNodes, tc.wantFailed)
			}
		})
	}
}

// TestFilterNodes covers a scheduler configured without nodeCacheCapable:
// full nodes in, full nodes out.
func TestFilterNodes(t *testing.T) {
	cni := daemonSet("cni", true)
	f := newFixture(t, node("n0", nil), node("n1", nil), cni, daemonPod(cni, "cni-0", "n0", "v1", ready))
	got := f.ext.filter(&extenderv1.ExtenderArgs{
		Pod:   plainPod(),
		Nodes: &corev1.NodeList{Items: []corev1.Node{*node("n0", nil), *node("n1", nil)}},
	})
	if got.NodeNames != nil {
		t.Errorf("NodeNames = %q, want nil when Nodes were sent", *got.NodeNames)
	}
	if got.Nodes == nil || len(got.Nodes.Items) != 1 || got.Nodes.Items[0].Name != "n0" {
		t.Fatalf("Nodes = %+v, want only n0", got.Nodes)
	}
	if _, ok := got.FailedNodes["n1"]; !ok {
		t.Errorf("FailedNodes = %q, want n1", got.FailedNodes)
	}
}

// earlierIncarnation is a set of ds's name deleted before ds was made: the
// same name, another UID.
func earlierIncarnation(ds *everynodev1alpha1.DaemonSet) *everynodev1alpha1.DaemonSet {
	prev := ds.DeepCopy()
	prev.UID = ds.UID + "-earlier"
	return prev
}
