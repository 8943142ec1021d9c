package webhook

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// PodDryRunner creates a pod on the API server with dryRun=All: the pod is
// defaulted, admitted and validated exactly as a real one, and never stored.
// It returns the API server's warnings (upstream's pod warnings, or a
// PodSecurity namespace's warn mode) and its error.
type PodDryRunner interface {
	DryRunCreate(ctx context.Context, pod *corev1.Pod) (warnings []string, err error)
}

// NewPodDryRunner returns a PodDryRunner that uses client. Warnings reach
// the caller only when client was built from a config that went through
// DryRunConfig; tests pass a fake clientset.
func NewPodDryRunner(client kubernetes.Interface) PodDryRunner {
	return &clientDryRunner{client: client}
}

// NewPodDryRunnerForConfig builds its own clientset from a copy of cfg made
// by DryRunConfig, so the API server's warnings come back to the webhook.
func NewPodDryRunnerForConfig(cfg *rest.Config) (PodDryRunner, error) {
	client, err := kubernetes.NewForConfig(DryRunConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("build dry-run client: %w", err)
	}
	return NewPodDryRunner(client), nil
}

// DryRunConfig returns a copy of cfg whose warning handler hands each
// warning to the dry-run call that caused it (through its context) instead
// of logging it.
func DryRunConfig(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.WarningHandler = nil
	out.WarningHandlerWithContext = warningCollector{}
	return out
}

type clientDryRunner struct {
	client kubernetes.Interface
}

func (d *clientDryRunner) DryRunCreate(ctx context.Context, pod *corev1.Pod) ([]string, error) {
	w := &warnings{}
	ctx = context.WithValue(ctx, warningsKey{}, w)
	_, err := d.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return w.get(), err
}

type warningsKey struct{}

type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) add(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, s)
}

func (w *warnings) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.list
}

// warningCollector is a rest.WarningHandlerWithContext that appends to the
// list in the request's context and drops warnings of other requests.
type warningCollector struct{}

func (warningCollector) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, message string) {
	if code != 299 || message == "" {
		return
	}
	if w, ok := ctx.Value(warningsKey{}).(*warnings); ok {
		w.add(message)
	}
}

// podForTemplate builds the pod a dry run validates: the template as the
// controller would use it, in the set's namespace, named like the set's
// pods. The daemon-pod label is left off so that everynode's own pod
// webhooks, which select on it, are not asked about a pod that is never
// made (and cannot deny it for lacking an owner).
func podForTemplate(tmpl *corev1.PodTemplateSpec, namespace, setName string) *corev1.Pod {
	prefix := "everynode-validation-"
	if setName != "" {
		prefix = setName + "-"
	}
	tmpl = tmpl.DeepCopy()
	delete(tmpl.Labels, everynodev1alpha1.LabelDaemonPod)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: prefix,
			Namespace:    namespace,
			Labels:       tmpl.Labels,
			Annotations:  tmpl.Annotations,
		},
		Spec: tmpl.Spec,
	}
}

// dryRunVerdict is what one dry run says about a template.
type dryRunVerdict struct {
	// errs are the API server's validation errors, on the set's paths.
	errs field.ErrorList
	// warnings are the API server's warnings and refusals that are not
	// about the template's validity, on the set's paths.
	warnings []string
	// unavailable is set when the API server could not answer; the caller
	// falls back to the static checks.
	unavailable error
}

// dryRunOutcome labels for the dry-run metric.
const (
	dryRunValid       = "valid"
	dryRunInvalid     = "invalid"
	dryRunRefused     = "refused"
	dryRunUnavailable = "unavailable"
)

