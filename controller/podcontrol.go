package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// controllerKind is the kind in the owner references the controller writes.
var controllerKind = everynodev1alpha1.SchemeGroupVersion.WithKind("DaemonSet")

// PodControl creates and deletes daemon pods. It is a seam for tests and
// benchmarks (upstream's PodControlInterface); the real one talks to the API
// server and records events.
type PodControl interface {
	// CreatePod creates pod, which NewPod made for ds.
	CreatePod(ctx context.Context, ds *everynodev1alpha1.DaemonSet, pod *corev1.Pod) error
	// DeletePod deletes the pod namespace/name of ds if its UID is still uid.
	DeletePod(ctx context.Context, ds *everynodev1alpha1.DaemonSet, namespace, name string, uid types.UID) error
}

// NewPod returns the pod ds runs on node, from the revision with the given
// hash, as the contract with the pod webhook wants it (shared/DESIGN.md):
// generateName `<set>-`, the template's labels plus the revision hash and
// the daemon-pod label, the target node in an annotation, and the set as
// controlling owner. Like upstream's controller it also pins the pod to the
// node (required node affinity, never nodeName, so the default scheduler and
// the extender still see it) and adds the default daemon tolerations. The pod
// webhook does the same again, idempotently, and applies node overrides; the
// controller doing it too keeps sets correct where no webhook runs: the
// webhooks never match kube-system, yet the upstream docs' canonical
// DaemonSet lives there. ds is not modified.
func NewPod(ds *everynodev1alpha1.DaemonSet, node, hash string) *corev1.Pod {
	tmpl := ds.Spec.Template.DeepCopy()
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Name = ""
	pod.GenerateName = ds.Name + "-"
	pod.Namespace = ds.Namespace
	pod.ResourceVersion = ""
	pod.UID = ""
	pod.CreationTimestamp = metav1.Time{}
	pod.Finalizers = nil
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)}
	if pod.Labels == nil {
		pod.Labels = make(map[string]string, 2)
	}
	pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] = hash
	pod.Labels[everynodev1alpha1.LabelDaemonPod] = everynodev1alpha1.LabelDaemonPodValue
	if pod.Annotations == nil {
		pod.Annotations = make(map[string]string, 1)
	}
	pod.Annotations[everynodev1alpha1.AnnotationTargetNode] = node
	pod.Spec.Affinity = placement.PinToNode(pod.Spec.Affinity, node)
	pod.Spec.Tolerations = placement.WithDaemonTolerations(pod.Spec.Tolerations, pod.Spec.HostNetwork)
	return pod
}

// realPodControl is the PodControl that calls the API server.
type realPodControl struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
}

func (r realPodControl) CreatePod(ctx context.Context, ds *everynodev1alpha1.DaemonSet, pod *corev1.Pod) error {
	node := pod.Annotations[everynodev1alpha1.AnnotationTargetNode]
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
