package soak

import (
	"bytes"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

func testPod(ready bool, ltt time.Time, gateClosed bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "s00-mu1-x", UID: types.UID("u-x"),
			Labels:          map[string]string{SetLabel: "s00-mu1", appsv1.DefaultDaemonSetUniqueLabelKey: "h1"},
			Annotations:     map[string]string{everynodev1alpha1.AnnotationTargetNode: "soak-0001"},
			OwnerReferences: []metav1.OwnerReference{{UID: "set-uid", Controller: ptr.To(true), Kind: "DaemonSet", Name: "s00-mu1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(ltt)}}
	if gateClosed {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: everynodev1alpha1.ConditionInPlaceUpdateReady, Status: corev1.ConditionFalse})
	}
	return p
}

// The pod records: Ready since its condition's time when first listed,
// since it was seen turning Ready after that, and again when the
// condition's time moves while it stays Ready (a broken watch missed the
// not-Ready in between).
func TestRecorderPods(t *testing.T) {
	var buf bytes.Buffer
	r := newRecorderTo(&buf)
	last := func() *PodObs {
		t.Helper()
		if err := r.out.Flush(); err != nil {
			t.Fatal(err)
		}
		obs, err := ReadObs(bytes.NewReader(buf.Bytes()))
		if err != nil || len(obs) != r.n {
			t.Fatalf("%d records read of %d: %v", len(obs), r.n, err)
		}
		return obs[len(obs)-1].Pod
	}
	listed := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	r.pod(OpAdd, testPod(true, listed, false))
	if p := last(); !p.ReadySince.Equal(listed) || p.Node != "soak-0001" || p.Hash != "h1" || p.OwnerUID != "set-uid" || p.Set != "s00-mu1" {
		t.Errorf("listed pod %+v", p)
	}
	r.pod(OpUpdate, testPod(false, listed.Add(time.Hour), true))
	if p := last(); !p.ReadySince.IsZero() || !p.GateClosed {
		t.Errorf("not Ready, gate closed: %+v", p)
	}
	before := time.Now()
	r.pod(OpUpdate, testPod(true, listed.Add(time.Hour+time.Second), false))
	again := last().ReadySince
	if again.Before(before) {
		t.Errorf("Ready again since %s, want the time it was seen (after %s)", again, before)
	}
	r.pod(OpUpdate, testPod(true, listed.Add(time.Hour+time.Second), false))
	if p := last(); !p.ReadySince.Equal(again) {
		t.Errorf("a status write that changes nothing moved ReadySince to %s", p.ReadySince)
	}
	before = time.Now()
	r.pod(OpUpdate, testPod(true, listed.Add(2*time.Hour), false))
	if p := last(); p.ReadySince.Before(before) {
		t.Errorf("a new transition time kept ReadySince %s", p.ReadySince)
	}
}

func TestNodeServing(t *testing.T) {
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
	for name, tc := range map[string]struct {
		node corev1.Node
		want bool
	}{
		"ready":       {corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}, true},
		"not ready":   {corev1.Node{}, false},
		"unreachable": {corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}, false},
		"leaving":     {corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule}}}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}, false},
	} {
		if got, why, _ := nodeServing(&tc.node); got != tc.want {
			t.Errorf("%s: serving %t (%s), want %t", name, got, why, tc.want)
		}
	}
}

// A node that is not Ready says since when.
func TestNodeServingSince(t *testing.T) {
	unknown := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(t0)}
	if ok, _, since := nodeServing(&corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{unknown}}}); ok || !since.Equal(t0) {
		t.Errorf("serving %t since %v, want false since %v", ok, since, t0)
	}
}

// Pod records are marked Listed within the window after a sign of a
// relist, and only then.
func TestRecorderMarksRelists(t *testing.T) {
	var buf bytes.Buffer
	r := newRecorderTo(&buf)
	r.pod(OpUpdate, testPod(true, t0, false))
	r.sawRelist()
	r.pod(OpUpdate, testPod(true, t0, false))
	r.relistUntil = time.Now().Add(-time.Second)
	r.pod(OpUpdate, testPod(true, t0, false))
	if _, err := r.close(); err != nil {
		t.Fatal(err)
	}
	obs, err := ReadObs(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var got []bool
	for _, o := range obs {
		got = append(got, o.Pod.Listed)
	}
	if want := []bool{false, true, false}; !slices.Equal(got, want) {
		t.Errorf("Listed %v, want %v", got, want)
	}
	if resourceVersion(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7"}}) != "7" || resourceVersion("x") != "" {
		t.Error("resourceVersion")
	}
}
