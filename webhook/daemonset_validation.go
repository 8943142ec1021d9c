package webhook

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// validateDaemonSet checks a set as upstream validates an apps/v1
// DaemonSet (ValidateDaemonSet, ValidateDaemonSetUpdate and
// ValidateDaemonSetSpec of k8s.io/kubernetes pkg/apis/apps/validation, with
// the same field paths and messages), plus everynode's own fields. old is
// nil on create. It returns the errors that refuse the set and warnings for
// specs that are legal but likely not what the user wants.
//
// It does not validate the pod template as a pod: the handler does that by
// a server-side dry run (validateTemplateAsPod), with validatePodTemplateStatic
// as the fallback. Object metadata is not checked either: the API server
// validates a custom resource's metadata before validating webhooks run.
func validateDaemonSet(ds, old *everynodev1alpha1.DaemonSet) (field.ErrorList, []string) {
	specPath := field.NewPath("spec")
	var errs field.ErrorList
	if old != nil {
		// Upstream puts the spec update checks first.
		errs = append(errs, apivalidation.ValidateImmutableField(ds.Spec.Selector, old.Spec.Selector, specPath.Child("selector"))...)
	}
	errs = append(errs, validateDaemonSetSpec(&ds.Spec, specPath)...)
	return errs, daemonSetWarnings(ds)
}

// validateDaemonSetSpec is upstream ValidateDaemonSetSpec without the pod
// template validation, plus the everynode fields.
func validateDaemonSetSpec(spec *everynodev1alpha1.DaemonSetSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	selPath := fldPath.Child("selector")
	if spec.Selector == nil {
		// apps/v1 marks the selector required in its schema (so does our
		// CRD); upstream's Go validation only reports the mismatch below.
		errs = append(errs, field.Required(selPath, ""))
	}
	errs = append(errs, metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, selPath)...)
	if selector, err := metav1.LabelSelectorAsSelector(spec.Selector); err == nil && spec.Selector != nil && !selector.Matches(labels.Set(spec.Template.Labels)) {
		errs = append(errs, field.Invalid(fldPath.Child("template", "metadata", "labels"), spec.Template.Labels, "`selector` does not match template `labels`"))
	}
	if spec.Selector != nil && len(spec.Selector.MatchLabels)+len(spec.Selector.MatchExpressions) == 0 {
		errs = append(errs, field.Invalid(selPath, spec.Selector, "empty selector is invalid for daemonset"))
	}
	errs = append(errs, validateTemplateForDaemonSet(&spec.Template, fldPath.Child("template"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(spec.MinReadySeconds), fldPath.Child("minReadySeconds"))...)
	errs = append(errs, validateUpdateStrategy(&spec.UpdateStrategy, fldPath.Child("updateStrategy"))...)
	if d := spec.ProgressDeadlineSeconds; d != nil {
		// As Deployments: a deadline no pod can meet would fail every
		// rollout.
		if *d <= 0 {
			errs = append(errs, field.Invalid(fldPath.Child("progressDeadlineSeconds"), *d, "must be greater than 0"))
		} else if *d <= spec.MinReadySeconds {
			errs = append(errs, field.Invalid(fldPath.Child("progressDeadlineSeconds"), *d, "must be greater than minReadySeconds"))
		}
	}
	if spec.RevisionHistoryLimit != nil {
		// zero is a valid RevisionHistoryLimit
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*spec.RevisionHistoryLimit), fldPath.Child("revisionHistoryLimit"))...)
	}
	errs = append(errs, validateNodeOverrides(spec, fldPath.Child("nodeOverrides"))...)
	errs = append(errs, placement.ValidateNodeSizing(spec.NodeSizing, &spec.Template, fldPath.Child("nodeSizing"))...)
	return errs
}

// validateTemplateForDaemonSet holds the template rules that are specific
// to a DaemonSet rather than to pods in general.
func validateTemplateForDaemonSet(tmpl *corev1.PodTemplateSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if tmpl.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(fldPath.Child("spec", "restartPolicy"), tmpl.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if tmpl.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in DaemonSet is not Supported"))
	}
	return errs
}

