package webhook

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// setLookup finds an everynode DaemonSet; a NotFound error means it does
// not exist.
type setLookup func(namespace, name string) (*everynodev1alpha1.DaemonSet, error)

// validatePodCreate decides whether username may create pod. A pod that
// carries the daemon-pod label claims to be the daemon pod of a set on its
// node: the controller and the extender would count it as such, and the
// pod webhook would give it the daemon tolerations. So only the
// controller's identity may create one, and only with a controller owner
// reference to a set that exists. denial is empty when the pod is
// admitted; err is set when the set could not be looked up.
func validatePodCreate(pod *corev1.Pod, username, controllerUsername string, lookup setLookup) (denial string, err error) {
	if !placement.IsDaemonPod(pod) {
		return "", nil
	}
	label := everynodev1alpha1.LabelDaemonPod + "=" + everynodev1alpha1.LabelDaemonPodValue
	if username != controllerUsername {
		return fmt.Sprintf("pod carries the label %s, which marks the pods the everynode controller makes; only %q may create such pods, not %q. "+
			"Remove the label, and do not create pods that match an everynode DaemonSet's selector: the controller and the scheduler extender would take this pod for the set's pod on its node",
			label, controllerUsername, username), nil
	}
	ref := placement.ControllerRef(pod)
	if ref == nil {
		return fmt.Sprintf("pod carries the label %s but has no controller owner reference to an %s DaemonSet", label, everynodev1alpha1.SchemeGroupVersion), nil
	}
	set, err := lookup(pod.Namespace, ref.Name)
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("pod's owner, everynode DaemonSet %s/%s, does not exist (deleted, or not yet in this webhook's cache; the controller retries)", pod.Namespace, ref.Name), nil
	}
	if err != nil {
		return "", fmt.Errorf("look up everynode DaemonSet %s/%s: %w", pod.Namespace, ref.Name, err)
	}
	if ref.UID == "" {
		return noOwnerUID(pod.Namespace, ref.Name), nil
	}
	if set.UID != ref.UID {
		return fmt.Sprintf("pod's owner reference names everynode DaemonSet %s/%s with uid %s, but that set now has uid %s: it was deleted and created again",
			pod.Namespace, ref.Name, ref.UID, set.UID), nil
	}
	return "", nil
}

// validatePodUpdate admits every update except one that adds the
// daemon-pod label to a pod that lacked it: the controller only marks pods
// when it creates them, so anyone else doing it is the same impersonation
// validatePodCreate refuses.
func validatePodUpdate(pod, old *corev1.Pod) string {
	if placement.IsDaemonPod(pod) && !placement.IsDaemonPod(old) {
		return fmt.Sprintf("the label %s=%s cannot be added to an existing pod: only the everynode controller marks daemon pods, when it creates them",
			everynodev1alpha1.LabelDaemonPod, everynodev1alpha1.LabelDaemonPodValue)
	}
	return ""
}
