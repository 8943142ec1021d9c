package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/intstr"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// crdPath is the generated CRD the chart installs.
const crdPath = "../charts/everynode/crds/everynode.io_daemonsets.yaml"

// apiServerSchema is what kube-apiserver builds from the CRD to admit a
// set: the structural schema (defaulting, pruning, CEL) and the OpenAPI
// validator.
type apiServerSchema struct {
	structural *structuralschema.Structural
	openAPI    apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

func loadCRD(t testing.TB) (*apiextensionsinternal.CustomResourceDefinition, *apiServerSchema) {
	t.Helper()
	data, err := os.ReadFile(crdPath)
	if err != nil {
		t.Fatal(err)
	}
	v1 := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, v1); err != nil {
		t.Fatal(err)
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(v1)
	crd := &apiextensionsinternal.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(v1, crd, nil); err != nil {
		t.Fatal(err)
	}
	validation, err := apiextensionsinternal.GetSchemaForVersion(crd, everynodev1alpha1.SchemeGroupVersion.Version)
	if err != nil {
		t.Fatal(err)
	}
	s, err := structuralschema.NewStructural(validation.OpenAPIV3Schema)
	if err != nil {
		t.Fatal(err)
	}
	openAPI, _, err := apiservervalidation.NewSchemaValidator(validation.OpenAPIV3Schema)
	if err != nil {
		t.Fatal(err)
	}
	return crd, &apiServerSchema{structural: s, openAPI: openAPI, cel: cel.NewValidator(s, true, celconfig.PerCallLimit)}
}

// admit does to obj what kube-apiserver does to a custom resource it
// stores: prune and default it (on decode), then validate it against the
// OpenAPI schema and the x-kubernetes-validations rules, with old as
// oldSelf on update. It returns the defaulted object and the errors.
// (Metadata validation is left out: the sets here have valid metadata.)
func (s *apiServerSchema) admit(t testing.TB, obj, old map[string]any) (map[string]any, field.ErrorList) {
	t.Helper()
	structuralpruning.Prune(obj, s.structural, true)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, s.structural)
	structuraldefaulting.Default(obj, s.structural)
	errs := apiservervalidation.ValidateCustomResource(nil, obj, s.openAPI)
	// As the API server's customResourceStrategy: a value the schema
	// refuses as NotSupported (enum), Required, TooLong, TooMany or of the
	// wrong type skips every CEL rule, with a cause that names no field.
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return obj, append(errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
		}
	}
	var oldObj any
	if old != nil {
		oldObj = old
	}
	celErrs, remaining := s.cel.Validate(context.Background(), nil, s.structural, obj, oldObj, celconfig.RuntimeCELCostBudget)
	if remaining < 0 {
		t.Fatalf("CEL ran out of the runtime cost budget: %v", celErrs)
	}
	return obj, append(errs, celErrs...)
}

// toMap turns a typed set into what a client sends: its JSON, with the
// zero values encoding/json writes (creationTimestamp: null, an all-zero
// status) that the API server prunes or accepts.
func toMap(t testing.TB, v any) map[string]any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	// As the API server decodes it: whole numbers as int64, not float64.
	m := map[string]any{}
	if err := utiljson.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func fromMap(t testing.TB, m map[string]any) *everynodev1alpha1.DaemonSet {
	t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	ds := &everynodev1alpha1.DaemonSet{}
	if err := json.Unmarshal(data, ds); err != nil {
		t.Fatal(err)
	}
	return ds
}

