package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// PodControl creates and deletes daemon pods. It is a seam for tests and
// benchmarks (upstream's PodControlInterface); the real one talks to the API
// server and records events.
type PodControl interface {
	// CreatePod creates pod, which placement.NewPod made for ds.
	CreatePod(ctx context.Context, ds *everynodev1alpha1.DaemonSet, pod *corev1.Pod) error
	// DeletePod deletes the pod namespace/name of ds if its UID is still uid.
	DeletePod(ctx context.Context, ds *everynodev1alpha1.DaemonSet, namespace, name string, uid types.UID) error
	// UpdatePodInPlace applies patch (placement.InPlacePatch) to pod;
	// images names the changes for the event.
	UpdatePodInPlace(ctx context.Context, ds *everynodev1alpha1.DaemonSet, pod *corev1.Pod, patch []byte, images string) error
	// SetPodGate patches the status of pod with patch
	// (placement.InPlaceGatePatch), which sets its in-place gate condition
	// to status.
	SetPodGate(ctx context.Context, ds *everynodev1alpha1.DaemonSet, pod *corev1.Pod, status corev1.ConditionStatus, patch []byte) error
	// ResizePod applies patch (placement.ResizePatch) to pod through the
	// pods/resize subresource; what names the new size for the event.
	ResizePod(ctx context.Context, ds *everynodev1alpha1.DaemonSet, pod *corev1.Pod, patch []byte, what string) error
	// RemoveStartGate removes pod's start-after scheduling gate
	// (placement.StartGateRemovalPatch).
	RemoveStartGate(ctx context.Context, ds *everynodev1alpha1.DaemonSet, pod *corev1.Pod) error
}

// realPodControl is the PodControl that calls the API server.
type realPodControl struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
}

func (r realPodControl) CreatePod(ctx context.Context, ds *everynodev1alpha1.DaemonSet, pod *corev1.Pod) error {
	node, _ := placement.TargetNode(pod)
	created, err := r.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		podsCreated.WithLabelValues(resultLabel(err)).Inc()
		r.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating pod for node %s: %v", node, err)
		return fmt.Errorf("create pod for node %s: %w", node, err)
	}
	podsCreated.WithLabelValues(resultLabel(nil)).Inc()
	r.recorder.Eventf(ds, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Created pod: %s on node %s", created.Name, node)
	return nil
}

func (r realPodControl) DeletePod(ctx context.Context, ds *everynodev1alpha1.DaemonSet, namespace, name string, uid types.UID) error {
	opts := metav1.DeleteOptions{}
	if uid != "" {
		// A pod recreated under the same name is someone else's business.
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	if err := r.client.CoreV1().Pods(namespace).Delete(ctx, name, opts); err != nil {
		if apierrors.IsNotFound(err) {
			// Already gone: what we wanted, and no news for the user.
			return fmt.Errorf("delete pod %s/%s: %w", namespace, name, err)
		}
		podsDeleted.WithLabelValues(resultLabel(err)).Inc()
		r.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonFailedDelete, "Error deleting pod %s: %v", name, err)
		return fmt.Errorf("delete pod %s/%s: %w", namespace, name, err)
	}
	podsDeleted.WithLabelValues(resultLabel(nil)).Inc()
	r.recorder.Eventf(ds, corev1.EventTypeNormal, ReasonSuccessfulDelete, "Deleted pod: %s", name)
	return nil
}

func (r realPodControl) UpdatePodInPlace(ctx context.Context, ds *everynodev1alpha1.DaemonSet, pod *corev1.Pod, patch []byte, images string) error {
	_, err := r.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	podsUpdatedInPlace.WithLabelValues(resultLabel(err)).Inc()
	if err != nil {
		if !apierrors.IsNotFound(err) {
			r.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonFailedUpdateInPlace, "Error updating pod %s in place: %v", pod.Name, err)
		}
		return fmt.Errorf("update pod %s/%s in place: %w", pod.Namespace, pod.Name, err)
	}
	r.recorder.Eventf(ds, corev1.EventTypeNormal, ReasonSuccessfulUpdateInPlace, "Updated pod %s in place: %s", pod.Name, images)
	return nil
}

func (r realPodControl) SetPodGate(ctx context.Context, ds *everynodev1alpha1.DaemonSet, pod *corev1.Pod, status corev1.ConditionStatus, patch []byte) error {
	_, err := r.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	podGateWrites.WithLabelValues(string(status), resultLabel(err)).Inc()
	if err != nil {
		if !apierrors.IsNotFound(err) {
			r.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonFailedUpdateInPlace, "Error setting the in-place readiness gate of pod %s to %s: %v", pod.Name, status, err)
		}
		return fmt.Errorf("set the in-place gate of pod %s/%s to %s: %w", pod.Namespace, pod.Name, status, err)
	}
	return nil
}

func (r realPodControl) ResizePod(ctx context.Context, ds *everynodev1alpha1.DaemonSet, pod *corev1.Pod, patch []byte, what string) error {
	_, err := r.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize")
	podsResized.WithLabelValues(resultLabel(err)).Inc()
	if err != nil {
		if !apierrors.IsNotFound(err) {
			r.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonFailedResize, "Error resizing pod %s: %v", pod.Name, err)
		}
		return fmt.Errorf("resize pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	r.recorder.Eventf(ds, corev1.EventTypeNormal, ReasonSuccessfulResize, "Resized pod %s on node %s: %s", pod.Name, pod.Spec.NodeName, what)
	return nil
}

func (r realPodControl) RemoveStartGate(ctx context.Context, ds *everynodev1alpha1.DaemonSet, pod *corev1.Pod) error {
	_, err := r.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, placement.StartGateRemovalPatch(), metav1.PatchOptions{})
	startGatesRemoved.WithLabelValues(resultLabel(err)).Inc()
	if err != nil {
		if !apierrors.IsNotFound(err) {
			r.recorder.Eventf(ds, corev1.EventTypeWarning, ReasonFailedStartGate, "Error removing the start-after gate of pod %s: %v", pod.Name, err)
		}
		return fmt.Errorf("remove the start-after gate of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
