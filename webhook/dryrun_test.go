package webhook

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// podInvalid is the error the API server returns for an invalid pod.
func podInvalid(errs ...*field.Error) error {
	return apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "", errs)
}

func TestJudgeDryRun(t *testing.T) {
	base := "spec.template"
	tests := map[string]struct {
		warnings     []string
		err          error
		wantErrs     []string // "Type field"
		wantText     string
		wantWarnings []string // prefixes
		wantOutcome  string
	}{
		"valid with upstream warnings": {
			warnings:     []string{`spec.containers[0].ports[1]: duplicate port definition with spec.containers[0].ports[0]`, `would violate PodSecurity "restricted:latest": runAsNonRoot != true`},
			wantWarnings: []string{"spec.template.spec.containers[0].ports[1]: duplicate port", `spec.template: would violate PodSecurity`},
			wantOutcome:  dryRunValid,
		},
		"invalid maps every cause": {
			err: podInvalid(
				field.Invalid(field.NewPath("spec", "containers").Index(0).Child("image"), " fluentd", "must not have leading or trailing whitespace"),
				field.Required(field.NewPath("spec", "containers").Index(0).Child("name"), ""),
				field.Invalid(field.NewPath("metadata", "labels"), "x", "bad"),
				field.Invalid(field.NewPath("metadata", "generateName"), "X-", "bad name"),
			),
			wantErrs: []string{"FieldValueInvalid spec.template.spec.containers[0].image", "FieldValueRequired spec.template.spec.containers[0].name",
				"FieldValueInvalid spec.template.metadata.labels", "FieldValueInvalid metadata.name"},
			wantText:    `spec.template.spec.containers[0].image: Invalid value: " fluentd": must not have leading or trailing whitespace`,
			wantOutcome: dryRunInvalid,
		},
		"invalid without causes": {
			err:         apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "", nil),
			wantErrs:    []string{"FieldValueInvalid spec.template"},
			wantOutcome: dryRunInvalid,
		},
		"invalid with a cause type field.Error cannot print": {
			err: &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 422, Reason: metav1.StatusReasonInvalid,
				Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "FieldValueOdd", Field: "spec.x", Message: "odd"}}}}},
			wantErrs:    []string{"FieldValueInvalid spec.template.spec.x"},
			wantText:    "odd",
			wantOutcome: dryRunInvalid,
		},
		"forbidden is a warning": {
			err:          apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New(`error looking up service account logging/fluentd: serviceaccount "fluentd" not found`)),
			wantWarnings: []string{"spec.template: the API server would currently refuse a pod made from this template"},
			wantOutcome:  dryRunRefused,
		},
		"generated name collision passes": {
			err:         apierrors.NewAlreadyExists(schema.GroupResource{Resource: "pods"}, "fluentd-abcde"),
			wantOutcome: dryRunValid,
		},
		"timeout is unavailable": {err: context.DeadlineExceeded, wantOutcome: dryRunUnavailable},
		"server error is unavailable": {
			err:         apierrors.NewInternalError(errors.New("etcd")),
			wantOutcome: dryRunUnavailable,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v, outcome := judgeDryRun(tc.warnings, tc.err, base)
			if outcome != tc.wantOutcome {
				t.Errorf("outcome = %s, want %s", outcome, tc.wantOutcome)
			}
			if (v.unavailable != nil) != (tc.wantOutcome == dryRunUnavailable) {
				t.Errorf("unavailable = %v", v.unavailable)
			}
			checkErrors(t, v.errs, tc.wantErrs, tc.wantText)
			if len(v.warnings) != len(tc.wantWarnings) {
				t.Fatalf("warnings = %q, want %d", v.warnings, len(tc.wantWarnings))
			}
			for i, w := range tc.wantWarnings {
				if !strings.HasPrefix(v.warnings[i], w) {
					t.Errorf("warning %d = %q, want prefix %q", i, v.warnings[i], w)
				}
			}
		})
	}
}

func TestPodForTemplate(t *testing.T) {
	ds := validSet(t)
	ds.Spec.Template.Labels[everynodev1alpha1.LabelDaemonPod] = everynodev1alpha1.LabelDaemonPodValue
	pod := podForTemplate(&ds.Spec.Template, "logging", ds.Name)
	if pod.GenerateName != "fluentd-elasticsearch-" || pod.Name != "" || pod.Namespace != "logging" {
		t.Errorf("pod meta = %+v", pod.ObjectMeta)
	}
	if _, ok := pod.Labels[everynodev1alpha1.LabelDaemonPod]; ok {
		t.Error("dry-run pod carries the daemon-pod label: our own pod webhooks would see it")
	}
	if _, ok := ds.Spec.Template.Labels[everynodev1alpha1.LabelDaemonPod]; !ok {
		t.Error("podForTemplate changed the set's template")
	}
	if pod.Labels["name"] != "fluentd-elasticsearch" || pod.Spec.Containers[0].Image != ds.Spec.Template.Spec.Containers[0].Image {
		t.Errorf("pod does not carry the template: %+v", pod)
	}
	if got := podForTemplate(&ds.Spec.Template, "logging", "").GenerateName; got != "everynode-validation-" {
		t.Errorf("generateName without a set name = %q", got)
	}
}