// validateUpdateStrategy is upstream ValidateDaemonSetUpdateStrategy.
func validateUpdateStrategy(strategy *everynodev1alpha1.DaemonSetUpdateStrategy, fldPath *field.Path) field.ErrorList {
	switch strategy.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
		return nil
	case appsv1.RollingUpdateDaemonSetStrategyType:
		if strategy.RollingUpdate == nil {
			return field.ErrorList{field.Required(fldPath.Child("rollingUpdate"), "")}
		}
		return validateRollingUpdate(strategy.RollingUpdate, fldPath.Child("rollingUpdate"))
	default:
		validValues := []string{string(appsv1.RollingUpdateDaemonSetStrategyType), string(appsv1.OnDeleteDaemonSetStrategyType)}
		return field.ErrorList{field.NotSupported(fldPath, strategy, validValues)}
	}
}

// validateRollingUpdate is upstream ValidateRollingUpdateDaemonSet plus
// partition and the canary node selector.
func validateRollingUpdate(ru *everynodev1alpha1.RollingUpdateDaemonSet, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	// Upstream dereferences both: the defaulting webhook always sets them.
	// A nil one here means it did not run; treat it as upstream's zero.
	maxUnavailable, maxSurge := intOrZero(ru.MaxUnavailable), intOrZero(ru.MaxSurge)

	// Validate both fields are positive ints or have a percentage value
	errs = append(errs, validatePositiveIntOrPercent(maxUnavailable, fldPath.Child("maxUnavailable"))...)
	errs = append(errs, validatePositiveIntOrPercent(maxSurge, fldPath.Child("maxSurge"))...)

	// Validate that MaxUnavailable and MaxSurge are not more than 100%.
	errs = append(errs, isNotMoreThan100Percent(maxUnavailable, fldPath.Child("maxUnavailable"))...)
	errs = append(errs, isNotMoreThan100Percent(maxSurge, fldPath.Child("maxSurge"))...)

	// Validate exactly one of MaxSurge or MaxUnavailable is non-zero
	hasUnavailable := getIntOrPercentValue(maxUnavailable) != 0
	hasSurge := getIntOrPercentValue(maxSurge) != 0
	switch {
	case hasUnavailable && hasSurge:
		errs = append(errs, field.Invalid(fldPath.Child("maxSurge"), ru.MaxSurge, "may not be set when maxUnavailable is non-zero"))
	case !hasUnavailable && !hasSurge:
		errs = append(errs, field.Required(fldPath.Child("maxUnavailable"), "cannot be 0 when maxSurge is 0"))
	}

	switch ru.PodUpdatePolicy {
	case "", everynodev1alpha1.PodUpdateRecreate:
	case everynodev1alpha1.PodUpdateInPlaceIfPossible:
		// An in-place update changes the pod on the node; there is no
		// second pod to surge with (as OpenKruise's Advanced DaemonSet).
		if hasSurge {
			errs = append(errs, field.Invalid(fldPath.Child("maxSurge"), ru.MaxSurge, "must be 0 when podUpdatePolicy is InPlaceIfPossible"))
		}
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("podUpdatePolicy"), ru.PodUpdatePolicy,
			[]everynodev1alpha1.PodUpdatePolicy{everynodev1alpha1.PodUpdateRecreate, everynodev1alpha1.PodUpdateInPlaceIfPossible}))
	}

	errs = append(errs, validateInPlaceGatePolicy(ru, fldPath)...)

	if ru.Partition != nil {
		errs = append(errs, validatePositiveIntOrPercent(*ru.Partition, fldPath.Child("partition"))...)
		errs = append(errs, isNotMoreThan100Percent(*ru.Partition, fldPath.Child("partition"))...)
	}
	errs = append(errs, metav1validation.ValidateLabelSelector(ru.NodeSelector, metav1validation.LabelSelectorValidationOptions{}, fldPath.Child("nodeSelector"))...)
	if ru.OnFailure != nil {
		errs = append(errs, validateOnFailure(ru.OnFailure, fldPath.Child("onFailure"))...)
	}
	return errs
}

