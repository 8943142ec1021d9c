package webhook

import (
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// errorStrings renders errors as "Type field: detail" sorted, for tables.
func errorStrings(errs field.ErrorList) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = string(e.Type) + " " + e.Field
	}
	sort.Strings(out)
	return out
}

// checkErrors compares errors by type and field, and that each error
// message contains the wanted text when one is given.
func checkErrors(t *testing.T, errs field.ErrorList, want []string, wantText string) {
	t.Helper()
	got := errorStrings(errs)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n got %q\nwant %q\nfull: %v", got, want, errs.ToAggregate())
	}
	if wantText != "" && (errs.ToAggregate() == nil || !strings.Contains(errs.ToAggregate().Error(), wantText)) {
		t.Errorf("errors %v do not contain %q", errs.ToAggregate(), wantText)
	}
}

func intOrStr(s string) *intstr.IntOrString {
	v := intstr.Parse(s)
	return &v
}

func TestValidateDaemonSet(t *testing.T) {
	const (
		invalid      = "FieldValueInvalid "
		required     = "FieldValueRequired "
		forbidden    = "FieldValueForbidden "
		notSupported = "FieldValueNotSupported "
	)
	tests := map[string]struct {
		change   func(ds *everynodev1alpha1.DaemonSet)
		want     []string
		wantText string
	}{
		"fluentd example is valid": {change: func(*everynodev1alpha1.DaemonSet) {}},
		"progressDeadlineSeconds must be positive": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.ProgressDeadlineSeconds = ptr.To[int32](0) },
			want:   []string{invalid + "spec.progressDeadlineSeconds"}, wantText: "must be greater than 0",
		},
		"progressDeadlineSeconds above minReadySeconds": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.MinReadySeconds = 30
				ds.Spec.ProgressDeadlineSeconds = ptr.To[int32](30)
			},
			want: []string{invalid + "spec.progressDeadlineSeconds"}, wantText: "must be greater than minReadySeconds",
		},
		"onFailure is valid": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.OnFailure = &everynodev1alpha1.RolloutFailurePolicy{
					Action: everynodev1alpha1.RolloutFailureRollback, FailedPods: ptr.To[int32](2), MaxRestarts: ptr.To[int32](0), RestartWindowSeconds: ptr.To[int32](60),
				}
			},
		},
		"onFailure bounds": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.OnFailure = &everynodev1alpha1.RolloutFailurePolicy{
					Action: "Retry", FailedPods: ptr.To[int32](0), MaxRestarts: ptr.To[int32](-1), RestartWindowSeconds: ptr.To[int32](0),
				}
			},
			want: []string{
				notSupported + "spec.updateStrategy.rollingUpdate.onFailure.action",
				invalid + "spec.updateStrategy.rollingUpdate.onFailure.failedPods",
				invalid + "spec.updateStrategy.rollingUpdate.onFailure.maxRestarts",
				invalid + "spec.updateStrategy.rollingUpdate.onFailure.restartWindowSeconds",
			},
		},
		"inPlaceGatePolicy IfServed": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				inPlaceGate(ds, everynodev1alpha1.InPlaceGateIfServed, nil)
			},
		},
		"inPlaceGatePolicy agrees with inPlaceReadinessGate true": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				inPlaceGate(ds, everynodev1alpha1.InPlaceGateAlways, ptr.To(true))
			},
		},
		"inPlaceGatePolicy agrees with inPlaceReadinessGate false": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				inPlaceGate(ds, everynodev1alpha1.InPlaceGateNever, ptr.To(false))
			},
		},
		"inPlaceReadinessGate alone": {
			change: func(ds *everynodev1alpha1.DaemonSet) { inPlaceGate(ds, "", ptr.To(false)) },
		},
		"inPlaceGatePolicy IfServed with inPlaceReadinessGate true": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				inPlaceGate(ds, everynodev1alpha1.InPlaceGateIfServed, ptr.To(true))
			},
			want:     []string{invalid + "spec.updateStrategy.rollingUpdate.inPlaceGatePolicy"},
			wantText: "disagrees with the deprecated inPlaceReadinessGate: true means Always; remove inPlaceReadinessGate",
		},
		"inPlaceGatePolicy Always with inPlaceReadinessGate false": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				inPlaceGate(ds, everynodev1alpha1.InPlaceGateAlways, ptr.To(false))
			},
			want:     []string{invalid + "spec.updateStrategy.rollingUpdate.inPlaceGatePolicy"},
			wantText: "false means Never",
		},
		"inPlaceGatePolicy unknown": {
			change: func(ds *everynodev1alpha1.DaemonSet) { inPlaceGate(ds, "Sometimes", ptr.To(true)) },
			want:   []string{notSupported + "spec.updateStrategy.rollingUpdate.inPlaceGatePolicy"},
		},
		"selector required": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Selector = nil },
			want:   []string{required + "spec.selector"},
		},
		"empty selector": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Selector = &metav1.LabelSelector{} },
			want:   []string{invalid + "spec.selector"}, wantText: "empty selector is invalid for daemonset",
		},
		"invalid selector": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "name", Operator: "Near"}}}
			},
			want: []string{invalid + "spec.selector.matchExpressions[0].operator"},
		},
		"invalid selector label value": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Selector.MatchLabels = map[string]string{"name": "not a value"}
				ds.Spec.Template.Labels = map[string]string{"name": "x"}
			},
			want: []string{invalid + "spec.selector.matchLabels"},
		},
		"selector does not match template labels": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Labels = map[string]string{"name": "other"} },
			want:   []string{invalid + "spec.template.metadata.labels"}, wantText: "`selector` does not match template `labels`",
		},
		"restartPolicy must be Always": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
			},
			want: []string{notSupported + "spec.template.spec.restartPolicy"}, wantText: `supported values: "Always"`,
		},
		"activeDeadlineSeconds forbidden": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) },
			want:   []string{forbidden + "spec.template.spec.activeDeadlineSeconds"}, wantText: "activeDeadlineSeconds in DaemonSet is not Supported",
		},
		"minReadySeconds negative": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.MinReadySeconds = -1 },
			want:   []string{invalid + "spec.minReadySeconds"}, wantText: "must be greater than or equal to 0",
		},
		"revisionHistoryLimit negative": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.RevisionHistoryLimit = ptr.To[int32](-1) },
			want:   []string{invalid + "spec.revisionHistoryLimit"},
		},
		"revisionHistoryLimit zero is valid": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.RevisionHistoryLimit = ptr.To[int32](0) },
		},
		"OnDelete is valid": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy = everynodev1alpha1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
			},
		},
		"unknown strategy type": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.UpdateStrategy.Type = "Sometimes" },
			want:   []string{notSupported + "spec.updateStrategy"}, wantText: `supported values: "RollingUpdate", "OnDelete"`,
		},
		"RollingUpdate without rollingUpdate": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.UpdateStrategy.RollingUpdate = nil },
			want:   []string{required + "spec.updateStrategy.rollingUpdate"},
		},
		"maxUnavailable percent is valid": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("10%")
			},
		},
		"maxSurge alone is valid": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("0")
				ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = intOrStr("25%")
			},
		},
		"maxUnavailable negative": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("-1")
			},
			// -1 is also "zero surge and no unavailable" for the exactly-one
			// rule, as upstream: it counts the raw value.
			want: []string{invalid + "spec.updateStrategy.rollingUpdate.maxUnavailable"},
		},
		"maxUnavailable not a percent": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("ten")
			},
			want: []string{invalid + "spec.updateStrategy.rollingUpdate.maxUnavailable",
				required + "spec.updateStrategy.rollingUpdate.maxUnavailable"},
			wantText: "a valid percent string must be",
		},
		"maxUnavailable over 100%": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("101%")
			},
			want:     []string{invalid + "spec.updateStrategy.rollingUpdate.maxUnavailable"},
			wantText: "must not be greater than 100%",
		},
		"maxSurge over 100%": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("0")
				ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = intOrStr("150%")
			},
			want: []string{invalid + "spec.updateStrategy.rollingUpdate.maxSurge"},
		},
		"both non-zero": {
			change:   func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = intOrStr("1") },
			want:     []string{invalid + "spec.updateStrategy.rollingUpdate.maxSurge"},
			wantText: "may not be set when maxUnavailable is non-zero",
		},
		"both zero": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("0%")
			},
			want: []string{required + "spec.updateStrategy.rollingUpdate.maxUnavailable"}, wantText: "cannot be 0 when maxSurge is 0",
		},
		"partition int and percent are valid": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.Partition = intOrStr("30%")
			},
		},
		"partition negative": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.UpdateStrategy.RollingUpdate.Partition = intOrStr("-2") },
			want:   []string{invalid + "spec.updateStrategy.rollingUpdate.partition"},
		},
		"partition over 100%": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.Partition = intOrStr("120%")
			},
			want: []string{invalid + "spec.updateStrategy.rollingUpdate.partition"},
		},
		"partition not a percent": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.Partition = intOrStr("half")
			},
			want: []string{invalid + "spec.updateStrategy.rollingUpdate.partition"},
		},
		"canary nodeSelector valid": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "canary"}}
			},
		},
		"canary nodeSelector invalid": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "pool", Operator: metav1.LabelSelectorOpIn}}}
			},
			want: []string{required + "spec.updateStrategy.rollingUpdate.nodeSelector.matchExpressions[0].values"},
		},
		"override valid": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"pool":"arm"}`,
					`{"metadata":{"annotations":{"a":"b"}},"spec":{"containers":[{"name":"fluentd-elasticsearch","image":"fluentd:arm64"}]}}`)}
			},
		},
		"override nodeSelector required": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{{Patch: runtime.RawExtension{Raw: []byte(`{"spec":{}}`)}}}
			},
			want: []string{required + "spec.nodeOverrides[0].nodeSelector"},
		},
		"override nodeSelector invalid": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				o := override(`{"pool":"arm"}`, `{"spec":{}}`)
				o.NodeSelector.MatchLabels["bad key!"] = "x"
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{o}
			},
			want: []string{invalid + "spec.nodeOverrides[0].nodeSelector.matchLabels"},
		},
		"override patch required": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"pool":"arm"}`, ``)}
			},
			want: []string{required + "spec.nodeOverrides[0].patch"},
		},
		"override patch not an object": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"pool":"arm"}`, `["spec"]`)}
			},
			want: []string{invalid + "spec.nodeOverrides[0].patch"}, wantText: "must be a JSON object",
		},
		"override patch touches the name": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"pool":"arm"}`, `{"metadata":{"name":"x"}}`)}
			},
			want: []string{invalid + "spec.nodeOverrides[0].patch"}, wantText: "not metadata.name",
		},
		"override patch outside metadata and spec": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"pool":"arm"}`, `{"status":{}}`)}
			},
			want: []string{invalid + "spec.nodeOverrides[0].patch"}, wantText: `not "status"`,
		},
		"override patch with a misspelt field": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"pool":"arm"}`,
					`{"spec":{"containers":[{"name":"fluentd-elasticsearch","resource":{"limits":{"memory":"1Gi"}}}]}}`)}
			},
			want: []string{invalid + "spec.nodeOverrides[0].patch"}, wantText: `unknown field "spec.containers[0].resource"`,
		},
		"override patch with a wrong type": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"pool":"arm"}`, `{"spec":{"containers":"agent"}}`)}
			},
			want: []string{invalid + "spec.nodeOverrides[0].patch"},
		},
		"override patch changes the tolerations": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"pool":"gpu"}`, `{"spec":{"tolerations":[{"key":"gpu","operator":"Exists"}]}}`)}
			},
			want: []string{invalid + "spec.nodeOverrides[0].patch"}, wantText: "may not change tolerations: they decide which nodes run the set",
		},
		"override patch changes nodeSelector and node affinity": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"pool":"gpu"}`,
					`{"spec":{"nodeSelector":{"gpu":"yes"},"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"a","operator":"Exists"}]}]}}}}}`)}
			},
			want: []string{invalid + "spec.nodeOverrides[0].patch"}, wantText: "may not change nodeSelector, affinity.nodeAffinity",
		},
		"override patch may change pod anti-affinity": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"pool":"gpu"}`,
					`{"spec":{"affinity":{"podAntiAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"podAffinityTerm":{"topologyKey":"zone"}}]}}}}`)}
			},
		},
		"override patch breaks the selector": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"pool":"arm"}`, `{"metadata":{"labels":{"name":"other"}}}`)}
			},
			want: []string{invalid + "spec.nodeOverrides[0].patch"}, wantText: "no longer match `selector`",
		},
		"override patch changes the restart policy": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{
					override(`{"pool":"x86"}`, `{"spec":{}}`),
					override(`{"pool":"arm"}`, `{"spec":{"restartPolicy":"Never"}}`),
				}
			},
			want: []string{invalid + "spec.nodeOverrides[1].patch"}, wantText: "spec.template.spec.restartPolicy: Unsupported value",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ds := validSet(t)
			tc.change(ds)
			errs, _ := validateDaemonSet(ds, nil)
			checkErrors(t, errs, tc.want, tc.wantText)
		})
	}
}

// inPlaceGate makes ds update in place with the given gate policy and
// deprecated gate field ("" and nil leave them unset).
func inPlaceGate(ds *everynodev1alpha1.DaemonSet, policy everynodev1alpha1.InPlaceGatePolicy, gate *bool) {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	ru.PodUpdatePolicy = everynodev1alpha1.PodUpdateInPlaceIfPossible
	ru.InPlaceGatePolicy, ru.InPlaceReadinessGate = policy, gate
}

func override(selector, patch string) everynodev1alpha1.NodeOverride {
	o := everynodev1alpha1.NodeOverride{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{}}}
	if selector != "" {
		if err := jsonUnmarshal([]byte(selector), &o.NodeSelector.MatchLabels); err != nil {
			panic(err)
		}
	}
	if patch != "" {
		o.Patch.Raw = []byte(patch)
	}
	return o
}

func TestValidateDaemonSetUpdate(t *testing.T) {
	tests := map[string]struct {
		change func(ds *everynodev1alpha1.DaemonSet)
		want   []string
	}{
		"template change is fine": {change: func(ds *everynodev1alpha1.DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].Image = "quay.io/fluentd_elasticsearch/fluentd:v5.0.2"
		}},
		"strategy change is fine": {change: func(ds *everynodev1alpha1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate.Paused = true
		}},
		"selector is immutable": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Selector.MatchLabels["tier"] = "logging"
				ds.Spec.Template.Labels["tier"] = "logging"
			},
			want: []string{"FieldValueInvalid spec.selector"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			old := validSet(t)
			ds := old.DeepCopy()
			tc.change(ds)
			errs, _ := validateDaemonSet(ds, old)
			checkErrors(t, errs, tc.want, "")
			if len(tc.want) > 0 && !strings.Contains(errs.ToAggregate().Error(), "field is immutable") {
				t.Errorf("want upstream's immutable message, got %v", errs.ToAggregate())
			}
		})
	}
}

func TestValidateDaemonSetStatusUpdate(t *testing.T) {
	tests := map[string]struct {
		old, new everynodev1alpha1.DaemonSetStatus
		want     []string
	}{
		"counts may go down": {
			old: everynodev1alpha1.DaemonSetStatus{DesiredNumberScheduled: 5, CollisionCount: ptr.To[int32](1)},
			new: everynodev1alpha1.DaemonSetStatus{DesiredNumberScheduled: 3, CollisionCount: ptr.To[int32](2)},
		},
		"collisionCount decremented": {
			old:  everynodev1alpha1.DaemonSetStatus{CollisionCount: ptr.To[int32](2)},
			new:  everynodev1alpha1.DaemonSetStatus{CollisionCount: ptr.To[int32](1)},
			want: []string{"FieldValueInvalid status.collisionCount"},
		},
		"collisionCount cleared": {
			old:  everynodev1alpha1.DaemonSetStatus{CollisionCount: ptr.To[int32](2)},
			want: []string{"FieldValueInvalid status.collisionCount"},
		},
		"negative counts": {
			new: everynodev1alpha1.DaemonSetStatus{CurrentNumberScheduled: -1, NumberMisscheduled: -1, DesiredNumberScheduled: -1, NumberReady: -1,
				ObservedGeneration: -1, UpdatedNumberScheduled: -1, NumberAvailable: -1, NumberUnavailable: -1, CollisionCount: ptr.To[int32](-1)},
			want: []string{"FieldValueInvalid status.currentNumberScheduled", "FieldValueInvalid status.numberMisscheduled",
				"FieldValueInvalid status.desiredNumberScheduled", "FieldValueInvalid status.numberReady",
				"FieldValueInvalid status.observedGeneration", "FieldValueInvalid status.updatedNumberScheduled",
				"FieldValueInvalid status.numberAvailable", "FieldValueInvalid status.numberUnavailable",
				"FieldValueInvalid status.collisionCount"},
		},
		"invalid condition": {
			new:  everynodev1alpha1.DaemonSetStatus{Conditions: []metav1.Condition{{Type: everynodev1alpha1.ConditionAvailable, Status: "Maybe", Reason: "R", LastTransitionTime: metav1.Now()}}},
			want: []string{"FieldValueNotSupported status.conditions[0].status"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			old, ds := validSet(t), validSet(t)
			old.Status, ds.Status = tc.old, tc.new
			checkErrors(t, validateDaemonSetStatusUpdate(ds, old), tc.want, "")
		})
	}
}

func TestDaemonSetWarnings(t *testing.T) {
	tests := map[string]struct {
		change func(ds *everynodev1alpha1.DaemonSet)
		// marker, if set, is everynode's --daemon-resource for the case.
		marker string
		want   []string // substrings, one per warning, in order
	}{
		"fluentd example has none":                 {change: func(*everynodev1alpha1.DaemonSet) {}},
		"fluentd example has none with the marker": {change: func(*everynodev1alpha1.DaemonSet) {}, marker: "everynode.io/daemon"},
		"readiness gate with the marker holds nothing": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeReadinessGate = true
				ds.Spec.Template.Spec.Containers[0].ReadinessProbe = &corev1.Probe{}
			},
			marker: "everynode.io/daemon",
			want:   []string{"spec.nodeReadinessGate: holds no pod back: everynode marks daemon pods with the resource everynode.io/daemon"},
		},
		"hostPort with maxSurge": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable, ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = intOrStr("0"), intOrStr("1")
				ds.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 24224, HostPort: 24224, Protocol: corev1.ProtocolTCP}}
			},
			want: []string{`spec.updateStrategy.rollingUpdate.maxSurge: the surge pod can never start while the old pod holds hostPort 24224/TCP (container "fluentd-elasticsearch")`},
		},
		"hostPort without maxSurge is fine": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 24224, HostPort: 24224}}
			},
		},
		"hostNetwork with maxSurge": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable, ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = intOrStr("0"), intOrStr("10%")
				ds.Spec.Template.Spec.HostNetwork = true
			},
			want: []string{"spec.updateStrategy.rollingUpdate.maxSurge: with hostNetwork"},
		},
		"maxUnavailable 100%": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = intOrStr("100%")
			},
			want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable: 100%"},
		},
		"inPlaceReadinessGate": {
			change: func(ds *everynodev1alpha1.DaemonSet) { inPlaceGate(ds, "", ptr.To(false)) },
			want:   []string{"spec.updateStrategy.rollingUpdate.inPlaceReadinessGate: deprecated; use inPlaceGatePolicy: Never"},
		},
		"inPlaceGatePolicy has none": {
			change: func(ds *everynodev1alpha1.DaemonSet) { inPlaceGate(ds, everynodev1alpha1.InPlaceGateIfServed, nil) },
		},
		"partition 100%": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.Partition = intOrStr("100%")
			},
			want: []string{"spec.updateStrategy.rollingUpdate.partition: 100% keeps every node"},
		},
		"empty canary selector": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.NodeSelector = &metav1.LabelSelector{}
			},
			want: []string{"spec.updateStrategy.rollingUpdate.nodeSelector: an empty selector matches every node"},
		},
		"OnDelete with everynode rolling fields": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType
				ds.Spec.UpdateStrategy.RollingUpdate.Paused = true
			},
			want: []string{"spec.updateStrategy.rollingUpdate: partition, nodeSelector and paused are ignored when type is OnDelete"},
		},
		"OnDelete keeping upstream's defaulted rollingUpdate is fine": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType
			},
		},
		"revisionHistoryLimit 0": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.RevisionHistoryLimit = ptr.To[int32](0) },
			want:   []string{"spec.revisionHistoryLimit: 0 keeps no old revision"},
		},
		"template nodeName": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.NodeName = "node-1" },
			want:   []string{`spec.template.spec.nodeName: the set will run on node "node-1" only`},
		},
		"readiness gate without probe": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.NodeReadinessGate = true },
			want:   []string{"spec.nodeReadinessGate: no container has a readinessProbe"},
		},
		"readiness gate with probe is fine": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeReadinessGate = true
				ds.Spec.Template.Spec.Containers[0].ReadinessProbe = &corev1.Probe{}
			},
		},
		"override for every node": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override("", `{"spec":{}}`)}
			},
			want: []string{"spec.nodeOverrides[0].nodeSelector: an empty selector matches every node"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			placement.SetDaemonResource(tc.marker)
			t.Cleanup(func() { placement.SetDaemonResource("") })
			ds := validSet(t)
			tc.change(ds)
			errs, warnings := validateDaemonSet(ds, nil)
			if len(errs) > 0 {
				t.Fatalf("case must be valid, got %v", errs.ToAggregate())
			}
			if len(warnings) != len(tc.want) {
				t.Fatalf("warnings = %q, want %d matching %q", warnings, len(tc.want), tc.want)
			}
			for i := range tc.want {
				if !strings.Contains(warnings[i], tc.want[i]) {
					t.Errorf("warning %d = %q, want it to contain %q", i, warnings[i], tc.want[i])
				}
			}
		})
	}
}

func TestOverlapWarnings(t *testing.T) {
	mk := func(name string, selector, labels map[string]string) *everynodev1alpha1.DaemonSet {
		ds := &everynodev1alpha1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace}}
		ds.Spec.Selector = &metav1.LabelSelector{MatchLabels: selector}
		ds.Spec.Template.Labels = labels
		return ds
	}
	ds := mk("agent", map[string]string{"app": "agent"}, map[string]string{"app": "agent", "tier": "node"})
	tests := map[string]struct {
		others []*everynodev1alpha1.DaemonSet
		want   int
	}{
		"no others":           {},
		"itself is not other": {others: []*everynodev1alpha1.DaemonSet{ds}},
		"disjoint": {others: []*everynodev1alpha1.DaemonSet{
			mk("logs", map[string]string{"app": "logs"}, map[string]string{"app": "logs"})}},
		"theirs claims ours": {others: []*everynodev1alpha1.DaemonSet{
			mk("node", map[string]string{"tier": "node"}, map[string]string{"tier": "node", "app": "n"})}, want: 1},
		"ours claims theirs": {others: []*everynodev1alpha1.DaemonSet{
			mk("agent2", map[string]string{"app": "agent2"}, map[string]string{"app": "agent", "x": "y"})}, want: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := overlapWarnings(ds, tc.others); len(got) != tc.want {
				t.Errorf("overlapWarnings = %q, want %d", got, tc.want)
			}
		})
	}
}
