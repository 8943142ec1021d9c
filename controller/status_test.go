package controller

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/controller/internal/testobj"
	"everynode.io/everynode/placement"
)

var crashLooping = testobj.CrashLooping

func pending(p *corev1.Pod) {
	unbound(p)
	phase(corev1.PodPending)(p)
}

// unschedulablePod is a pod the scheduler tried and could not place.
func unschedulablePod(p *corev1.Pod) {
	pending(p)
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
	})
}

// lacksMarker is a pod kube-scheduler left Pending because no node has
// the daemon-pod marker: its configuration does not ignore it.
func lacksMarker(p *corev1.Pod) {
	pending(p)
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/2 nodes are available: 1 Insufficient everynode.io/daemon, 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
	})
}

func TestStatus(t *testing.T) {
	type want struct {
		desired, current, misscheduled, ready, available, unavailable, updated int32
		available_, progressing                                                string // condition "Status/Reason"
		currentIsOld                                                           bool
		message                                                                string // substring of the Available message
	}
	tests := map[string]struct {
		nodes int
		node  func(i int, n *corev1.Node)
		set   func(*everynodev1alpha1.DaemonSet)
		pod   func(i int) []podOpt // per node; nil: no pod on that node
		oldOn map[int]bool         // nodes running the old revision
		want  want
	}{
		"all available": {
			nodes: 3,
			want:  want{desired: 3, current: 3, ready: 3, available: 3, updated: 3, available_: "True/AllPodsAvailable", progressing: "True/RolloutComplete"},
		},
		"misscheduled: pod on a node that should not run it": {
			nodes: 3,
			node: func(i int, n *corev1.Node) {
				if i == 2 {
					taint("dedicated", corev1.TaintEffectNoSchedule)(n)
				}
			},
			want: want{desired: 2, current: 2, misscheduled: 1, ready: 2, available: 2, updated: 2, available_: "True/AllPodsAvailable", progressing: "True/RolloutComplete"},
		},
		"pod not ready": {
			nodes: 3,
			pod: func(i int) []podOpt {
				if i == 1 {
					return []podOpt{notReady}
				}
				return []podOpt{}
			},
			want: want{desired: 3, current: 3, ready: 2, available: 2, unavailable: 1, updated: 3,
				available_: "False/PodsNotReady", progressing: "True/RollingUpdate", message: "pods not Ready: agent-node-1-"},
		},
		"minReadySeconds not yet passed": {
			nodes: 2,
			set:   func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.MinReadySeconds = 30 },
			pod: func(i int) []podOpt {
				if i == 0 {
					return []podOpt{readySince(t0.Add(-10 * time.Second))}
				}
				return []podOpt{}
			},
			want: want{desired: 2, current: 2, ready: 2, available: 1, unavailable: 1, updated: 2,
				available_: "False/MinReadySeconds", progressing: "True/RollingUpdate"},
		},
		"node without a pod": {
			nodes: 3,
			pod: func(i int) []podOpt {
				if i == 0 {
					return nil
				}
				return []podOpt{}
			},
			want: want{desired: 3, current: 2, ready: 2, available: 2, unavailable: 1, updated: 2,
				available_: "False/PodsMissing", progressing: "True/RollingUpdate", message: "nodes without a pod yet: node-0"},
		},
		"node NotReady": {
			nodes: 3,
			node: func(i int, n *corev1.Node) {
				if i == 2 {
					n.Status.Conditions[0].Status = corev1.ConditionUnknown
				}
			},
			pod: func(i int) []podOpt {
				if i == 2 {
					return []podOpt{notReady}
				}
				return []podOpt{}
			},
			want: want{desired: 3, current: 3, ready: 2, available: 2, unavailable: 1, updated: 3,
				available_: "False/NodesNotReady", progressing: "False/NodesNotReady", message: "nodes NotReady: node-2"},
		},
		"crash loop": {
			nodes: 2,
			pod: func(i int) []podOpt {
				if i == 0 {
					return []podOpt{crashLooping}
				}
				return []podOpt{}
			},
			want: want{desired: 2, current: 2, ready: 1, available: 1, unavailable: 1, updated: 2,
				available_: "False/PodsCrashLooping", progressing: "False/PodsCrashLooping", message: "in CrashLoopBackOff"},
		},
		"pending pod, just created: the rollout moves": {
			nodes: 2,
			pod: func(i int) []podOpt {
				if i == 1 {
					return []podOpt{pending}
				}
				return []podOpt{}
			},
			want: want{desired: 2, current: 2, ready: 1, available: 1, unavailable: 1, updated: 2,
				available_: "False/PodsNotReady", progressing: "True/RollingUpdate", message: "pods not Ready: agent-node-1-"},
		},
		"unschedulable pod: the rollout waits": {
			nodes: 2,
			pod: func(i int) []podOpt {
				if i == 1 {
					return []podOpt{unschedulablePod}
				}
				return []podOpt{}
			},
			want: want{desired: 2, current: 2, ready: 1, available: 1, unavailable: 1, updated: 2,
				available_: "False/PodsPending", progressing: "False/PodsPending", message: "pods Pending (unschedulable): agent-node-1-"},
		},
		"the scheduler does not ignore the marker": {
			nodes: 3,
			node: func(i int, n *corev1.Node) {
				if i == 2 {
					n.Status.Conditions[0].Status = corev1.ConditionUnknown
				}
			},
			pod: func(i int) []podOpt {
				if i == 0 {
					return []podOpt{}
				}
				return []podOpt{lacksMarker}
			},
			// Before NodesNotReady: it is the one that stops every pod.
			want: want{desired: 3, current: 3, ready: 1, available: 1, unavailable: 2, updated: 3,
				available_: "False/DaemonResourceNotIgnored", progressing: "False/DaemonResourceNotIgnored",
				message: "does not ignore the daemon-pod marker resource"},
		},
		"old revision left by OnDelete": {
			nodes: 3, oldOn: map[int]bool{0: true, 2: true},
			set: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy = everynodev1alpha1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
			},
			want: want{desired: 3, current: 3, ready: 3, available: 3, updated: 1, currentIsOld: true,
				available_: "True/AllPodsAvailable", progressing: "True/OnDelete"},
		},
		"partition holds nodes: rollout complete": {
			nodes: 3, oldOn: map[int]bool{2: true},
			set: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.UpdateStrategy.RollingUpdate.Partition = intOrStr("1") },
			want: want{desired: 3, current: 3, ready: 3, available: 3, updated: 2, currentIsOld: true,
				available_: "True/AllPodsAvailable", progressing: "True/RolloutComplete"},
		},
		"five NotReady nodes: three named": {
			nodes: 5,
			node:  func(i int, n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse },
			pod:   func(int) []podOpt { return []podOpt{notReady} },
			want: want{desired: 5, current: 5, unavailable: 5, updated: 5,
				available_: "False/NodesNotReady", progressing: "False/NodesNotReady", message: "nodes NotReady: node-0, node-1, node-2 and 2 more"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			for i := 0; i < tc.nodes; i++ {
				n := newNode(fmt.Sprintf("node-%d", i), nil)
				if tc.node != nil {
					tc.node(i, n)
				}
				f.add(n)
			}
			ds := newSet("agent")
			ds.Generation = 7
			ds.Status.CollisionCount = ptr.To[int32](2)
			if tc.set != nil {
				tc.set(ds)
			}
			oldHash := addSetWithRevision(f, ds)
			hash := oldHash
			if len(tc.oldOn) > 0 {
				newer := ds.DeepCopy()
				newer.Spec.Template.Spec.Containers[0].Image = "agent:2"
				hash = revisionHash(newer)
				ds = newer
				f.update(ds)
			}
			for i := 0; i < tc.nodes; i++ {
				opts := []podOpt{}
				if tc.pod != nil {
					opts = tc.pod(i)
				}
				if opts == nil {
					continue
				}
				h := hash
				if tc.oldOn[i] {
					h = oldHash
				}
				f.add(newPod(ds, fmt.Sprintf("node-%d", i), h, opts...))
			}
			if err := f.sync(ds); err != nil {
				t.Fatal(err)
			}
			st := f.set(ds).Status
			got := want{
				desired: st.DesiredNumberScheduled, current: st.CurrentNumberScheduled, misscheduled: st.NumberMisscheduled,
				ready: st.NumberReady, available: st.NumberAvailable, unavailable: st.NumberUnavailable, updated: st.UpdatedNumberScheduled,
				currentIsOld: st.CurrentRevision == oldHash && oldHash != hash,
			}
			avail := meta.FindStatusCondition(st.Conditions, everynodev1alpha1.ConditionAvailable)
			prog := meta.FindStatusCondition(st.Conditions, everynodev1alpha1.ConditionProgressing)
			if avail == nil || prog == nil {
				t.Fatalf("conditions = %v, want Available and Progressing", st.Conditions)
			}
			got.available_ = string(avail.Status) + "/" + avail.Reason
			got.progressing = string(prog.Status) + "/" + prog.Reason
			if tc.want.message != "" && !strings.Contains(avail.Message, tc.want.message) {
				t.Errorf("Available message %q does not contain %q", avail.Message, tc.want.message)
			}
			got.message = tc.want.message
			if got != tc.want {
				t.Errorf("status\n got %+v\nwant %+v\n(Available: %s; Progressing: %s)", got, tc.want, avail.Message, prog.Message)
			}
			if st.ObservedGeneration != 7 || avail.ObservedGeneration != 7 {
				t.Errorf("observedGeneration = %d (condition %d), want 7", st.ObservedGeneration, avail.ObservedGeneration)
			}
			if st.UpdateRevision != hash {
				t.Errorf("updateRevision = %s, want %s", st.UpdateRevision, hash)
			}
			if !tc.want.currentIsOld && st.CurrentRevision != hash {
				t.Errorf("currentRevision = %s, want %s", st.CurrentRevision, hash)
			}
			if st.CollisionCount == nil || *st.CollisionCount != 2 {
				t.Errorf("collisionCount = %v, want 2 kept", st.CollisionCount)
			}
			if !avail.LastTransitionTime.Time.Equal(t0) {
				t.Errorf("lastTransitionTime = %v, want the fake clock's %v", avail.LastTransitionTime, t0)
			}
		})
	}
}