// validateInPlaceGatePolicy checks inPlaceGatePolicy and that it agrees
// with the deprecated inPlaceReadinessGate when both are set: true is
// Always, false is Never. The message names the field to remove, the old
// one, as the CRD's rule words it.
func validateInPlaceGatePolicy(ru *everynodev1alpha1.RollingUpdateDaemonSet, fldPath *field.Path) field.ErrorList {
	p := fldPath.Child("inPlaceGatePolicy")
	switch ru.InPlaceGatePolicy {
	case "":
		return nil
	case everynodev1alpha1.InPlaceGateAlways, everynodev1alpha1.InPlaceGateNever, everynodev1alpha1.InPlaceGateIfServed:
	default:
		return field.ErrorList{field.NotSupported(p, ru.InPlaceGatePolicy,
			[]everynodev1alpha1.InPlaceGatePolicy{everynodev1alpha1.InPlaceGateAlways, everynodev1alpha1.InPlaceGateNever, everynodev1alpha1.InPlaceGateIfServed})}
	}
	if ru.InPlaceReadinessGate == nil {
		return nil
	}
	old := everynodev1alpha1.InPlaceGateNever
	if *ru.InPlaceReadinessGate {
		old = everynodev1alpha1.InPlaceGateAlways
	}
	if ru.InPlaceGatePolicy == old {
		return nil
	}
	return field.ErrorList{field.Invalid(p, ru.InPlaceGatePolicy,
		fmt.Sprintf("disagrees with the deprecated inPlaceReadinessGate: %t means %s; remove inPlaceReadinessGate", *ru.InPlaceReadinessGate, old))}
}

func validateOnFailure(f *everynodev1alpha1.RolloutFailurePolicy, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch f.Action {
	case "", everynodev1alpha1.RolloutFailurePause, everynodev1alpha1.RolloutFailureRollback:
	default:
		errs = append(errs, field.NotSupported(fldPath.Child("action"), f.Action,
			[]everynodev1alpha1.RolloutFailureAction{everynodev1alpha1.RolloutFailurePause, everynodev1alpha1.RolloutFailureRollback}))
	}
	if f.FailedPods != nil && *f.FailedPods < 1 {
		errs = append(errs, field.Invalid(fldPath.Child("failedPods"), *f.FailedPods, "must be at least 1"))
	}
	if f.MaxRestarts != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*f.MaxRestarts), fldPath.Child("maxRestarts"))...)
	}
	if f.RestartWindowSeconds != nil && *f.RestartWindowSeconds < 1 {
		errs = append(errs, field.Invalid(fldPath.Child("restartWindowSeconds"), *f.RestartWindowSeconds, "must be at least 1"))
	}
	return errs
}

func intOrZero(v *intstr.IntOrString) intstr.IntOrString {
	if v == nil {
		return intstr.FromInt32(0)
	}
	return *v
}

// validatePositiveIntOrPercent is upstream ValidatePositiveIntOrPercent.
func validatePositiveIntOrPercent(v intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch v.Type {
	case intstr.String:
		for _, msg := range utilvalidation.IsValidPercent(v.StrVal) {
			errs = append(errs, field.Invalid(fldPath, v, msg))
		}
	case intstr.Int:
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(v.IntValue()), fldPath)...)
	default:
		errs = append(errs, field.Invalid(fldPath, v, "must be an integer or percentage (e.g '5%%')"))
	}
	return errs
}

// getPercentValue is upstream getPercentValue.
func getPercentValue(v intstr.IntOrString) (int, bool) {
	if v.Type != intstr.String || len(utilvalidation.IsValidPercent(v.StrVal)) != 0 {
		return 0, false
	}
	value, _ := strconv.Atoi(v.StrVal[:len(v.StrVal)-1])
	return value, true
}

// getIntOrPercentValue is upstream getIntOrPercentValue.
func getIntOrPercentValue(v intstr.IntOrString) int {
	if value, isPercent := getPercentValue(v); isPercent {
		return value
	}
	return v.IntValue()
}

// isNotMoreThan100Percent is upstream IsNotMoreThan100Percent.
func isNotMoreThan100Percent(v intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	value, isPercent := getPercentValue(v)
	if !isPercent || value <= 100 {
		return nil
	}
	return field.ErrorList{field.Invalid(fldPath, v, "must not be greater than 100%")}
}

// validateNodeOverrides checks each override's selector and that its patch
// applies to the template and leaves a template the set can still own.
func validateNodeOverrides(spec *everynodev1alpha1.DaemonSetSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range spec.NodeOverrides {
		o := &spec.NodeOverrides[i]
		idxPath := fldPath.Index(i)
		selPath := idxPath.Child("nodeSelector")
		if o.NodeSelector == nil {
			errs = append(errs, field.Required(selPath, "selects the nodes the override applies to; use {} for every node"))
		} else {
			errs = append(errs, metav1validation.ValidateLabelSelector(o.NodeSelector, metav1validation.LabelSelectorValidationOptions{}, selPath)...)
		}
		_, patchErrs := overrideTemplate(spec, i, idxPath.Child("patch"))
		errs = append(errs, patchErrs...)
	}
	return errs
}

