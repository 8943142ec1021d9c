package webhook

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// mutatePod makes a daemon pod what the set and its target node need, on
// pod in place:
//
//  1. the set's node overrides whose selector matches the node, in order
//     (set and node may be nil when the set has no overrides);
//  2. the daemon stamp (placement.Stamp): label, target annotation, the
//     pin to target and the default daemon tolerations;
//  3. schedulerName set to schedulerName, if given, unless the template
//     chose a scheduler of its own.
//
// Overrides come first so that none can undo the stamp. Every step is
// idempotent, so the API server may reinvoke the webhook
// (reinvocationPolicy: IfNeeded) after other webhooks changed the pod and
// get the same pod back.
func mutatePod(pod *corev1.Pod, target string, set *everynodev1alpha1.DaemonSet, node *corev1.Node, schedulerName string) error {
	if set != nil && len(set.Spec.NodeOverrides) > 0 {
		if node == nil {
			return fmt.Errorf("node %q is needed to apply the set's nodeOverrides", target)
		}
		if err := placement.ApplyNodeOverrides(pod, set.Spec.NodeOverrides, node); err != nil {
			return fmt.Errorf("apply node overrides of everynode DaemonSet %s/%s: %w", set.Namespace, set.Name, err)
		}
	}
	placement.Stamp(pod, target)
	placement.WithSchedulerName(pod, schedulerName)
	return nil
}

// podTarget returns the node a daemon pod is made for, from the annotation
// the controller sets, or why the pod cannot be admitted.
func podTarget(pod *corev1.Pod) (string, error) {
	target := pod.Annotations[everynodev1alpha1.AnnotationTargetNode]
	if target == "" {
		return "", fmt.Errorf("pod carries the label %s=%s but no %s annotation naming its node: only the everynode controller makes daemon pods, and it always names the node",
			everynodev1alpha1.LabelDaemonPod, everynodev1alpha1.LabelDaemonPodValue, everynodev1alpha1.AnnotationTargetNode)
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != target {
		return "", fmt.Errorf("pod is bound to node %q (spec.nodeName) but annotated for node %q (%s)",
			pod.Spec.NodeName, target, everynodev1alpha1.AnnotationTargetNode)
	}
	return target, nil
}