// TestStatusWrittenOnlyWhenChanged checks that a sync with nothing new
// writes nothing, and that a condition keeps its transition time while its
// status holds.
func TestStatusWrittenOnlyWhenChanged(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 2)
	ds := newSet("agent")
	f.add(ds)
	f.settle(ds)
	f.runPods()
	f.settle(ds)
	f.clock.Step(time.Minute)
	f.mustSync(ds)
	f.mustSync(ds)
	if got := f.statusUpdates(); len(got) != 0 {
		t.Errorf("idle sync wrote status %d times", len(got))
	}
	if n := len(f.kube.Actions()); n != 0 {
		t.Errorf("idle sync made %d API calls: %v", n, f.kube.Actions())
	}
	st := f.set(ds).Status
	if c := meta.FindStatusCondition(st.Conditions, everynodev1alpha1.ConditionAvailable); c == nil || c.Status != metav1.ConditionTrue || c.LastTransitionTime.Time.After(t0) {
		t.Errorf("Available = %+v, want True since t0", c)
	}
}

// Nodes kept away by untolerated taints are counted per taint in the
// NodesExcluded condition, so `kubectl describe` says why; nodes the
// selector leaves out are not, and the condition goes once none is left.
func TestNodesExcludedCondition(t *testing.T) {
	f := newFixture(t)
	nodes := addNodes(f, 5)
	gpu := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	nodes[1].Spec.Taints = []corev1.Taint{gpu}
	nodes[2].Spec.Taints = []corev1.Taint{gpu}
	nodes[3].Spec.Taints = []corev1.Taint{{Key: "evict", Effect: corev1.TaintEffectNoExecute}, gpu}
	nodes[4].Labels = map[string]string{"pool": "other"}
	nodes[4].Spec.Taints = []corev1.Taint{gpu}
	f.update(nodes[1], nodes[2], nodes[3], nodes[4])
	ds := newSet("agent")
	ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpDoesNotExist}}}},
	}}}
	f.add(ds)
	f.mustSync(ds)
	c := meta.FindStatusCondition(f.set(ds).Status.Conditions, everynodev1alpha1.ConditionNodesExcluded)
	if c == nil {
		t.Fatal("no NodesExcluded condition")
	}
	want := "3 nodes the selector admits kept away by taints: 2 nodes: taint dedicated=gpu:NoSchedule not tolerated; " +
		"1 node: taint evict:NoExecute, dedicated=gpu:NoSchedule not tolerated (kubectl everynode explain tells each node)"
	if c.Status != metav1.ConditionTrue || c.Reason != everynodev1alpha1.ReasonUntoleratedTaints || c.Message != want {
		t.Errorf("condition %s/%s %q, want True/%s %q", c.Status, c.Reason, c.Message, everynodev1alpha1.ReasonUntoleratedTaints, want)
	}

	for _, n := range nodes[1:4] {
		n.Spec.Taints = nil
	}
	f.update(nodes[1], nodes[2], nodes[3])
	f.syncCaches()
	f.mustSync(ds)
	if c := meta.FindStatusCondition(f.set(ds).Status.Conditions, everynodev1alpha1.ConditionNodesExcluded); c != nil {
		t.Errorf("NodesExcluded %s %q after the taints went; want no condition", c.Status, c.Message)
	}
}