// TestCRDIsAcceptedByTheAPIServer runs the API server's own CRD create
// validation: structural schema, defaults that validate and survive
// pruning, CEL rules that compile and stay within the static cost limits
// (per rule and for the whole CRD). It logs each rule's estimated cost.
func TestCRDIsAcceptedByTheAPIServer(t *testing.T) {
	crd, s := loadCRD(t)
	if errs := apiextensionsvalidation.ValidateCustomResourceDefinition(context.Background(), crd); len(errs) > 0 {
		t.Fatalf("the API server would refuse the CRD:\n%v", errs.ToAggregate())
	}

	// The per-rule estimates, as the validation above computes them. None of
	// the rules sits under a list or map, so each runs at most once per
	// object and its estimate is its cost.
	var total uint64
	rules := 0
	var walk func(path string, node *structuralschema.Structural, root bool)
	walk = func(path string, node *structuralschema.Structural, root bool) {
		if node.XValidations != nil {
			results, err := cel.Compile(node, model.SchemaDeclType(node, root), celconfig.PerCallLimit,
				environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()), cel.NewExpressionsEnvLoader())
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			for i, r := range results {
				if r.Error != nil {
					t.Fatalf("%s rule %d: %v", path, i, r.Error)
				}
				cost := r.MaxCost + r.MessageExpressionMaxCost
				total += cost
				rules++
				if cost > apiextensionsvalidation.StaticEstimatedCostLimit {
					t.Errorf("%s rule %d: estimated cost %d above the limit %d", path, i, cost, apiextensionsvalidation.StaticEstimatedCostLimit)
				}
				t.Logf("%-55s cost %8d  %s", path, cost, trim(node.XValidations[i].Rule, 70))
			}
		}
		if node.Items != nil {
			walk(path+"[*]", node.Items, false)
		}
		if node.AdditionalProperties != nil && node.AdditionalProperties.Structural != nil {
			walk(path+"{*}", node.AdditionalProperties.Structural, false)
		}
		for name, p := range node.Properties {
			walk(path+"."+name, &p, false)
		}
	}
	walk("", s.structural, true)
	t.Logf("%d rules, estimated total %d (limit %d per rule, %d per CRD)", rules, total,
		apiextensionsvalidation.StaticEstimatedCostLimit, apiextensionsvalidation.StaticEstimatedCRDCostLimit)
	if rules == 0 {
		t.Error("the CRD has no x-kubernetes-validations rules")
	}
}

func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// TestCRDDefaultsMatchTheWebhook: a set the API server stores without the
// webhook (kube-system) holds the same values as one the webhook
// defaulted, except where the default depends on another field, which no
// schema can express; those are listed in skipConditional.
func TestCRDDefaultsMatchTheWebhook(t *testing.T) {
	_, s := loadCRD(t)
	data, err := os.ReadFile("../examples/fluentd-elasticsearch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fluentd := &everynodev1alpha1.DaemonSet{}
	if err := yaml.UnmarshalStrict(data, fluentd); err != nil {
		t.Fatal(err)
	}

	// every field the schema defaults, set to nothing: the webhook and the
	// schema must fill in the same values.
	everything := fluentd.DeepCopy()
	everything.Spec.UpdateStrategy.RollingUpdate = &everynodev1alpha1.RollingUpdateDaemonSet{OnFailure: &everynodev1alpha1.RolloutFailurePolicy{}}
	pod := &everything.Spec.Template.Spec
	probe := func() *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}}
	}
	grpc := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 81}}}
	c := corev1.Container{
		Name: "all", Image: "agent:v1",
		Ports: []corev1.ContainerPort{{ContainerPort: 80}},
		Env: []corev1.EnvVar{
			{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
			{Name: "FILE", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "v", Path: "p", Key: "k"}}},
		},
		LivenessProbe: probe(), ReadinessProbe: grpc, StartupProbe: probe(),
		Lifecycle: &corev1.Lifecycle{
			PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}},
			PreStop:   &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}},
		},
	}
	pod.Containers = append(pod.Containers, c)
	pod.InitContainers = []corev1.Container{c}
	pod.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon(c)}}
	fieldRef := func() *corev1.ObjectFieldSelector { return &corev1.ObjectFieldSelector{FieldPath: "metadata.name"} }
	for _, src := range []corev1.VolumeSource{
		{Secret: &corev1.SecretVolumeSource{SecretName: "s"}},
		{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}},
		{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{{Path: "n", FieldRef: fieldRef()}}}},
		{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "n", FieldRef: fieldRef()}}}},
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
		}}},
		{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "t", IQN: "i"}},
		{RBD: &corev1.RBDVolumeSource{CephMonitors: []string{"m"}, RBDImage: "i"}},
		{AzureDisk: &corev1.AzureDiskVolumeSource{DiskName: "d", DataDiskURI: "u"}},
		{ScaleIO: &corev1.ScaleIOVolumeSource{Gateway: "g", System: "s", SecretRef: &corev1.LocalObjectReference{Name: "s"}}},
		{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}}},
	} {
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: fmt.Sprintf("v%d", len(pod.Volumes)), VolumeSource: src})
	}

	// The example goes in as kubectl sends it, without the empty
	// updateStrategy a typed Go client would add (see
	// DaemonSetUpdateStrategy).
	fluentdMap := map[string]any{}
	if err := yaml.Unmarshal(data, &fluentdMap); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		ds   *everynodev1alpha1.DaemonSet
		sent map[string]any
	}{
		"fluentd example":       {fluentd, fluentdMap},
		"every defaulted field": {everything, toMap(t, everything)},
	} {
		t.Run(name, func(t *testing.T) {
			byWebhook := tc.ds.DeepCopy()
			defaultDaemonSet(byWebhook)
			stored, errs := s.admit(t, tc.sent, nil)
			if len(errs) > 0 {
				t.Fatalf("refused: %v", errs.ToAggregate())
			}
			byAPIServer := fromMap(t, stored)
			skipConditional(byWebhook)
			if !equality.Semantic.DeepEqual(byWebhook.Spec, byAPIServer.Spec) {
				t.Errorf("spec (-webhook +API server):\n%s", diff.Diff(byWebhook.Spec, byAPIServer.Spec))
			}
			// The fluentd example must come out as apps/v1 stores it, which
			// the comparison above covers only as far as the webhook does.
			if name == "fluentd example" {
				want := everynodev1alpha1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
					RollingUpdate: &everynodev1alpha1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0))}}
				if !equality.Semantic.DeepEqual(byAPIServer.Spec.UpdateStrategy, want) || ptr.Deref(byAPIServer.Spec.RevisionHistoryLimit, -1) != 10 {
					t.Errorf("updateStrategy %+v revisionHistoryLimit %v", byAPIServer.Spec.UpdateStrategy, byAPIServer.Spec.RevisionHistoryLimit)
				}
			}
		})
	}
}