func TestClientDryRunnerAsksForDryRun(t *testing.T) {
	client := fake.NewClientset()
	var got clienttesting.CreateActionImpl
	client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		got = action.(clienttesting.CreateActionImpl)
		return true, nil, podInvalid(field.Required(field.NewPath("spec", "containers"), ""))
	})
	pod := podForTemplate(&validSet(t).Spec.Template, "logging", "fluentd")
	_, err := NewPodDryRunner(client).DryRunCreate(context.Background(), pod)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("err = %v, want the reactor's Invalid", err)
	}
	if opts := got.GetCreateOptions(); len(opts.DryRun) != 1 || opts.DryRun[0] != metav1.DryRunAll {
		t.Errorf("create options = %+v, want dryRun [All]", opts)
	}
	if got.GetNamespace() != "logging" {
		t.Errorf("namespace = %q", got.GetNamespace())
	}
	if pods, _ := client.Tracker().List(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "logging"); pods != nil {
		if l, ok := pods.(*corev1.PodList); ok && len(l.Items) > 0 {
			t.Errorf("dry run stored %d pods", len(l.Items))
		}
	}
}

// TestDryRunConfigCollectsWarnings runs the real client against a fake API
// server that answers with a Warning header, as kube-apiserver does.
func TestDryRunConfigCollectsWarnings(t *testing.T) {
	var mu sync.Mutex
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		query = r.URL.RawQuery
		mu.Unlock()
		w.Header().Add("Warning", `299 - "spec.containers[0].ports[1]: duplicate port definition"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}}`))
	}))
	defer srv.Close()

	runner, err := NewPodDryRunnerForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	warnings, err := runner.DryRunCreate(context.Background(), podForTemplate(&validSet(t).Spec.Template, "logging", "fluentd"))
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || warnings[0] != "spec.containers[0].ports[1]: duplicate port definition" {
		t.Errorf("warnings = %q", warnings)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(query, "dryRun=All") {
		t.Errorf("query = %q, want dryRun=All", query)
	}
}

// fakeDryRunner answers dry runs with fn and records the pods it saw.
type fakeDryRunner struct {
	mu   sync.Mutex
	pods []*corev1.Pod
	fn   func(ctx context.Context, pod *corev1.Pod) ([]string, error)
}

func (f *fakeDryRunner) DryRunCreate(ctx context.Context, pod *corev1.Pod) ([]string, error) {
	f.mu.Lock()
	f.pods = append(f.pods, pod)
	f.mu.Unlock()
	if f.fn == nil {
		return nil, nil
	}
	return f.fn(ctx, pod)
}

func (f *fakeDryRunner) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pods)
}

