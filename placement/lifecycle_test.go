package placement

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

func TestClassify(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	ready := func(s corev1.ConditionStatus, since time.Duration) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeReady, Status: s, LastTransitionTime: ago(since)}
	}
	cond := func(typ string, s corev1.ConditionStatus) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeConditionType(typ), Status: s}
	}
	taint := func(key string, effect corev1.TaintEffect, added *metav1.Time) corev1.Taint {
		return corev1.Taint{Key: key, Effect: effect, TimeAdded: added}
	}
	addedAt := ago(20 * time.Second)
	custom := &everynodev1alpha1.DaemonSet{Spec: everynodev1alpha1.DaemonSetSpec{NodeLifecycle: &everynodev1alpha1.NodeLifecycle{
		UnreachableAfterSeconds: ptr.To[int32](10),
		LeavingTaints:           []string{"example.com/draining"},
		LeavingConditions:       []string{"Decommissioning"},
	}}}
	cases := map[string]struct {
		ds     *everynodev1alpha1.DaemonSet
		node   corev1.Node
		class  NodeClass
		reason string
		since  time.Time
	}{
		"ready node serves": {
			node:  corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready(corev1.ConditionTrue, time.Hour)}}},
			class: NodeServing,
		},
		"no conditions yet serves": {
			node:  corev1.Node{},
			class: NodeServing,
		},
		"NotReady within the grace still serves": {
			node:  corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready(corev1.ConditionFalse, 39*time.Second)}}},
			class: NodeServing,
		},
		"Unknown past the grace is unreachable": {
			node:   corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready(corev1.ConditionUnknown, 41*time.Second)}}},
			class:  NodeUnreachable,
			reason: "Ready Unknown for 41s",
			since:  now.Add(-41 * time.Second),
		},
		"the set's grace": {
			ds:     custom,
			node:   corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready(corev1.ConditionFalse, 11*time.Second)}}},
			class:  NodeUnreachable,
			reason: "Ready False for 11s",
			since:  now.Add(-11 * time.Second),
		},
		"unreachable taint at once, since its timeAdded": {
			node: corev1.Node{
				Spec:   corev1.NodeSpec{Taints: []corev1.Taint{taint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute, &addedAt)}},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready(corev1.ConditionUnknown, 5*time.Second)}},
			},
			class:  NodeUnreachable,
			reason: "taint node.kubernetes.io/unreachable:NoExecute",
			since:  now.Add(-20 * time.Second),
		},
		"the earlier of condition and taint": {
			node: corev1.Node{
				Spec:   corev1.NodeSpec{Taints: []corev1.Taint{taint(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute, &addedAt)}},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready(corev1.ConditionFalse, time.Minute)}},
			},
			class:  NodeUnreachable,
			reason: "Ready False for 1m0s",
			since:  now.Add(-time.Minute),
		},
		"not-ready NoSchedule taint of a new node: unreachable, no time": {
			node:   corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint(corev1.TaintNodeNotReady, corev1.TaintEffectNoSchedule, nil)}}},
			class:  NodeUnreachable,
			reason: "taint node.kubernetes.io/not-ready:NoSchedule",
		},
		"karpenter disruption": {
			node:   corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint(TaintKarpenterDisrupted, corev1.TaintEffectNoSchedule, nil)}}},
			class:  NodeLeaving,
			reason: "taint karpenter.sh/disrupted",
		},
		"cluster-autoscaler scale-down": {
			node:   corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint(TaintToBeDeletedByAutoscaler, corev1.TaintEffectNoSchedule, nil)}}},
			class:  NodeLeaving,
			reason: "taint ToBeDeletedByClusterAutoscaler",
		},
		"the set's own taint": {
			ds:     custom,
			node:   corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint("example.com/draining", corev1.TaintEffectPreferNoSchedule, nil)}}},
			class:  NodeLeaving,
			reason: "taint example.com/draining",
		},
		"another set does not read that taint": {
			node:  corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint("example.com/draining", corev1.TaintEffectPreferNoSchedule, nil)}}},
			class: NodeServing,
		},
		"a cordon alone serves": {
			node:  corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}},
			class: NodeServing,
		},
		"drain condition without a cordon serves": {
			node:  corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{cond(ConditionDrainInProgress, corev1.ConditionTrue)}}},
			class: NodeServing,
		},
		"cordoned and draining": {
			node: corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{cond(ConditionDrained, corev1.ConditionTrue)}}},
			class:  NodeLeaving,
			reason: "cordoned with condition Drained",
		},
		"maintenance planned": {
			node:   corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{cond(ConditionMaintenancePlanned, corev1.ConditionTrue)}}},
			class:  NodeLeaving,
			reason: "condition MaintenancePlanned",
		},
		"maintenance condition False serves": {
			node:  corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{cond(ConditionMaintenanceInProgress, corev1.ConditionFalse)}}},
			class: NodeServing,
		},
		"the set's own condition": {
			ds:     custom,
			node:   corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{cond("Decommissioning", corev1.ConditionTrue)}}},
			class:  NodeLeaving,
			reason: "condition Decommissioning",
		},
		"node being deleted": {
			node:   corev1.Node{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &addedAt}},
			class:  NodeLeaving,
			reason: "node is being deleted",
		},
		"graceful shutdown wins over everything": {
			node: corev1.Node{
				Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint(TaintKarpenterDisrupted, corev1.TaintEffectNoSchedule, nil), taint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute, &addedAt)}},
				Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
					ready(corev1.ConditionFalse, time.Hour), cond(ConditionGracefulShutdown, corev1.ConditionTrue)}},
			},
			class:  NodeShuttingDown,
			reason: "condition GracefulNodeShutdownInProgress",
		},
		"unreachable wins over leaving": {
			node: corev1.Node{
				Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint(TaintKarpenterDisrupted, corev1.TaintEffectNoSchedule, nil), taint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute, &addedAt)}},
			},
			class:  NodeUnreachable,
			reason: "taint node.kubernetes.io/unreachable:NoExecute",
			since:  now.Add(-20 * time.Second),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ds := tc.ds
			if ds == nil {
				ds = &everynodev1alpha1.DaemonSet{}
			}
			l := NodeLifecycleOf(ds)
			got := l.Classify(&tc.node, now)
			if got.Class != tc.class || got.Reason != tc.reason || !got.Since.Equal(tc.since) {
				t.Errorf("got %v %q since %v, want %v %q since %v", got.Class, got.Reason, got.Since, tc.class, tc.reason, tc.since)
			}
			if got.Class.Skipped() != (tc.class != NodeServing) {
				t.Errorf("Skipped() = %v for %v", got.Class.Skipped(), got.Class)
			}
		})
	}
}