// skipConditional clears what the webhook defaults from another field's
// value, which no schema default can: imagePullPolicy (from the image's
// tag). The fixtures set no serviceAccount, no volume without a source,
// no image volume and no quantity that rounding changes.
func skipConditional(ds *everynodev1alpha1.DaemonSet) {
	spec := &ds.Spec.Template.Spec
	for i := range spec.Containers {
		spec.Containers[i].ImagePullPolicy = ""
	}
	for i := range spec.InitContainers {
		spec.InitContainers[i].ImagePullPolicy = ""
	}
	for i := range spec.EphemeralContainers {
		spec.EphemeralContainers[i].ImagePullPolicy = ""
	}
}

// cpuSizing sizes the cpu request of ds's first container with fraction.
func cpuSizing(ds *everynodev1alpha1.DaemonSet, fraction string) []everynodev1alpha1.ContainerSizing {
	return []everynodev1alpha1.ContainerSizing{{Name: ds.Spec.Template.Spec.Containers[0].Name, Resources: []everynodev1alpha1.ResourceSizing{
		{Resource: corev1.ResourceCPU, Requests: everynodev1alpha1.ResourceShare{Fraction: fraction}},
	}}}
}

// percentMessage is upstream's IsValidPercent error.
var percentMessage = utilvalidation.IsValidPercent("x")[0]