// With the marker configured off, pods an earlier everynode made with it
// that the scheduler leaves Pending for it get one Warning event, when it
// first shows, not on every sync, that says they are replaced; and they
// are deleted.
func TestMarkerNotIgnoredEvent(t *testing.T) {
	placement.SetDaemonResource("")
	f := newFixture(t)
	addNodes(f, 2)
	ds := newSet("agent")
	f.add(ds)
	f.mustSync(ds)
	f.syncCaches()
	stuck := markStuck(t, f)
	f.mustSync(ds)
	if got := f.podDeletes(); !reflect.DeepEqual(got, stuck) {
		t.Errorf("deleted %q, want the stuck pods %q", got, stuck)
	}
	f.syncCaches()
	f.mustSync(ds)
	var warnings []string
	for _, e := range f.events() {
		if strings.HasPrefix(e, "Warning "+everynodev1alpha1.ReasonDaemonResourceNotIgnored) {
			warnings = append(warnings, e)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "replaces these") {
		t.Errorf("events %q, want one Warning %s saying they are replaced", warnings, everynodev1alpha1.ReasonDaemonResourceNotIgnored)
	}
}

// markStuck makes every pod in the fake API server one the scheduler left
// Pending for want of the default marker, which it requests, and returns
// their names, sorted.
func markStuck(t *testing.T, f *fixture) []string {
	t.Helper()
	list, err := f.kube.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	marker := corev1.ResourceName(everynodev1alpha1.DefaultDaemonResource)
	for i := range list.(*corev1.PodList).Items {
		p := list.(*corev1.PodList).Items[i].DeepCopy()
		c := &p.Spec.Containers[0].Resources
		c.Requests = corev1.ResourceList{marker: resource.MustParse("1")}
		c.Limits = corev1.ResourceList{marker: resource.MustParse("1")}
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		lacksMarker(p)
		f.update(p)
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return names
}

// A set with nodeReadinessGate gets NodeReadinessGateInactive and one
// Warning event where the installation cannot enforce the gate: the marker
// on, no startup taint.
func TestReadinessGateInactiveCondition(t *testing.T) {
	tests := map[string]struct {
		gate          bool
		marker, taint string
		want          bool
	}{
		"gate, marker":                {gate: true, marker: everynodev1alpha1.DefaultDaemonResource, want: true},
		"gate, marker, startup taint": {gate: true, marker: everynodev1alpha1.DefaultDaemonResource, taint: "example.com/not-ready"},
		"gate, no marker":             {gate: true},
		"no gate, marker":             {marker: everynodev1alpha1.DefaultDaemonResource},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			placement.SetDaemonResource(tc.marker)
			placement.SetStartupTaint(tc.taint)
			t.Cleanup(func() { placement.SetDaemonResource(""); placement.SetStartupTaint("") })
			f := newFixture(t)
			addNodes(f, 1)
			ds := newSet("agent")
			ds.Spec.NodeReadinessGate = tc.gate
			f.add(ds)
			f.mustSync(ds)
			f.syncCaches()
			f.mustSync(ds)
			c := meta.FindStatusCondition(f.set(ds).Status.Conditions, everynodev1alpha1.ConditionNodeReadinessGateInactive)
			var warnings []string
			for _, e := range f.events() {
				if strings.HasPrefix(e, "Warning "+everynodev1alpha1.ReasonExtenderSeesDaemonPodsOnly) {
					warnings = append(warnings, e)
				}
			}
			if !tc.want {
				if c != nil || len(warnings) > 0 {
					t.Errorf("condition %+v, events %q; want none", c, warnings)
				}
				return
			}
			if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "--startup-taint") {
				t.Fatalf("condition %+v, want True naming the startup taint", c)
			}
			if len(warnings) != 1 {
				t.Errorf("events %q, want one Warning", warnings)
			}
		})
	}
}

