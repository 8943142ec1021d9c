package placement_test

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

func pinTerm(node string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{
		Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node},
	}}}
}

func TestPodsPinToNode(t *testing.T) {
	preferred := []corev1.PreferredSchedulingTerm{{
		Weight:     10,
		Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "ssd", Operator: corev1.NodeSelectorOpExists}}},
	}}
	podAffinity := &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, TopologyKey: "kubernetes.io/hostname",
	}}}
	podAntiAffinity := &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
		Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, TopologyKey: "zone"},
	}}}
	pinned := func(a *corev1.Affinity) *corev1.Affinity {
		if a.NodeAffinity == nil {
			a.NodeAffinity = &corev1.NodeAffinity{}
		}
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{pinTerm("n1")}}
		return a
	}

	tests := map[string]struct {
		in   *corev1.Affinity
		want *corev1.Affinity
	}{
		"no affinity": {
			want: pinned(&corev1.Affinity{}),
		},
		"empty node affinity": {
			in:   &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}},
			want: pinned(&corev1.Affinity{}),
		},
		"required terms are replaced, all of them": {
			in: requiredAffinity(
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
				pinTerm("other"),
			),
			want: pinned(&corev1.Affinity{}),
		},
		"preferred node terms are kept": {
			in: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution:  &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{pinTerm("old")}},
				PreferredDuringSchedulingIgnoredDuringExecution: preferred,
			}},
			want: pinned(&corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: preferred}}),
		},
		"pod affinity and anti-affinity are kept": {
			in:   &corev1.Affinity{PodAffinity: podAffinity, PodAntiAffinity: podAntiAffinity},
			want: pinned(&corev1.Affinity{PodAffinity: podAffinity, PodAntiAffinity: podAntiAffinity}),
		},
		"already pinned to the node": {
			in:   pinned(&corev1.Affinity{}),
			want: pinned(&corev1.Affinity{}),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := tc.in.DeepCopy()
			got := placement.PinToNode(tc.in, "n1")
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Fatalf("PinToNode() =\n%+v\nwant\n%+v", got, tc.want)
			}
			if !equality.Semantic.DeepEqual(tc.in, before) {
				t.Fatalf("PinToNode modified its input")
			}
			if again := placement.PinToNode(got, "n1"); !equality.Semantic.DeepEqual(again, got) {
				t.Fatalf("PinToNode is not idempotent")
			}
			pod := &corev1.Pod{Spec: corev1.PodSpec{Affinity: got}}
			if node, ok := placement.TargetNode(pod); !ok || node != "n1" {
				t.Fatalf("TargetNode of the pinned pod = %q, %v; want n1", node, ok)
			}
		})
	}
}

func TestPodsTargetNode(t *testing.T) {
	annotated := map[string]string{everynodev1alpha1.AnnotationTargetNode: "from-annotation"}
	tests := map[string]struct {
		pod      corev1.Pod
		want     string
		wantOkay bool
	}{
		"nothing names a node": {},
		"bound pod: nodeName wins": {
			pod: corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Annotations: annotated},
				Spec:       corev1.PodSpec{NodeName: "bound", Affinity: requiredAffinity(pinTerm("pinned"))},
			},
			want: "bound", wantOkay: true,
		},
		"annotation before affinity": {
			pod: corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Annotations: annotated},
				Spec:       corev1.PodSpec{Affinity: requiredAffinity(pinTerm("pinned"))},
			},
			want: "from-annotation", wantOkay: true,
		},
		"pinning affinity": {
			pod:  corev1.Pod{Spec: corev1.PodSpec{Affinity: requiredAffinity(pinTerm("pinned"))}},
			want: "pinned", wantOkay: true,
		},
		"empty annotation is ignored": {
			pod: corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{everynodev1alpha1.AnnotationTargetNode: ""}},
				Spec:       corev1.PodSpec{Affinity: requiredAffinity(pinTerm("pinned"))},
			},
			want: "pinned", wantOkay: true,
		},
		"matchFields with two nodes does not pin": {
			pod: corev1.Pod{Spec: corev1.PodSpec{Affinity: requiredAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{
				Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"},
			}}})}},
		},
		"NotIn does not pin": {
			pod: corev1.Pod{Spec: corev1.PodSpec{Affinity: requiredAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{
				Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a"},
			}}})}},
		},
		"label expressions do not pin": {
			pod: corev1.Pod{Spec: corev1.PodSpec{Affinity: requiredAffinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"},
			}}})}},
		},
		"preferred terms do not pin": {
			pod: corev1.Pod{Spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: pinTerm("a")}},
			}}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := placement.TargetNode(&tc.pod)
			if got != tc.want || ok != tc.wantOkay {
				t.Fatalf("TargetNode() = %q, %v; want %q, %v", got, ok, tc.want, tc.wantOkay)
			}
		})
	}
}