// TestCRDRulesMatchTheWebhook runs each invalid set through the API
// server's schema and CEL rules and through validateDaemonSet: both must
// refuse it with the same field paths and messages. The error types and
// printed values may differ where CEL cannot say the same (see
// apiServerType): CEL reports the schema type ("object") as the value.
func TestCRDRulesMatchTheWebhook(t *testing.T) {
	_, s := loadCRD(t)
	type fieldError struct{ field, detail string }
	tests := map[string]struct {
		change func(ds *everynodev1alpha1.DaemonSet)
		// old is changed for an update (transition rules); nil: create.
		old  func(ds *everynodev1alpha1.DaemonSet)
		want []string // "field: detail"
	}{
		"fluentd example is valid": {change: func(*everynodev1alpha1.DaemonSet) {}},
		"selector does not match template labels": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Labels = map[string]string{"name": "other"} },
			want:   []string{"spec.template.metadata.labels: `selector` does not match template `labels`"},
		},
		"template without labels": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Labels = nil },
			want:   []string{"spec.template.metadata.labels: `selector` does not match template `labels`"},
		},
		"matchExpressions that match": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Template.Labels["tier"] = "node"
				ds.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{
					{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"x", "node"}},
					{Key: "name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"other"}},
					{Key: "absent", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"x"}},
					{Key: "tier", Operator: metav1.LabelSelectorOpExists},
					{Key: "absent", Operator: metav1.LabelSelectorOpDoesNotExist},
				}
			},
		},
		"matchExpressions In that does not match": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "name", Operator: metav1.LabelSelectorOpIn, Values: []string{"other"}}}
			},
			want: []string{"spec.template.metadata.labels: `selector` does not match template `labels`"},
		},
		"matchExpressions In on an absent label": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"x"}}}
			},
			want: []string{"spec.template.metadata.labels: `selector` does not match template `labels`"},
		},
		"matchExpressions NotIn that does not match": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"fluentd-elasticsearch"}}}
			},
			want: []string{"spec.template.metadata.labels: `selector` does not match template `labels`"},
		},
		"matchExpressions Exists that does not match": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}
			},
			want: []string{"spec.template.metadata.labels: `selector` does not match template `labels`"},
		},
		"matchExpressions DoesNotExist that does not match": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "name", Operator: metav1.LabelSelectorOpDoesNotExist}}
			},
			want: []string{"spec.template.metadata.labels: `selector` does not match template `labels`"},
		},
		"empty selector": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Selector = &metav1.LabelSelector{} },
			want:   []string{"spec.selector: empty selector is invalid for daemonset"},
		},
		"no selector": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Selector = nil },
			want:   []string{"spec.selector: "},
		},
		"nodeSizing fraction 0": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.NodeSizing = cpuSizing(ds, "0") },
			want:   []string{`spec.nodeSizing[0].resources[0].requests.fraction: must be a decimal greater than 0 and at most 1, such as "0.05"`},
		},
		"nodeSizing fraction above 1": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.NodeSizing = cpuSizing(ds, "1.5") },
			want:   []string{`spec.nodeSizing[0].resources[0].requests.fraction: must be a decimal greater than 0 and at most 1, such as "0.05"`},
		},
		"nodeSizing fraction with a suffix": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.NodeSizing = cpuSizing(ds, "50m") },
			want:   []string{`spec.nodeSizing[0].resources[0].requests.fraction: must be a decimal greater than 0 and at most 1, such as "0.05"`},
		},
		"nodeSizing valid": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.NodeSizing = cpuSizing(ds, "0.05") },
		},
		"restartPolicy Never": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever },
			want:   []string{`spec.template.spec.restartPolicy: supported values: "Always"`},
		},
		"activeDeadlineSeconds": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](5) },
			want:   []string{"spec.template.spec.activeDeadlineSeconds: activeDeadlineSeconds in DaemonSet is not Supported"},
		},
		"selector changed": {
			old: func(*everynodev1alpha1.DaemonSet) {},
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Selector.MatchLabels["tier"] = "x"
				ds.Spec.Template.Labels["tier"] = "x"
			},
			want: []string{"spec.selector: field is immutable"},
		},
		"template changed, selector kept": {
			old:    func(*everynodev1alpha1.DaemonSet) {},
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Labels["tier"] = "x" },
		},
		"maxUnavailable and maxSurge both 0": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("0")
			},
			want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable: cannot be 0 when maxSurge is 0"},
		},
		"maxUnavailable and maxSurge both 0%": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("0%")
				ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = intOrStr("000%")
			},
			want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable: cannot be 0 when maxSurge is 0"},
		},
		"maxUnavailable and maxSurge both non-zero": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("10%")
				ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = intOrStr("1")
			},
			want: []string{"spec.updateStrategy.rollingUpdate.maxSurge: may not be set when maxUnavailable is non-zero"},
		},
		"in place with maxSurge": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.PodUpdatePolicy = everynodev1alpha1.PodUpdateInPlaceIfPossible
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("0")
				ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = intOrStr("10%")
			},
			want: []string{"spec.updateStrategy.rollingUpdate.maxSurge: must be 0 when podUpdatePolicy is InPlaceIfPossible"},
		},
		"in place with maxUnavailable": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.PodUpdatePolicy = everynodev1alpha1.PodUpdateInPlaceIfPossible
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("10%")
				ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = intOrStr("0%")
			},
		},
		"inPlaceGatePolicy IfServed": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				inPlaceGate(ds, everynodev1alpha1.InPlaceGateIfServed, nil)
			},
		},
		"inPlaceGatePolicy and inPlaceReadinessGate agree": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				inPlaceGate(ds, everynodev1alpha1.InPlaceGateNever, ptr.To(false))
			},
		},
		"inPlaceGatePolicy and inPlaceReadinessGate disagree": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				inPlaceGate(ds, everynodev1alpha1.InPlaceGateIfServed, ptr.To(true))
			},
			want: []string{"spec.updateStrategy.rollingUpdate.inPlaceGatePolicy: disagrees with the deprecated inPlaceReadinessGate: true means Always; remove inPlaceReadinessGate"},
		},
		"surge only": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("0")
				ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = intOrStr("100%")
			},
		},
		"negative maxUnavailable": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("-1")
			},
			want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable: must be greater than or equal to 0"},
		},
		"maxSurge not a percent": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("0")
				ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = intOrStr("5x")
			},
			want: []string{
				"spec.updateStrategy.rollingUpdate.maxSurge: " + percentMessage,
				"spec.updateStrategy.rollingUpdate.maxUnavailable: cannot be 0 when maxSurge is 0",
			},
		},
		"maxUnavailable above 100%": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("101%")
			},
			want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable: must not be greater than 100%"},
		},
		"partition above 100% and negative": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.Partition = intOrStr("0200%")
			},
			want: []string{"spec.updateStrategy.rollingUpdate.partition: must not be greater than 100%"},
		},
		"partition 100%": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.Partition = intOrStr("100%")
			},
		},
		"unknown strategy type": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.UpdateStrategy.Type = "Recreate" },
			want:   []string{`spec.updateStrategy: supported values: "RollingUpdate", "OnDelete"`},
		},
		"OnDelete": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy = everynodev1alpha1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
			},
		},
		"negative minReadySeconds and revisionHistoryLimit": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.MinReadySeconds = -1
				ds.Spec.RevisionHistoryLimit = ptr.To[int32](-1)
			},
			want: []string{"spec.minReadySeconds: must be greater than or equal to 0", "spec.revisionHistoryLimit: must be greater than or equal to 0"},
		},
		"progressDeadlineSeconds 0": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.ProgressDeadlineSeconds = ptr.To[int32](0) },
			want:   []string{"spec.progressDeadlineSeconds: must be greater than 0"},
		},
		"progressDeadlineSeconds not above minReadySeconds": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.MinReadySeconds = 30
				ds.Spec.ProgressDeadlineSeconds = ptr.To[int32](30)
			},
			want: []string{"spec.progressDeadlineSeconds: must be greater than minReadySeconds"},
		},
		"onFailure action": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.OnFailure = &everynodev1alpha1.RolloutFailurePolicy{Action: "Retry"}
			},
			want: []string{`spec.updateStrategy.rollingUpdate.onFailure.action: supported values: "Pause", "Rollback"`},
		},
		"onFailure bounds": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.OnFailure = &everynodev1alpha1.RolloutFailurePolicy{
					FailedPods: ptr.To[int32](0), MaxRestarts: ptr.To[int32](-1), RestartWindowSeconds: ptr.To[int32](0),
				}
			},
			want: []string{
				"spec.updateStrategy.rollingUpdate.onFailure.failedPods: must be at least 1",
				"spec.updateStrategy.rollingUpdate.onFailure.maxRestarts: must be greater than or equal to 0",
				"spec.updateStrategy.rollingUpdate.onFailure.restartWindowSeconds: must be at least 1",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ds := validSet(t)
			var old *everynodev1alpha1.DaemonSet
			if tc.old != nil {
				old = validSet(t)
				tc.old(old)
			}
			tc.change(ds)

			webhookErrs, _ := validateDaemonSet(ds, old)
			var oldMap map[string]any
			if old != nil {
				oldMap, _ = s.admit(t, toMap(t, old), nil)
			}
			_, apiErrs := s.admit(t, toMap(t, ds), oldMap)

			want := append([]string(nil), tc.want...)
			sort.Strings(want)
			// The cause that says CEL did not run (see admit) has no
			// counterpart in the webhook; the API server adds it where the
			// schema itself refuses a value (here: no selector, an unknown
			// onFailure action).
			var notChecked field.ErrorList
			for i := 0; i < len(apiErrs); i++ {
				if apiErrs[i].Field == "<nil>" {
					notChecked = append(notChecked, apiErrs[i])
					apiErrs = append(apiErrs[:i], apiErrs[i+1:]...)
					i--
				}
			}
			if len(notChecked) > 0 {
				t.Logf("the API server adds: %v", notChecked.ToAggregate())
			}
			for source, errs := range map[string]field.ErrorList{"webhook": webhookErrs, "API server": apiErrs} {
				got := make([]string, len(errs))
				for i, e := range errs {
					got[i] = e.Field + ": " + e.Detail
				}
				sort.Strings(got)
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("%s errors:\n got %q\nwant %q\nfull: %v", source, got, want, errs.ToAggregate())
				}
			}
			// Where path and message agree, the whole error must read the
			// same, except as apiServerWording says.
			for _, w := range webhookErrs {
				for _, a := range apiErrs {
					if w.Field != a.Field || w.Detail != a.Detail || w.Error() == a.Error() {
						continue
					}
					if want, ok := apiServerWording[w.Field+": "+w.Detail]; !ok || a.Error() != want {
						t.Errorf("the API server words it differently:\n webhook:    %s\n API server: %s", w.Error(), a.Error())
					}
				}
			}
		})
	}
}