// A set in a namespace the webhooks skip that has nodeOverrides gets the
// WebhooksSkipped condition and one Warning event; the same set elsewhere,
// or without overrides, gets neither, and the condition goes with the
// overrides.
func TestWebhooksSkippedCondition(t *testing.T) {
	overrides := []everynodev1alpha1.NodeOverride{{
		NodeSelector: &metav1.LabelSelector{},
		Patch:        runtime.RawExtension{Raw: []byte(`{"spec":{"containers":[{"name":"agent","image":"agent:arm64"}]}}`)},
	}}
	tests := map[string]struct {
		skipped   []string
		overrides []everynodev1alpha1.NodeOverride
		want      bool
	}{
		"skipped namespace, overrides": {skipped: []string{"kube-system", ns}, overrides: overrides, want: true},
		"skipped namespace, none":      {skipped: []string{ns}},
		"served namespace, overrides":  {skipped: []string{"kube-system"}, overrides: overrides},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			for _, n := range tc.skipped {
				f.c.webhookSkipped[n] = true
			}
			addNodes(f, 2)
			ds := newSet("agent")
			ds.Spec.NodeOverrides = tc.overrides
			f.add(ds)
			f.mustSync(ds)
			f.syncCaches()
			f.mustSync(ds)
			c := meta.FindStatusCondition(f.set(ds).Status.Conditions, everynodev1alpha1.ConditionWebhooksSkipped)
			var warnings []string
			for _, e := range f.events() {
				if strings.HasPrefix(e, "Warning "+everynodev1alpha1.ReasonNodeOverridesUnchecked) {
					warnings = append(warnings, e)
				}
			}
			if !tc.want {
				if c != nil || len(warnings) > 0 {
					t.Errorf("condition %+v, events %q; want none", c, warnings)
				}
				return
			}
			wantMsg := "spec.nodeOverrides (1) are applied but were not checked when the set was stored: the everynode webhooks skip namespace default " +
				"so that an everynode outage cannot block it; an override that does not apply, or that changes tolerations, nodeSelector or node affinity, " +
				"fails each pod create (FailedCreate events) instead of the set's update; move the set to another namespace to have them checked"
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != everynodev1alpha1.ReasonNodeOverridesUnchecked || c.Message != wantMsg {
				t.Fatalf("condition %+v, want True/%s %q", c, everynodev1alpha1.ReasonNodeOverridesUnchecked, wantMsg)
			}
			if len(warnings) != 1 || warnings[0] != "Warning NodeOverridesUnchecked "+wantMsg {
				t.Errorf("events %q, want one Warning %s", warnings, everynodev1alpha1.ReasonNodeOverridesUnchecked)
			}

			// The overrides go: so does the condition.
			ds = f.set(ds)
			ds.Spec.NodeOverrides = nil
			ds.Generation++
			f.update(ds)
			f.syncCaches()
			f.mustSync(ds)
			if c := meta.FindStatusCondition(f.set(ds).Status.Conditions, everynodev1alpha1.ConditionWebhooksSkipped); c != nil {
				t.Errorf("WebhooksSkipped %+v after the overrides went; want none", c)
			}
		})
	}
}