func TestFailedAfterUpdate(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	l := NodeLifecycleOf(&everynodev1alpha1.DaemonSet{})
	unreachableAt := func(at time.Time) NodePhase { return NodePhase{Class: NodeUnreachable, Since: at} }
	cases := map[string]struct {
		phase    NodePhase
		podSince time.Time
		want     bool
	}{
		"down a minute after the update":         {unreachableAt(t0.Add(time.Minute)), t0, true},
		"down at the window's end":               {unreachableAt(t0.Add(5 * time.Minute)), t0, true},
		"down after the window":                  {unreachableAt(t0.Add(5*time.Minute + time.Second)), t0, false},
		"down before the pod came: only skipped": {unreachableAt(t0.Add(-time.Second)), t0, false},
		"no time known":                          {NodePhase{Class: NodeUnreachable}, t0, false},
		"leaving is never a failure":             {NodePhase{Class: NodeLeaving, Since: t0.Add(time.Second)}, t0, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := l.FailedAfterUpdate(tc.phase, tc.podSince); got != tc.want {
				t.Errorf("FailedAfterUpdate = %v, want %v", got, tc.want)
			}
		})
	}
	off := NodeLifecycleOf(&everynodev1alpha1.DaemonSet{Spec: everynodev1alpha1.DaemonSetSpec{NodeLifecycle: &everynodev1alpha1.NodeLifecycle{UnreachableFailureWindowSeconds: ptr.To[int32](0)}}})
	if off.FailedAfterUpdate(unreachableAt(t0.Add(time.Second)), t0) {
		t.Error("a window of 0 still counts a failure")
	}
}

func TestLifecycleChangeMatters(t *testing.T) {
	base := func() *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
		}}}
	}
	cases := map[string]struct {
		change func(n *corev1.Node)
		want   bool
	}{
		"a heartbeat":     {func(n *corev1.Node) { n.Status.Conditions[0].LastHeartbeatTime = metav1.Now() }, false},
		"memory pressure": {func(n *corev1.Node) { n.Status.Conditions[1].Status = corev1.ConditionTrue }, false},
		"Ready turns":     {func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown }, true},
		"a plain cordon":  {func(n *corev1.Node) { n.Spec.Unschedulable = true }, false},
		"a cordon while draining": {func(n *corev1.Node) {
			n.Spec.Unschedulable = true
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: ConditionDrainInProgress, Status: corev1.ConditionTrue})
		}, true},
		"a taint": {func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: TaintKarpenterDisrupted, Effect: corev1.TaintEffectNoSchedule}}
		}, true},
		"a deletion": {func(n *corev1.Node) { now := metav1.Now(); n.DeletionTimestamp = &now }, true},
		"a new condition": {func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: ConditionGracefulShutdown, Status: corev1.ConditionTrue})
		}, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cur := base()
			tc.change(cur)
			if got := LifecycleChangeMatters(base(), cur); got != tc.want {
				t.Errorf("LifecycleChangeMatters = %v, want %v", got, tc.want)
			}
		})
	}
}
