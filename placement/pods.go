package placement

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// IsDaemonPod reports whether pod was made by the everynode controller. It
// is a label lookup, so the extender's path for every other pod stays cheap.
func IsDaemonPod(pod *corev1.Pod) bool {
	return pod.Labels[everynodev1alpha1.LabelDaemonPod] == everynodev1alpha1.LabelDaemonPodValue
}

// IsBuiltinDaemonPod reports whether pod is controlled by a built-in
// apps DaemonSet (kube-proxy, a CNI agent, ...): node plumbing other pods,
// everynode's daemons among them, may need before they can work.
func IsBuiltinDaemonPod(pod *corev1.Pod) bool {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != "DaemonSet" {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == appsv1.GroupName
}

// PinToNode returns affinity with its required node affinity replaced by the
// single term `matchFields metadata.name In [nodeName]`, as upstream's
// ReplaceDaemonSetPodNodeNameNodeAffinity: the default scheduler then binds
// the pod to that node and nowhere else, while preferred node terms and pod
// (anti-)affinity are kept. The template's nodeSelector stays on the pod and
// is still honoured by the scheduler. affinity is not modified.
func PinToNode(affinity *corev1.Affinity, nodeName string) *corev1.Affinity {
	out := affinity.DeepCopy()
	if out == nil {
		out = &corev1.Affinity{}
	}
	if out.NodeAffinity == nil {
		out.NodeAffinity = &corev1.NodeAffinity{}
	}
	out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{
				Key:      metav1.ObjectNameField,
				Operator: corev1.NodeSelectorOpIn,
				Values:   []string{nodeName},
			}},
		}},
	}
	return out
}

// TargetNode returns the node a daemon pod belongs to: the node it is bound
// to, else the node named in its target annotation, else the node of a
// pinning affinity term (upstream's GetTargetNodeName). ok is false when the
// pod names no node at all.
func TargetNode(pod *corev1.Pod) (node string, ok bool) {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName, true
	}
	if n := pod.Annotations[everynodev1alpha1.AnnotationTargetNode]; n != "" {
		return n, true
	}
	if n, ok := pinnedNode(pod.Spec.Affinity); ok {
		return n, true
	}
	return "", false
}

// pinnedNode finds the node of a `matchFields metadata.name In [node]` term.
func pinnedNode(affinity *corev1.Affinity) (string, bool) {
	if affinity == nil || affinity.NodeAffinity == nil || affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return "", false
	}
	for _, term := range affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, req := range term.MatchFields {
			if req.Key == metav1.ObjectNameField && req.Operator == corev1.NodeSelectorOpIn && len(req.Values) == 1 {
				return req.Values[0], true
			}
		}
	}
	return "", false
}

// RevisionHash returns the controller-revision-hash label of a pod.
func RevisionHash(pod *corev1.Pod) string {
	return pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
}

// IsPodUpdated reports whether pod was made from the revision with the given
// hash (upstream IsPodUpdated, without the deprecated template generation).
func IsPodUpdated(pod *corev1.Pod, hash string) bool {
	return IsRevisionUpdated(RevisionHash(pod), hash)
}

// IsRevisionUpdated reports whether a pod whose revision hash label is
// podHash (RevisionHash) was made from the revision with the given hash:
// upstream IsPodUpdated, without the deprecated template generation, on the
// label read once.
func IsRevisionUpdated(podHash, hash string) bool {
	return hash != "" && podHash == hash
}

// IsPodActive reports whether pod still counts as the node's daemon: it is
// neither being deleted nor finished.
func IsPodActive(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil &&
		pod.Status.Phase != corev1.PodSucceeded &&
		pod.Status.Phase != corev1.PodFailed
}

// ReadyCondition returns the pod's Ready condition, or nil. A controller
// that asks several questions of one pod reads it once and passes it to
// ConditionAvailable and ConditionAvailableAt.
func ReadyCondition(pod *corev1.Pod) *corev1.PodCondition {
	return podCondition(pod, corev1.PodReady)
}

// podCondition returns the pod's condition of type t, or nil.
func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// ConditionTrue reports whether the pod has a condition of type t with
// status True.
func ConditionTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	c := podCondition(pod, t)
	return c != nil && c.Status == corev1.ConditionTrue
}

// IsPodReady reports whether the pod's Ready condition is True.
func IsPodReady(pod *corev1.Pod) bool {
	return ConditionReady(ReadyCondition(pod))
}

// ConditionReady is IsPodReady for a pod whose Ready condition (nil if
// none) is ready.
func ConditionReady(ready *corev1.PodCondition) bool {
	return ready != nil && ready.Status == corev1.ConditionTrue
}

// IsPodAvailable reports whether pod has been Ready for at least
// minReadySeconds at now, as upstream podutil.IsPodAvailable.
func IsPodAvailable(pod *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	return ConditionAvailable(ReadyCondition(pod), minReadySeconds, now)
}

// ConditionAvailable is IsPodAvailable for a pod whose Ready condition
// (nil if none) is ready.
func ConditionAvailable(ready *corev1.PodCondition, minReadySeconds int32, now time.Time) bool {
	if !ConditionReady(ready) {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	minReady := time.Duration(minReadySeconds) * time.Second
	return !ready.LastTransitionTime.IsZero() && ready.LastTransitionTime.Add(minReady).Before(now)
}

// AvailableAt returns when a Ready pod becomes available given
// minReadySeconds, so a controller can requeue to notice it; ok is false if
// the pod is not Ready, or is Ready without a transition time while
// minReadySeconds > 0: IsPodAvailable never counts such a pod, so there is
// no time to wait for (returning the zero time plus minReadySeconds would
// make a controller requeue at once, forever).
func AvailableAt(pod *corev1.Pod, minReadySeconds int32) (at time.Time, ok bool) {
	return ConditionAvailableAt(ReadyCondition(pod), minReadySeconds)
}

// ConditionAvailableAt is AvailableAt for a pod whose Ready condition (nil
// if none) is ready.
func ConditionAvailableAt(ready *corev1.PodCondition, minReadySeconds int32) (at time.Time, ok bool) {
	if !ConditionReady(ready) {
		return time.Time{}, false
	}
	if minReadySeconds > 0 && ready.LastTransitionTime.IsZero() {
		return time.Time{}, false
	}
	return ready.LastTransitionTime.Add(time.Duration(minReadySeconds) * time.Second), true
}