func TestPodsIsDaemonPod(t *testing.T) {
	tests := map[string]struct {
		labels map[string]string
		want   bool
	}{
		"no labels":     {},
		"label true":    {labels: map[string]string{everynodev1alpha1.LabelDaemonPod: "true"}, want: true},
		"label false":   {labels: map[string]string{everynodev1alpha1.LabelDaemonPod: "false"}},
		"label empty":   {labels: map[string]string{everynodev1alpha1.LabelDaemonPod: ""}},
		"other labels":  {labels: map[string]string{"app": "agent"}},
		"label True":    {labels: map[string]string{everynodev1alpha1.LabelDaemonPod: "True"}},
		"with app too":  {labels: map[string]string{"app": "agent", everynodev1alpha1.LabelDaemonPod: "true"}, want: true},
		"similar key":   {labels: map[string]string{"everynode.io/daemon": "true"}},
		"other project": {labels: map[string]string{"example.com/daemon-pod": "true"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels}}
			if got := placement.IsDaemonPod(pod); got != tc.want {
				t.Fatalf("IsDaemonPod() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPodsIsBuiltinDaemonPod(t *testing.T) {
	ref := func(apiVersion, kind string, controller bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "x", UID: "u", Controller: &controller}}
	}
	tests := map[string]struct {
		owners []metav1.OwnerReference
		want   bool
	}{
		"no owner":                 {},
		"apps/v1 DaemonSet":        {owners: ref("apps/v1", "DaemonSet", true), want: true},
		"apps/v1beta2 DaemonSet":   {owners: ref("apps/v1beta2", "DaemonSet", true), want: true},
		"extensions DaemonSet":     {owners: ref("extensions/v1beta1", "DaemonSet", true)},
		"everynode DaemonSet":      {owners: ref("everynode.io/v1alpha1", "DaemonSet", true)},
		"apps/v1 ReplicaSet":       {owners: ref("apps/v1", "ReplicaSet", true)},
		"owner but not controller": {owners: ref("apps/v1", "DaemonSet", false)},
		"malformed apiVersion":     {owners: ref("apps/v1/x", "DaemonSet", true)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: tc.owners}}
			if got := placement.IsBuiltinDaemonPod(pod); got != tc.want {
				t.Fatalf("IsBuiltinDaemonPod() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPodsIsPodUpdated(t *testing.T) {
	withHash := func(h string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{appsv1.DefaultDaemonSetUniqueLabelKey: h}}}
	}
	tests := map[string]struct {
		pod  *corev1.Pod
		hash string
		want bool
	}{
		"same hash":              {pod: withHash("abc"), hash: "abc", want: true},
		"other hash":             {pod: withHash("abc"), hash: "def"},
		"pod without hash":       {pod: &corev1.Pod{}, hash: "abc"},
		"empty hash never is":    {pod: withHash(""), hash: ""},
		"unlabelled, empty hash": {pod: &corev1.Pod{}, hash: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := placement.IsPodUpdated(tc.pod, tc.hash); got != tc.want {
				t.Fatalf("IsPodUpdated() = %v, want %v", got, tc.want)
			}
			if got := placement.RevisionHash(tc.pod); got != tc.pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] {
				t.Fatalf("RevisionHash() = %q", got)
			}
		})
	}
}

func TestPodsIsPodActive(t *testing.T) {
	now := metav1.Now()
	tests := map[string]struct {
		pod  corev1.Pod
		want bool
	}{
		"pending":   {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, want: true},
		"running":   {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}, want: true},
		"no phase":  {want: true},
		"succeeded": {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}},
		"failed":    {pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}},
		"terminating": {pod: corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := placement.IsPodActive(&tc.pod); got != tc.want {
				t.Fatalf("IsPodActive() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPodsReadyAndAvailable(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	readySince := func(status corev1.ConditionStatus, ago time.Duration) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(now.Add(-ago))},
		}}}
	}
	readyNoTime := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}

	tests := map[string]struct {
		pod             *corev1.Pod
		minReadySeconds int32
		wantReady       bool
		wantAvailable   bool
		wantAt          time.Time
		wantNoWait      bool // AvailableAt reports not ok although the pod is Ready
	}{
		"no conditions": {pod: &corev1.Pod{}},
		"not ready":     {pod: readySince(corev1.ConditionFalse, time.Hour), minReadySeconds: 0},
		"ready status unknown": {
			pod: readySince(corev1.ConditionUnknown, time.Hour),
		},
		"ready, minReadySeconds 0: available at once": {
			pod: readySince(corev1.ConditionTrue, 0), wantReady: true, wantAvailable: true, wantAt: now,
		},
		"ready 5s, minReadySeconds 10: not yet": {
			pod: readySince(corev1.ConditionTrue, 5*time.Second), minReadySeconds: 10, wantReady: true,
			wantAt: now.Add(5 * time.Second),
		},
		"ready exactly minReadySeconds: not yet (upstream uses a strict Before)": {
			pod: readySince(corev1.ConditionTrue, 10*time.Second), minReadySeconds: 10, wantReady: true,
			wantAt: now,
		},
		"ready 11s, minReadySeconds 10: available": {
			pod: readySince(corev1.ConditionTrue, 11*time.Second), minReadySeconds: 10, wantReady: true, wantAvailable: true,
			wantAt: now.Add(-time.Second),
		},
		"ready without a transition time and minReadySeconds: never available, nothing to wait for": {
			pod: readyNoTime, minReadySeconds: 10, wantReady: true, wantNoWait: true,
		},
		"ready without a transition time, minReadySeconds 0": {
			pod: readyNoTime, wantReady: true, wantAvailable: true,
			wantAt: time.Time{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := placement.IsPodReady(tc.pod); got != tc.wantReady {
				t.Fatalf("IsPodReady() = %v, want %v", got, tc.wantReady)
			}
			if got := placement.IsPodAvailable(tc.pod, tc.minReadySeconds, now); got != tc.wantAvailable {
				t.Fatalf("IsPodAvailable() = %v, want %v", got, tc.wantAvailable)
			}
			at, ok := placement.AvailableAt(tc.pod, tc.minReadySeconds)
			if wantOk := tc.wantReady && !tc.wantNoWait; ok != wantOk {
				t.Fatalf("AvailableAt() ok = %v, want %v", ok, wantOk)
			}
			if ok && !at.Equal(tc.wantAt) {
				t.Fatalf("AvailableAt() = %v, want %v", at, tc.wantAt)
			}
		})
	}
}
