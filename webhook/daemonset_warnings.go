package webhook

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// daemonSetWarnings returns warnings for specs that are legal but likely to
// surprise: kubectl prints them on apply ("Warning: ..."). Each starts with
// the field path it is about, as upstream's pod warnings do.
func daemonSetWarnings(ds *everynodev1alpha1.DaemonSet) []string {
	var warnings []string
	spec := &ds.Spec
	ruPath := field.NewPath("spec", "updateStrategy", "rollingUpdate")
	// Read through placement, as the controller reads it: defaults
	// applied, so an unset field warns of nothing.
	strategy := placement.UpdateStrategy(ds)

	if strategy.RollingUpdate() {
		if getIntOrPercentValue(strategy.MaxSurge) > 0 {
			if port, ok := firstHostPort(&spec.Template.Spec); ok {
				warnings = append(warnings, fmt.Sprintf("%s: the surge pod can never start while the old pod holds %s on the same node, so the update will stall; use maxUnavailable instead",
					ruPath.Child("maxSurge"), port))
			} else if spec.Template.Spec.HostNetwork {
				warnings = append(warnings, fmt.Sprintf("%s: with hostNetwork the surge pod shares the node's network with the old pod; if both listen on the same port the update will stall; consider maxUnavailable instead",
					ruPath.Child("maxSurge")))
			}
		}
		if v, isPercent := getPercentValue(strategy.MaxUnavailable); isPercent && v == 100 {
			warnings = append(warnings, fmt.Sprintf("%s: 100%% lets an update take the daemon down on every node at once", ruPath.Child("maxUnavailable")))
		}
		if strategy.Partition != nil {
			if v, isPercent := getPercentValue(*strategy.Partition); isPercent && v == 100 {
				warnings = append(warnings, fmt.Sprintf("%s: 100%% keeps every node on its current revision, so no pod will be updated", ruPath.Child("partition")))
			}
		}
		if sel := strategy.NodeSelector; sel != nil && len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
			warnings = append(warnings, fmt.Sprintf("%s: an empty selector matches every node, so it limits nothing", ruPath.Child("nodeSelector")))
		}
	}
	if ru := spec.UpdateStrategy.RollingUpdate; ru != nil && ru.InPlaceReadinessGate != nil {
		policy := everynodev1alpha1.InPlaceGateNever
		if *ru.InPlaceReadinessGate {
			policy = everynodev1alpha1.InPlaceGateAlways
		}
		warnings = append(warnings, fmt.Sprintf("%s: deprecated; use inPlaceGatePolicy: %s", ruPath.Child("inPlaceReadinessGate"), policy))
	}
	// maxUnavailable and maxSurge are left out: a set switched from
	// RollingUpdate keeps their defaults, as an apps/v1 DaemonSet does.
	if strategy.Type == appsv1.OnDeleteDaemonSetStrategyType && (strategy.Partition != nil || strategy.NodeSelector != nil || strategy.Paused) {
		warnings = append(warnings, fmt.Sprintf("%s: partition, nodeSelector and paused are ignored when type is OnDelete: pods are replaced only when you delete them", ruPath))
	}
	if spec.RevisionHistoryLimit != nil && *spec.RevisionHistoryLimit == 0 {
		warnings = append(warnings, fmt.Sprintf("%s: 0 keeps no old revision, so `kubectl everynode rollout undo` has nothing to return to", field.NewPath("spec", "revisionHistoryLimit")))
	}
	if spec.Template.Spec.NodeName != "" {
		warnings = append(warnings, fmt.Sprintf("%s: the set will run on node %q only; use nodeSelector or node affinity to choose nodes",
			field.NewPath("spec", "template", "spec", "nodeName"), spec.Template.Spec.NodeName))
	}
	if spec.NodeReadinessGate && placement.ReadinessGateMode() == placement.GateInactive {
		warnings = append(warnings, fmt.Sprintf("%s: %s", field.NewPath("spec", "nodeReadinessGate"), placement.GateInactiveMessage()))
	}
	if spec.NodeReadinessGate && !hasReadinessProbe(&spec.Template.Spec) {
		warnings = append(warnings, fmt.Sprintf("%s: no container has a readinessProbe, so the gate opens as soon as the containers start, not when the daemon is ready",
			field.NewPath("spec", "nodeReadinessGate")))
	}
	for i := range spec.NodeOverrides {
		sel := spec.NodeOverrides[i].NodeSelector
		if sel != nil && len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
			warnings = append(warnings, fmt.Sprintf("%s: an empty selector matches every node; change the template instead",
				field.NewPath("spec", "nodeOverrides").Index(i).Child("nodeSelector")))
		}
	}
	return warnings
}

// firstHostPort describes the first host port the template asks for.
func firstHostPort(spec *corev1.PodSpec) (string, bool) {
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range list {
			for _, p := range c.Ports {
				if p.HostPort != 0 {
					return fmt.Sprintf("hostPort %d/%s (container %q)", p.HostPort, p.Protocol, c.Name), true
				}
			}
		}
	}
	return "", false
}

func hasReadinessProbe(spec *corev1.PodSpec) bool {
	for i := range spec.Containers {
		if spec.Containers[i].ReadinessProbe != nil {
			return true
		}
	}
	return false
}

// overlapWarnings warns when another set in the namespace would claim the
// pods of ds or the other way round: upstream documents that overlapping
// DaemonSet selectors make controllers fight over pods, and cannot tell
// them apart either.
func overlapWarnings(ds *everynodev1alpha1.DaemonSet, others []*everynodev1alpha1.DaemonSet) []string {
	mine, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || ds.Spec.Selector == nil {
		return nil
	}
	var warnings []string
	for _, other := range others {
		if other.Name == ds.Name || other.Spec.Selector == nil {
			continue
		}
		theirs, err := metav1.LabelSelectorAsSelector(other.Spec.Selector)
		if err != nil {
			continue
		}
		if theirs.Matches(labels.Set(ds.Spec.Template.Labels)) || mine.Matches(labels.Set(other.Spec.Template.Labels)) {
			warnings = append(warnings, fmt.Sprintf("%s: overlaps the selector of everynode DaemonSet %q; both sets would claim the same pods", field.NewPath("spec", "selector"), other.Name))
		}
	}
	return warnings
}
