package extender

import (
	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"everynode.io/everynode/placement"
)

// prioritize scores a daemon pod's target node MaxExtenderPriority and its
// other candidates zero. Any other pod gets an empty list: the scheduler
// adds nothing for nodes missing from it, so an empty answer is neutral and
// costs no work per node. (In practice kube-scheduler skips prioritizing
// when one node is feasible, which the pinning affinity makes the rule for
// daemon pods; the score is a tie-breaker for the rare other case.)
func prioritize(pod *corev1.Pod, names []string) extenderv1.HostPriorityList {
	if !placement.IsDaemonPod(pod) {
		return extenderv1.HostPriorityList{}
	}
	target, ok := placement.TargetNode(pod)
	list := make(extenderv1.HostPriorityList, len(names))
	for i, name := range names {
		list[i] = extenderv1.HostPriority{Host: name, Score: extenderv1.MinExtenderPriority}
		if ok && name == target {
			list[i].Score = extenderv1.MaxExtenderPriority
		}
	}
	return list
}