// judgeDryRun turns a dry run's result into a verdict. Only an Invalid
// (422) answer refuses the set: that is the pod validation we are after.
// A Forbidden answer (PodSecurity enforce, a missing service account or
// priority class, quota) is about the namespace today, not the template,
// and an apps/v1 DaemonSet is accepted in that case too, so it becomes a
// warning. Anything else means the API server could not tell us.
func judgeDryRun(warnings []string, err error, base string) (dryRunVerdict, string) {
	v := dryRunVerdict{warnings: rewriteWarnings(warnings, base)}
	switch {
	case err == nil:
		return v, dryRunValid
	case apierrors.IsInvalid(err):
		v.errs = mapCauses(err, base)
		return v, dryRunInvalid
	case apierrors.IsForbidden(err):
		v.warnings = append(v.warnings, fmt.Sprintf("%s: the API server would currently refuse a pod made from this template: %v", base, err))
		return v, dryRunRefused
	case apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err):
		// A generated-name collision; the template itself passed.
		return v, dryRunValid
	default:
		v.unavailable = err
		return v, dryRunUnavailable
	}
}

// mapCauses turns the causes of the API server's Invalid status for the
// pod into field errors on the set: spec.containers[0].image becomes
// spec.template.spec.containers[0].image. A cause's message is the error
// body (type, value, detail), so the error prints exactly as the API server
// printed it for the pod.
func mapCauses(err error, base string) field.ErrorList {
	status, ok := err.(apierrors.APIStatus)
	if !ok || status.Status().Details == nil || len(status.Status().Details.Causes) == 0 {
		return field.ErrorList{{Type: field.ErrorTypeInvalid, Field: base, BadValue: field.OmitValueType{}, Detail: err.Error()}}
	}
	causes := status.Status().Details.Causes
	errs := make(field.ErrorList, 0, len(causes))
	for _, c := range causes {
		errs = append(errs, causeToError(c, base))
	}
	return errs
}

// knownErrorTypes are the field.ErrorType values field.Error can print;
// String() panics on any other.
var knownErrorTypes = map[field.ErrorType]bool{
	field.ErrorTypeNotFound: true, field.ErrorTypeRequired: true, field.ErrorTypeDuplicate: true,
	field.ErrorTypeInvalid: true, field.ErrorTypeNotSupported: true, field.ErrorTypeForbidden: true,
	field.ErrorTypeTooLong: true, field.ErrorTypeTooMany: true, field.ErrorTypeInternal: true,
	field.ErrorTypeTypeInvalid: true, field.ErrorTypeTooShort: true, field.ErrorTypeTooFew: true,
}

func causeToError(c metav1.StatusCause, base string) *field.Error {
	typ := field.ErrorType(c.Type)
	detail := c.Message
	if knownErrorTypes[typ] {
		// The message starts with the type's text; keep the rest as the
		// detail so Error() does not repeat it.
		detail = strings.TrimPrefix(strings.TrimPrefix(detail, typ.String()), ": ")
	} else {
		typ = field.ErrorTypeInvalid
	}
	return &field.Error{Type: typ, Field: mapPodField(c.Field, base), BadValue: field.OmitValueType{}, Detail: detail}
}

// mapPodField maps a field path of the dry-run pod onto the set. The pod's
// name is generated from the set's, so a name error is the set's name.
func mapPodField(f, base string) string {
	switch {
	case f == "":
		return base
	case f == "metadata.name" || f == "metadata.generateName":
		return "metadata.name"
	case strings.HasPrefix(f, "spec.") || strings.HasPrefix(f, "metadata.") || f == "spec" || f == "metadata":
		return base + "." + f
	default:
		return base
	}
}

// rewriteWarnings puts the API server's pod warnings on the set's paths:
// upstream's start with the pod's field path ("spec.containers[0]...: ...").
func rewriteWarnings(in []string, base string) []string {
	if len(in) == 0 {
		return nil
	}
	out := make([]string, len(in))
	for i, w := range in {
		if strings.HasPrefix(w, "spec.") || strings.HasPrefix(w, "metadata.") {
			out[i] = base + "." + w
		} else {
			out[i] = base + ": " + w
		}
	}
	return out
}
