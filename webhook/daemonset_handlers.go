package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	utiljson "sigs.k8s.io/json"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/webhook/admission"
)

// DefaultDryRunTimeout bounds all dry-run calls of one validation. It stays
// well inside the validating webhook's timeoutSeconds (15, see README.md) so
// that a slow API server leads to the static fallback, not to a webhook
// timeout.
const DefaultDryRunTimeout = 5 * time.Second

var daemonSetGK = everynodev1alpha1.Kind("DaemonSet")

// daemonSetDefaulter serves /mutate/daemonset.
type daemonSetDefaulter struct{}

func (daemonSetDefaulter) Handle(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed()
	}
	ds := &everynodev1alpha1.DaemonSet{}
	if err := decodeObject(req.Object.Raw, ds); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	original := ds.DeepCopy()
	defaultDaemonSet(ds)
	return admission.Patched(req.Object.Raw, original, ds)
}

// daemonSetValidator serves /validate/daemonset, for the set and for its
// status subresource.
type daemonSetValidator struct {
	sets          SetGetter    // may be nil: no overlap warnings
	dryRunner     PodDryRunner // may be nil: static template checks only
	dryRunTimeout time.Duration
}

func (v *daemonSetValidator) Handle(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed()
	}
	ds := &everynodev1alpha1.DaemonSet{}
	if err := decodeObject(req.Object.Raw, ds); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var old *everynodev1alpha1.DaemonSet
	if req.Operation == admissionv1.Update {
		old = &everynodev1alpha1.DaemonSet{}
		if err := decodeObject(req.OldObject.Raw, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("oldObject: %w", err))
		}
		if err := sameObject(ds, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	if req.SubResource == "status" {
		if old == nil {
			return admission.Allowed()
		}
		return admission.Invalid(daemonSetGK, ds.Name, validateDaemonSetStatusUpdate(ds, old))
	}
	if req.SubResource != "" {
		return admission.Allowed()
	}

	namespace := req.Namespace
	if namespace == "" {
		namespace = ds.Namespace
	}
	errs, warnings := validateDaemonSet(ds, old)
	// Like upstream's WarningsOnUpdate, look at the template (an API call)
	// only when it or the overrides changed: an unchanged template passed
	// when it was written, and a label edit must not fail on, say, a
	// PodSecurity level raised since.
	if old == nil || !equality.Semantic.DeepEqual(ds.Spec.Template, old.Spec.Template) ||
		!equality.Semantic.DeepEqual(ds.Spec.NodeOverrides, old.Spec.NodeOverrides) {
		tErrs, tWarnings := v.validateTemplateAsPod(ctx, ds, namespace)
		errs = append(errs, tErrs...)
		warnings = append(warnings, tWarnings...)
	}
	errs = append(errs, validateStartAfter(ds, old, namespace, v.sets)...)
	if v.sets != nil && namespace != "" {
		if others, err := v.sets.DaemonSets(namespace).List(labels.Everything()); err == nil {
			warnings = append(warnings, overlapWarnings(ds, others)...)
		}
	}
	return admission.Invalid(daemonSetGK, ds.Name, errs, warnings...)
}

// validateTemplateAsPod validates the set's template, and the template as
// each node override leaves it, as pods: by a dry-run create on the API
// server, the most faithful check there is (the API server's own, current
// validation, admission plugins included); or, when the API server cannot
// answer, by the static checks with a warning that says so. Our own outage
// never refuses a set.
func (v *daemonSetValidator) validateTemplateAsPod(ctx context.Context, ds *everynodev1alpha1.DaemonSet, namespace string) (field.ErrorList, []string) {
	templatePath := field.NewPath("spec", "template")
	if v.dryRunner == nil {
		return validatePodTemplateStatic(&ds.Spec.Template, templatePath), nil
	}
	ctx, cancel := context.WithTimeout(ctx, v.dryRunTimeout)
	defer cancel()

	verdict := v.dryRun(ctx, &ds.Spec.Template, namespace, ds.Name, templatePath.String())
	if verdict.unavailable != nil {
		klog.FromContext(ctx).Info("Cannot validate pod template by dry run; using static checks", "daemonset", klog.KObj(ds), "err", verdict.unavailable)
		return validatePodTemplateStatic(&ds.Spec.Template, templatePath), []string{unavailableWarning(templatePath.String(), verdict.unavailable)}
	}
	errs, warnings := verdict.errs, verdict.warnings
	if len(errs) > 0 {
		// Every override would repeat the template's errors.
		return errs, warnings
	}
	for i := range ds.Spec.NodeOverrides {
		patchPath := field.NewPath("spec", "nodeOverrides").Index(i).Child("patch")
		patched, patchErrs := overrideTemplate(&ds.Spec, i, patchPath)
		if len(patchErrs) > 0 {
			continue // validateDaemonSet reported them
		}
		ov := v.dryRun(ctx, patched, namespace, ds.Name, patchPath.String())
		if ov.unavailable != nil {
			errs = append(errs, validatePodTemplateStatic(patched, patchPath)...)
			warnings = append(warnings, unavailableWarning(patchPath.String(), ov.unavailable))
			continue
		}
		// Only the errors: the override's warnings repeat the template's.
		errs = append(errs, ov.errs...)
	}
	return errs, warnings
}

func (v *daemonSetValidator) dryRun(ctx context.Context, tmpl *corev1.PodTemplateSpec, namespace, setName, base string) dryRunVerdict {
	warnings, err := v.dryRunner.DryRunCreate(ctx, podForTemplate(tmpl, namespace, setName))
	verdict, outcome := judgeDryRun(warnings, err, base)
	dryRunsTotal.WithLabelValues(outcome).Inc()
	return verdict
}

func unavailableWarning(base string, err error) string {
	reason := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		reason = "the API server did not answer in time"
	}
	return fmt.Sprintf("%s: could not validate the template as a pod on the API server (%s); only basic checks were made, so pods may still be refused on creation", base, reason)
}

// sameObject checks that an update's object and oldObject are one object,
// as every review the API server sends has them: a review that pairs two
// sets did not come from it, and validating one against the other (the
// selector's immutability) would mean nothing.
func sameObject(ds, old *everynodev1alpha1.DaemonSet) error {
	if ds.Name != old.Name || ds.Namespace != old.Namespace || (ds.UID != "" && old.UID != "" && ds.UID != old.UID) {
		return fmt.Errorf("object and oldObject of the update are different objects (%s/%s uid %q, %s/%s uid %q)",
			ds.Namespace, ds.Name, ds.UID, old.Namespace, old.Name, old.UID)
	}
	return nil
}

// decodeObject decodes an admitted object as the API server does:
// case-sensitive field names, integers kept as integers.
func decodeObject(raw []byte, into any) error {
	if len(raw) == 0 {
		return errors.New("request has no object")
	}
	if err := utiljson.UnmarshalCaseSensitivePreserveInts(raw, into); err != nil {
		return fmt.Errorf("decode object: %w", err)
	}
	return nil
}