// apiServerWording lists the errors the API server words differently from
// the webhook (by "field: detail"), with the API server's wording. A CEL
// rule on an object (spec, updateStrategy, rollingUpdate) reports no value
// where the webhook prints one (the object, or the value of the field the
// error names): "Invalid value: <detail>". CEL has no NotSupported reason:
// the strategy type and restartPolicy rules say "Invalid value" where the
// webhook says "Unsupported value" (for the strategy, of the whole
// strategy object).
var apiServerWording = map[string]string{
	"spec.selector: field is immutable":                                                                                                                       "spec.selector: Invalid value: field is immutable",
	"spec.selector: empty selector is invalid for daemonset":                                                                                                  "spec.selector: Invalid value: empty selector is invalid for daemonset",
	"spec.template.metadata.labels: `selector` does not match template `labels`":                                                                              "spec.template.metadata.labels: Invalid value: `selector` does not match template `labels`",
	"spec.progressDeadlineSeconds: must be greater than minReadySeconds":                                                                                      "spec.progressDeadlineSeconds: Invalid value: must be greater than minReadySeconds",
	"spec.updateStrategy.rollingUpdate.maxSurge: may not be set when maxUnavailable is non-zero":                                                              "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: may not be set when maxUnavailable is non-zero",
	"spec.updateStrategy.rollingUpdate.maxSurge: must be 0 when podUpdatePolicy is InPlaceIfPossible":                                                         `spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: must be 0 when podUpdatePolicy is InPlaceIfPossible`,
	`spec.updateStrategy: supported values: "RollingUpdate", "OnDelete"`:                                                                                      `spec.updateStrategy: Invalid value: supported values: "RollingUpdate", "OnDelete"`,
	"spec.updateStrategy.rollingUpdate.inPlaceGatePolicy: disagrees with the deprecated inPlaceReadinessGate: true means Always; remove inPlaceReadinessGate": "spec.updateStrategy.rollingUpdate.inPlaceGatePolicy: Invalid value: disagrees with the deprecated inPlaceReadinessGate: true means Always; remove inPlaceReadinessGate",
	`spec.template.spec.restartPolicy: supported values: "Always"`:                                                                                            `spec.template.spec.restartPolicy: Invalid value: "Never": supported values: "Always"`,
}
