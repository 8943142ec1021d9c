package webhook

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
	"everynode.io/everynode/webhook/admission"
)

// podMutator serves /mutate/pod.
type podMutator struct {
	nodes         NodeGetter
	sets          SetGetter
	schedulerName string
}

func (m *podMutator) Handle(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create {
		return admission.Allowed()
	}
	pod, err := podOfCreate(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if !placement.IsDaemonPod(pod) {
		// The objectSelector keeps other pods away; this guards a chart
		// that lost it.
		return admission.Allowed()
	}
	target, err := podTarget(pod)
	if err != nil {
		return admission.Forbidden(err.Error())
	}

	var set *everynodev1alpha1.DaemonSet
	if ref := placement.ControllerRef(pod); ref != nil {
		// A pod without an owner is still pinned and tolerated here;
		// /validate/pod then refuses it with the reason.
		set, err = m.sets.DaemonSets(pod.Namespace).Get(ref.Name)
		switch {
		case apierrors.IsNotFound(err):
			return admission.Forbidden(fmt.Sprintf("pod's owner, everynode DaemonSet %s/%s, is not known (deleted, or not yet in this webhook's cache; the controller retries)", pod.Namespace, ref.Name))
		case err != nil:
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("look up everynode DaemonSet %s/%s: %w", pod.Namespace, ref.Name, err))
		case ref.UID == "":
			return admission.Forbidden(noOwnerUID(pod.Namespace, ref.Name))
		case set.UID != ref.UID:
			// Checked here as well as in /validate/pod: the chart does not
			// send the controller's own pods to /validate/pod (one call less
			// per pod), so this is where a pod made for a set that was since
			// deleted and created again is refused.
			return admission.Forbidden(fmt.Sprintf("pod's owner reference names everynode DaemonSet %s/%s with uid %s, but that set now has uid %s: it was deleted and created again; the controller retries",
				pod.Namespace, ref.Name, ref.UID, set.UID))
		}
	}
	var node *corev1.Node
	if set != nil && len(set.Spec.NodeOverrides) > 0 {
		node, err = m.nodes.Get(target)
		switch {
		case apierrors.IsNotFound(err):
			return admission.Forbidden(fmt.Sprintf("target node %q is not known (deleted, or not yet in this webhook's cache), so the set's nodeOverrides cannot be matched; the controller retries", target))
		case err != nil:
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("look up node %s: %w", target, err))
		}
	}

	original := pod.DeepCopy()
	if err := mutatePod(pod, target, set, node, m.schedulerName); err != nil {
		return admission.Forbidden(err.Error())
	}
	return admission.Patched(req.Object.Raw, original, pod)
}

// podValidator serves /validate/pod.
type podValidator struct {
	controllerUsername string
	sets               SetGetter
}

func (v *podValidator) Handle(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	switch req.Operation {
	case admissionv1.Create:
		pod, err := podOfCreate(req)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		denial, err := validatePodCreate(pod, req.UserInfo.Username, v.controllerUsername, v.lookup)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		if denial != "" {
			return admission.Forbidden(denial)
		}
		return admission.Allowed()
	case admissionv1.Update:
		if req.SubResource != "" {
			return admission.Allowed()
		}
		pod, old := &corev1.Pod{}, &corev1.Pod{}
		if err := decodeObject(req.Object.Raw, pod); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		if err := decodeObject(req.OldObject.Raw, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("oldObject: %w", err))
		}
		if denial := validatePodUpdate(pod, old); denial != "" {
			return admission.Forbidden(denial)
		}
		return admission.Allowed()
	default:
		return admission.Allowed()
	}
}

// noOwnerUID is the denial of an owner reference without a uid, which the
// API server never sends (it refuses such a reference).
func noOwnerUID(namespace, name string) string {
	return fmt.Sprintf("pod's owner reference to everynode DaemonSet %s/%s has no uid; the API server refuses such a reference, so this review did not come from it", namespace, name)
}

// podOfCreate decodes the pod a create request admits, in the request's
// namespace. The API server always sends a pod of the request's namespace
// (or none yet); a review that says otherwise did not come from it, and
// believing the pod would look its owner up in another namespace, whose
// nodeOverrides the patch would then show the caller.
func podOfCreate(req *admissionv1.AdmissionRequest) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	if err := decodeObject(req.Object.Raw, pod); err != nil {
		return nil, err
	}
	switch {
	case pod.Namespace == "":
		pod.Namespace = req.Namespace
	case pod.Namespace != req.Namespace:
		return nil, fmt.Errorf("the pod's namespace %q is not the request's %q", pod.Namespace, req.Namespace)
	}
	return pod, nil
}

func (v *podValidator) lookup(namespace, name string) (*everynodev1alpha1.DaemonSet, error) {
	return v.sets.DaemonSets(namespace).Get(name)
}
