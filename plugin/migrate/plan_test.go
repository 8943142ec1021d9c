package migrate

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement/revision"
)

func appsSet() *appsv1.DaemonSet {
	labels := map[string]string{"name": "fluentd"}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: "fluentd", Namespace: "kube-system", UID: "u", ResourceVersion: "9", Generation: 3,
			Labels: map[string]string{"k8s-app": "fluentd-logging"},
			Annotations: map[string]string{
				appsv1.DeprecatedTemplateGeneration:                "3",
				"kubectl.kubernetes.io/last-applied-configuration": "{}",
				"team": "logs",
			},
		},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "fluentd", Image: "fluentd:v5.0.1"}}},
			},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0))},
			},
			RevisionHistoryLimit: ptr.To[int32](10),
			MinReadySeconds:      5,
		},
	}
}

// There and back keeps the spec and the hash, and the metadata the user
// wrote; what the API server or kubectl wrote for the old object goes.
func TestRoundTrip(t *testing.T) {
	old := appsSet()
	en := EverynodeFromApps(old)
	if en.Annotations[everynodev1alpha1.AnnotationAdoptUnmarkedPods] != "true" {
		t.Error("the everynode set does not ask to adopt the unmarked pods")
	}
	for _, k := range []string{appsv1.DeprecatedTemplateGeneration, "kubectl.kubernetes.io/last-applied-configuration"} {
		if _, ok := en.Annotations[k]; ok {
			t.Errorf("annotation %s carried over", k)
		}
	}
	if en.Annotations["team"] != "logs" || en.Labels["k8s-app"] != "fluentd-logging" || en.ResourceVersion != "" || en.UID != "" {
		t.Errorf("metadata %+v", en.ObjectMeta)
	}
	if err := SameHash(revision.Hash(&old.Spec.Template, nil, nil), en); err != nil {
		t.Error(err)
	}
	back, err := AppsFromEverynode(en)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := back.Annotations[everynodev1alpha1.AnnotationAdoptUnmarkedPods]; ok {
		t.Error("the adoption annotation went back to apps/v1")
	}
	want := old.Spec.DeepCopy()
	if got := back.Spec; got.MinReadySeconds != want.MinReadySeconds || *got.RevisionHistoryLimit != 10 ||
		got.UpdateStrategy.RollingUpdate.MaxUnavailable.IntValue() != 1 || got.Template.Spec.Containers[0].Image != "fluentd:v5.0.1" {
		t.Errorf("spec back %+v, want %+v", got, want)
	}
}

func TestAppsFromEverynodeRefusesWhatAppsLacks(t *testing.T) {
	en := EverynodeFromApps(appsSet())
	en.Spec.NodeReadinessGate = true
	en.Spec.UpdateStrategy.RollingUpdate.Paused = true
	_, err := AppsFromEverynode(en)
	if err == nil || !strings.Contains(err.Error(), "spec.nodeReadinessGate, rollingUpdate.paused") {
		t.Errorf("AppsFromEverynode = %v, want both fields named", err)
	}
}

func TestAtRest(t *testing.T) {
	for name, tc := range map[string]struct {
		st   appsv1.DaemonSetStatus
		want string
	}{
		"at rest":        {appsv1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 5, UpdatedNumberScheduled: 5}, ""},
		"status behind":  {appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 5, UpdatedNumberScheduled: 5}, "not its spec's 3"},
		"rolling update": {appsv1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 5, UpdatedNumberScheduled: 2}, "2 of 5"},
	} {
		t.Run(name, func(t *testing.T) {
			got := AtRest(3, tc.st)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("AtRest = %q, want %q", got, tc.want)
			}
		})
	}
}

// A template the API server would store differently (here: one more
// default) is a different hash, and the migration stops before it
// deletes anything.
func TestSameHashRefusesAChangedTemplate(t *testing.T) {
	old := appsSet()
	stored := EverynodeFromApps(old)
	stored.Spec.Template.Spec.DNSPolicy = corev1.DNSClusterFirst
	if err := SameHash(revision.Hash(&old.Spec.Template, nil, nil), stored); err == nil {
		t.Error("a changed template passed the hash check")
	}
	// And a collisionCount on the old set moves its hash.
	old.Status.CollisionCount = ptr.To[int32](1)
	if err := SameHash(revision.Hash(&old.Spec.Template, nil, old.Status.CollisionCount), EverynodeFromApps(old)); err == nil {
		t.Error("a collisionCount passed the hash check")
	}
}