// overrideTemplate returns the set's template with override i applied, or
// the errors that make the override unusable: a patch that is not a JSON
// object of metadata.labels, metadata.annotations and spec, that does not
// apply as a strategic merge patch, that names unknown fields, or whose
// result the set could not own (labels no longer matching the selector, a
// restart policy other than Always, an active deadline).
func overrideTemplate(spec *everynodev1alpha1.DaemonSetSpec, i int, patchPath *field.Path) (*corev1.PodTemplateSpec, field.ErrorList) {
	raw := spec.NodeOverrides[i].Patch.Raw
	if len(raw) == 0 {
		return nil, field.ErrorList{field.Required(patchPath, "a strategic merge patch of the pod template, such as {\"spec\":{\"containers\":[{\"name\":\"agent\",\"image\":\"agent:arm64\"}]}}")}
	}
	if err := placement.CheckOverridePatch(raw); err != nil {
		return nil, field.ErrorList{field.Invalid(patchPath, field.OmitValueType{}, err.Error())}
	}
	patched, err := placement.ApplyOverride(&spec.Template, raw, true)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(patchPath, field.OmitValueType{}, err.Error())}
	}
	var errs field.ErrorList
	if selector, err := metav1.LabelSelectorAsSelector(spec.Selector); err == nil && spec.Selector != nil && !selector.Matches(labels.Set(patched.Labels)) {
		errs = append(errs, field.Invalid(patchPath, field.OmitValueType{},
			fmt.Sprintf("the patched template's labels %v no longer match `selector`: the set would not own its own pods", patched.Labels)))
	}
	// Which nodes run the set is decided from the template, by the
	// controller and the extender alike (placement.Eligibility); an
	// override applies only on a node already chosen. One that changed
	// what decides the choice would be ignored there or, worse, make a
	// pod its own node refuses, so it is refused here.
	if changed := placement.OverrideChanges(&spec.Template.Spec, &patched.Spec); len(changed) > 0 {
		errs = append(errs, field.Invalid(patchPath, field.OmitValueType{},
			fmt.Sprintf("may not change %s: they decide which nodes run the set, from the template, before any override applies; set them in the template", strings.Join(changed, ", "))))
	}
	for _, e := range validateTemplateForDaemonSet(patched, field.NewPath("spec", "template")) {
		errs = append(errs, field.Invalid(patchPath, field.OmitValueType{}, "the patched template is invalid: "+e.Error()))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return patched, nil
}

// validateDaemonSetStatusUpdate is upstream ValidateDaemonSetStatusUpdate
// without the metadata checks the API server already made, plus the
// everynode conditions.
func validateDaemonSetStatusUpdate(ds, old *everynodev1alpha1.DaemonSet) field.ErrorList {
	fldPath := field.NewPath("status")
	s := &ds.Status
	var errs field.ErrorList
	for _, f := range []struct {
		name  string
		value int64
	}{
		{"currentNumberScheduled", int64(s.CurrentNumberScheduled)},
		{"numberMisscheduled", int64(s.NumberMisscheduled)},
		{"desiredNumberScheduled", int64(s.DesiredNumberScheduled)},
		{"numberReady", int64(s.NumberReady)},
		{"observedGeneration", s.ObservedGeneration},
		{"updatedNumberScheduled", int64(s.UpdatedNumberScheduled)},
		{"numberAvailable", int64(s.NumberAvailable)},
		{"numberUnavailable", int64(s.NumberUnavailable)},
	} {
		errs = append(errs, apivalidation.ValidateNonnegativeField(f.value, fldPath.Child(f.name))...)
	}
	if s.CollisionCount != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*s.CollisionCount), fldPath.Child("collisionCount"))...)
	}
	if isDecremented(s.CollisionCount, old.Status.CollisionCount) {
		value := int32(0)
		if s.CollisionCount != nil {
			value = *s.CollisionCount
		}
		errs = append(errs, field.Invalid(fldPath.Child("collisionCount"), value, "cannot be decremented"))
	}
	errs = append(errs, metav1validation.ValidateConditions(s.Conditions, fldPath.Child("conditions"))...)
	return errs
}

// isDecremented is upstream apivalidation.IsDecremented: a nil new value
// after a non-nil old one counts as a decrement.
func isDecremented(update, old *int32) bool {
	if update == nil && old != nil {
		return true
	}
	if update == nil || old == nil {
		return false
	}
	return *update < *old
}