func TestDaemonSetValidatorDryRun(t *testing.T) {
	armOverride := override(`{"kubernetes.io/arch":"arm64"}`, `{"spec":{"containers":[{"name":"fluentd-elasticsearch","resources":{"limits":{"memory":"64Mi"}}}]}}`)
	tests := map[string]struct {
		change       func(ds *everynodev1alpha1.DaemonSet)
		fn           func(ctx context.Context, pod *corev1.Pod) ([]string, error)
		wantAllowed  bool
		wantCauses   []string // fields
		wantWarnings []string // substrings, in order
		wantCalls    int
	}{
		"valid": {wantAllowed: true, wantCalls: 1},
		"valid with API server warnings": {
			fn: func(context.Context, *corev1.Pod) ([]string, error) {
				return []string{"spec.volumes[0].gitRepo: deprecated in v1.11"}, nil
			},
			wantAllowed: true, wantCalls: 1,
			wantWarnings: []string{"spec.template.spec.volumes[0].gitRepo: deprecated in v1.11"},
		},
		"invalid as a pod": {
			fn: func(context.Context, *corev1.Pod) ([]string, error) {
				return nil, podInvalid(field.Invalid(field.NewPath("spec", "containers").Index(0).Child("image"), " x", "must not have leading or trailing whitespace"))
			},
			wantCauses: []string{"spec.template.spec.containers[0].image"}, wantCalls: 1,
		},
		"invalid both ways reports both": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.MinReadySeconds = -1 },
			fn: func(context.Context, *corev1.Pod) ([]string, error) {
				return nil, podInvalid(field.Required(field.NewPath("spec", "containers").Index(0).Child("image"), ""))
			},
			wantCauses: []string{"spec.minReadySeconds", "spec.template.spec.containers[0].image"}, wantCalls: 1,
		},
		"refused pod is a warning": {
			fn: func(context.Context, *corev1.Pod) ([]string, error) {
				return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New(`violates PodSecurity "baseline:latest": hostPath volumes`))
			},
			wantAllowed: true, wantCalls: 1,
			wantWarnings: []string{"spec.template: the API server would currently refuse a pod made from this template"},
		},
		"API server down falls back to static checks, valid": {
			fn:          func(context.Context, *corev1.Pod) ([]string, error) { return nil, errors.New("connection refused") },
			wantAllowed: true, wantCalls: 1,
			wantWarnings: []string{"spec.template: could not validate the template as a pod on the API server (connection refused)"},
		},
		"API server down falls back to static checks, invalid": {
			change:     func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = "" },
			fn:         func(context.Context, *corev1.Pod) ([]string, error) { return nil, errors.New("connection refused") },
			wantCauses: []string{"spec.template.spec.containers[0].image"}, wantCalls: 1,
			wantWarnings: []string{"could not validate the template as a pod"},
		},
		"API server too slow": {
			fn: func(ctx context.Context, _ *corev1.Pod) ([]string, error) {
				if _, ok := ctx.Deadline(); !ok {
					return nil, errors.New("dry run without a deadline")
				}
				return nil, context.DeadlineExceeded
			},
			wantAllowed: true, wantCalls: 1,
			wantWarnings: []string{"the API server did not answer in time"},
		},
		"each override is dry-run too": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{armOverride, armOverride}
			},
			wantAllowed: true, wantCalls: 3,
		},
		"override invalid as a pod": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{armOverride}
			},
			fn: func(_ context.Context, pod *corev1.Pod) ([]string, error) {
				if pod.Spec.Containers[0].Resources.Limits.Memory().String() == "64Mi" {
					return nil, podInvalid(field.Invalid(field.NewPath("spec", "containers").Index(0).Child("resources", "requests"), "200Mi", "must be less than or equal to memory limit of 64Mi"))
				}
				return nil, nil
			},
			wantCauses: []string{"spec.nodeOverrides[0].patch.spec.containers[0].resources.requests"}, wantCalls: 2,
		},
		"template invalid: overrides not dry-run": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{armOverride}
			},
			fn: func(context.Context, *corev1.Pod) ([]string, error) {
				return nil, podInvalid(field.Required(field.NewPath("spec", "containers").Index(0).Child("image"), ""))
			},
			wantCauses: []string{"spec.template.spec.containers[0].image"}, wantCalls: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ds := validSet(t)
			if tc.change != nil {
				tc.change(ds)
			}
			runner := &fakeDryRunner{fn: tc.fn}
			h, err := NewDaemonSetValidator(nil, runner, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			code, review := serve(t, h, reviewBody(t, setRequest(t, admissionv1.Create, ds, nil)))
			if code != http.StatusOK {
				t.Fatalf("HTTP %d", code)
			}
			resp := review.Response
			if resp.Allowed != tc.wantAllowed {
				t.Fatalf("allowed = %v, want %v; result %+v", resp.Allowed, tc.wantAllowed, resp.Result)
			}
			if !tc.wantAllowed {
				if resp.Result.Code != http.StatusUnprocessableEntity || resp.Result.Reason != metav1.StatusReasonInvalid {
					t.Errorf("result = %d %s, want 422 Invalid", resp.Result.Code, resp.Result.Reason)
				}
				var fields []string
				for _, c := range resp.Result.Details.Causes {
					fields = append(fields, c.Field)
				}
				if strings.Join(fields, ",") != strings.Join(tc.wantCauses, ",") {
					t.Errorf("cause fields = %q, want %q; message %s", fields, tc.wantCauses, resp.Result.Message)
				}
			}
			if len(resp.Warnings) != len(tc.wantWarnings) {
				t.Fatalf("warnings = %q, want %d", resp.Warnings, len(tc.wantWarnings))
			}
			for i, w := range tc.wantWarnings {
				if !strings.Contains(resp.Warnings[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, resp.Warnings[i], w)
				}
			}
			if runner.calls() != tc.wantCalls {
				t.Errorf("dry runs = %d, want %d", runner.calls(), tc.wantCalls)
			}
			for _, pod := range runner.pods {
				if pod.Namespace != testNamespace || pod.Labels[everynodev1alpha1.LabelDaemonPod] != "" {
					t.Errorf("dry-run pod meta = %+v", pod.ObjectMeta)
				}
			}
		})
	}
}

func TestDaemonSetValidatorUpdateDryRunsOnlyChangedTemplates(t *testing.T) {
	tests := map[string]struct {
		change    func(ds *everynodev1alpha1.DaemonSet)
		wantCalls int
	}{
		"label change":    {change: func(ds *everynodev1alpha1.DaemonSet) { ds.Labels["team"] = "obs" }},
		"strategy change": {change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.UpdateStrategy.RollingUpdate.Paused = true }},
		"template change": {change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = "fluentd:v6" }, wantCalls: 1},
		"overrides changed": {change: func(ds *everynodev1alpha1.DaemonSet) {
			ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"a":"b"}`, `{"spec":{}}`)}
		}, wantCalls: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			old := validSet(t)
			ds := old.DeepCopy()
			tc.change(ds)
			runner := &fakeDryRunner{}
			h, err := NewDaemonSetValidator(nil, runner, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, review := serve(t, h, reviewBody(t, setRequest(t, admissionv1.Update, ds, old))); !review.Response.Allowed {
				t.Fatalf("refused: %+v", review.Response.Result)
			}
			if runner.calls() != tc.wantCalls {
				t.Errorf("dry runs = %d, want %d", runner.calls(), tc.wantCalls)
			}
		})
	}
}
