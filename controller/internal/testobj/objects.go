// Package testobj builds the nodes, sets and pods the controller's tests
// and its decision package's tests share: objects as the API server and
// the kubelet would leave them, with options for the states a test needs.
// Only tests import it.
package testobj

import (
	"fmt"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// T0 is the tests' now.
var T0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// Namespace is the namespace of every set Set makes.
const Namespace = "default"

// Node returns a Ready node.
func Node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, ResourceVersion: "1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		}},
	}
}

// Set returns a set of one container, agent:1, selecting app=name, with
// a rolling update of maxUnavailable 1.
func Set(name string) *everynodev1alpha1.DaemonSet {
	labels := map[string]string{"app": name}
	return &everynodev1alpha1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: Namespace, UID: types.UID("uid-set-" + name),
			Generation: 1, ResourceVersion: "1",
		},
		Spec: everynodev1alpha1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}},
				},
			},
			UpdateStrategy: everynodev1alpha1.DaemonSetUpdateStrategy{
				Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &everynodev1alpha1.RollingUpdateDaemonSet{
					MaxUnavailable: ptr.To(intstr.FromInt32(1)),
					MaxSurge:       ptr.To(intstr.FromInt32(0)),
				},
			},
			RevisionHistoryLimit: ptr.To[int32](10),
		},
	}
}

// PodOpt changes a pod made by Pod.
type PodOpt func(*corev1.Pod)

var podSeq atomic.Int64

// Pod returns a pod of ds on node made from revision hash, as the
// controller and the webhook would leave it once scheduled: bound, Running
// and Ready since T0 - 1h (so available whatever minReadySeconds).
func Pod(ds *everynodev1alpha1.DaemonSet, node, hash string, opts ...PodOpt) *corev1.Pod {
	pod := placement.NewPod(ds, node, hash)
	n := podSeq.Add(1)
	pod.Name = fmt.Sprintf("%s-%s-%d", ds.Name, node, n)
	pod.UID = types.UID(fmt.Sprintf("uid-pod-%d", n))
	pod.ResourceVersion = "1"
	pod.CreationTimestamp = metav1.NewTime(T0.Add(-2 * time.Hour))
	pod.Spec.NodeName = node
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.PodReady, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(T0.Add(-time.Hour)),
	}}
	for _, o := range opts {
		o(pod)
	}
	return pod
}

// NotReady makes the pod's Ready condition False.
func NotReady(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }

// ReadySince moves the Ready condition's transition to t.
func ReadySince(t time.Time) PodOpt {
	return func(p *corev1.Pod) { p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t) }
}

// CreatedAt sets the pod's creation time.
func CreatedAt(t time.Time) PodOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t) }
}

// Phase sets the pod's phase; any but Running also makes it not Ready.
func Phase(ph corev1.PodPhase) PodOpt {
	return func(p *corev1.Pod) {
		p.Status.Phase = ph
		if ph != corev1.PodRunning {
			p.Status.Conditions[0].Status = corev1.ConditionFalse
		}
	}
}

// Unbound leaves the pod unscheduled.
func Unbound(p *corev1.Pod) { p.Spec.NodeName = "" }

// CrashLooping makes the pod not Ready, its container waiting in
// CrashLoopBackOff.
func CrashLooping(p *corev1.Pod) {
	NotReady(p)
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent", State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"},
	}}}
}

// WithRestarts sets the first container's restart count.
func WithRestarts(n int32) PodOpt {
	return func(p *corev1.Pod) {
		if len(p.Status.ContainerStatuses) == 0 {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent"}}
		}
		p.Status.ContainerStatuses[0].RestartCount = n
	}
}

// UpdatedInPlace records an in-place update of the pod's own revision at
// at, which left it with restarts, and whose container has not restarted
// yet (same imageID): the pod is not available.
func UpdatedInPlace(at time.Time, restarts int32) PodOpt {
	return func(p *corev1.Pod) {
		if len(p.Status.ContainerStatuses) == 0 {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent"}}
		}
		p.Status.ContainerStatuses[0].ImageID = "sha256:old"
		u := placement.InPlaceUpdate{Revision: placement.RevisionHash(p), Time: at, Restarts: restarts,
			Containers: []placement.InPlaceContainer{{Name: "agent", ImageID: "sha256:old"}}}
		p.Annotations[everynodev1alpha1.AnnotationInPlaceUpdate] = u.String()
	}
}

// FailingSet is a set that stops itself (action) when one updated pod
// restarts more than twice within 10 minutes, or is not available 10
// minutes after its creation.
func FailingSet(action everynodev1alpha1.RolloutFailureAction) *everynodev1alpha1.DaemonSet {
	ds := Set("agent")
	ds.Spec.UpdateStrategy.RollingUpdate.OnFailure = &everynodev1alpha1.RolloutFailurePolicy{
		Action: action, FailedPods: ptr.To[int32](1), MaxRestarts: ptr.To[int32](2), RestartWindowSeconds: ptr.To[int32](600),
	}
	return ds
}

// InPlaceSet is a set that updates in place, with the readiness gate or
// without.
func InPlaceSet(gate bool) *everynodev1alpha1.DaemonSet {
	ds := Set("agent")
	ds.Spec.UpdateStrategy.RollingUpdate.PodUpdatePolicy = everynodev1alpha1.PodUpdateInPlaceIfPossible
	ds.Spec.UpdateStrategy.RollingUpdate.InPlaceReadinessGate = ptr.To(gate)
	return ds
}

// ImagePullBackOff leaves the pod Pending, unscheduled, its container
// waiting in ImagePullBackOff.
func ImagePullBackOff(p *corev1.Pod) {
	Unbound(p)
	Phase(corev1.PodPending)(p)
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent", State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"},
	}}}
}
