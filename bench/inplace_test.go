package main

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// strategyView is what the test reads of a variant's update strategy, as
// its system's API type decodes it.
type strategyView struct {
	maxUnavailable, maxSurge intstr.IntOrString
	policy                   everynodev1alpha1.PodUpdatePolicy
	// gate is inPlaceReadinessGate, "" when not set (on by default);
	// gatePolicy is inPlaceGatePolicy.
	gate       string
	gatePolicy everynodev1alpha1.InPlaceGatePolicy
	// kruiseType is Kruise's rollingUpdateType.
	kruiseType string
}

// kruiseRollingUpdate mirrors the JSON of Kruise's RollingUpdateDaemonSet
// (apis/apps/v1alpha1 of github.com/openkruise/kruise v1.8.2), whose
// module pins another Kubernetes than the bench's: a field the test
// decodes that Kruise's type lacks is an error.
type kruiseRollingUpdate struct {
	Type           string                `json:"rollingUpdateType,omitempty"`
	MaxUnavailable *intstr.IntOrString   `json:"maxUnavailable,omitempty"`
	MaxSurge       *intstr.IntOrString   `json:"maxSurge,omitempty"`
	Selector       *metav1.LabelSelector `json:"selector,omitempty"`
	Partition      *int32                `json:"partition,omitempty"`
	Paused         *bool                 `json:"paused,omitempty"`
}

type kruiseUpdateStrategy struct {
	Type          string               `json:"type,omitempty"`
	RollingUpdate *kruiseRollingUpdate `json:"rollingUpdate,omitempty"`
}

// Each variant's strategy goes into an unstructured object, which takes
// JSON's types only (int64, not int: a plain 0 panics in DeepCopy), and must
// decode, as its system's API type with no field unknown, to the strategy
// the report says the variant runs.
func TestInPlaceVariantStrategies(t *testing.T) {
	ten, one, zero := intstr.FromString("10%"), intstr.FromInt32(1), intstr.FromInt32(0)
	inPlace := everynodev1alpha1.PodUpdateInPlaceIfPossible
	tests := map[string]strategyView{
		"upstream":   {maxUnavailable: ten, maxSurge: zero},
		"gate":       {maxUnavailable: ten, maxSurge: zero, policy: inPlace},
		"nogate":     {maxUnavailable: ten, maxSurge: zero, policy: inPlace, gate: "false"},
		"ifserved":   {maxUnavailable: ten, maxSurge: zero, policy: inPlace, gatePolicy: everynodev1alpha1.InPlaceGateIfServed},
		"served":     {maxUnavailable: ten, maxSurge: zero, policy: inPlace, gatePolicy: everynodev1alpha1.InPlaceGateIfServed},
		"kruise":     {maxUnavailable: ten, maxSurge: zero, kruiseType: "InPlaceIfPossible"},
		"upstream-1": {maxUnavailable: one, maxSurge: zero},
		"recreate-1": {maxUnavailable: one, maxSurge: zero},
	}
	if len(tests) != len(inPlaceVariants) {
		t.Errorf("%d variants, %d expected: a variant without a case here", len(inPlaceVariants), len(tests))
	}
	for _, v := range inPlaceVariants {
		t.Run(v.key, func(t *testing.T) {
			want, ok := tests[v.key]
			if !ok {
				t.Fatalf("no expected strategy for variant %q", v.key)
			}
			if p := jsonCopyPanic(v.rollingUpdate); p != nil {
				t.Fatalf("rollingUpdate %#v is no unstructured value: %v", v.rollingUpdate, p)
			}
			u := &unstructured.Unstructured{Object: map[string]any{}}
			if err := unstructured.SetNestedMap(u.Object, v.updateStrategy(), "spec", "updateStrategy"); err != nil {
				t.Fatal(err)
			}
			if c := u.DeepCopy(); !reflect.DeepEqual(c.Object, u.Object) {
				t.Errorf("DeepCopy gives %#v, want %#v", c.Object, u.Object)
			}
			strategy, _, _ := unstructured.NestedMap(u.Object, "spec", "updateStrategy")
			var got strategyView
			conv := runtime.DefaultUnstructuredConverter
			switch v.sys.name {
			case upstream.name:
				var s appsv1.DaemonSetUpdateStrategy
				if err := conv.FromUnstructuredWithValidation(strategy, &s, true); err != nil {
					t.Fatalf("as apps/v1: %v", err)
				}
				if s.Type != appsv1.RollingUpdateDaemonSetStrategyType || s.RollingUpdate == nil {
					t.Fatalf("as apps/v1: %+v, want a rolling update", s)
				}
				got = strategyView{maxUnavailable: ptr.Deref(s.RollingUpdate.MaxUnavailable, intstr.IntOrString{}), maxSurge: ptr.Deref(s.RollingUpdate.MaxSurge, intstr.IntOrString{})}
			case everynode.name:
				var s everynodev1alpha1.DaemonSetUpdateStrategy
				if err := conv.FromUnstructuredWithValidation(strategy, &s, true); err != nil {
					t.Fatalf("as everynode's: %v", err)
				}
				if s.Type != appsv1.RollingUpdateDaemonSetStrategyType || s.RollingUpdate == nil {
					t.Fatalf("as everynode's: %+v, want a rolling update", s)
				}
				r := s.RollingUpdate
				got = strategyView{maxUnavailable: ptr.Deref(r.MaxUnavailable, intstr.IntOrString{}), maxSurge: ptr.Deref(r.MaxSurge, intstr.IntOrString{}), policy: r.PodUpdatePolicy}
				if r.InPlaceReadinessGate != nil {
					got.gate = strconv.FormatBool(*r.InPlaceReadinessGate)
				}
				got.gatePolicy = r.InPlaceGatePolicy
			case kruise.name:
				var s kruiseUpdateStrategy
				if err := conv.FromUnstructuredWithValidation(strategy, &s, true); err != nil {
					t.Fatalf("as Kruise's: %v", err)
				}
				if s.Type != "RollingUpdate" || s.RollingUpdate == nil {
					t.Fatalf("as Kruise's: %+v, want a rolling update", s)
				}
				r := s.RollingUpdate
				got = strategyView{maxUnavailable: ptr.Deref(r.MaxUnavailable, intstr.IntOrString{}), maxSurge: ptr.Deref(r.MaxSurge, intstr.IntOrString{}), kruiseType: r.Type}
			default:
				t.Fatalf("system %q", v.sys.name)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("strategy %+v, want %+v", got, want)
			}
		})
	}
}

// jsonCopyPanic is what runtime.DeepCopyJSON, unstructured's deep copy,
// panics with on m; nil if it does not.
func jsonCopyPanic(m map[string]any) (p any) {
	defer func() { p = recover() }()
	runtime.DeepCopyJSON(m)
	return nil
}

// The one-pod-at-a-time variants run only when named, and each compares
// with its own upstream baseline; a peer's variants and the gate-if-served
// one run by default only beside the peer.
func TestSelectedVariants(t *testing.T) {
	two, three := []system{upstream, everynode}, []system{upstream, everynode, kruise}
	keysOf := func(vs []inPlaceVariant) string {
		var keys []string
		for _, v := range vs {
			keys = append(keys, v.key)
		}
		return strings.Join(keys, ",")
	}
	all, err := selectedVariants("", two)
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(all); got != "upstream,gate,nogate" {
		t.Errorf("default variants %s, want upstream,gate,nogate", got)
	}
	withKruise, err := selectedVariants("", three)
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(withKruise); got != "upstream,gate,nogate,ifserved,served,kruise" {
		t.Errorf("default variants with --peers=kruise %s, want upstream,gate,nogate,ifserved,served,kruise", got)
	}
	step, err := selectedVariants("upstream-1,recreate-1", two)
	if err != nil {
		t.Fatal(err)
	}
	if len(step) != 2 || step[1].baseName() != step[0].name || step[1].pods(1000) != stepPods || all[2].pods(1000) != 1000 {
		t.Errorf("maxUnavailable-1 variants %+v: want recreate-1 against upstream-1, timed over %d of 1,000 nodes", step, stepPods)
	}
	if all[2].baseName() != all[0].name || withKruise[4].baseName() != all[0].name {
		t.Errorf("nogate's base %q, kruise's %q, want %q", all[2].baseName(), withKruise[4].baseName(), all[0].name)
	}
	if named, err := selectedVariants("ifserved", two); err != nil || keysOf(named) != "ifserved" {
		t.Errorf("ifserved named without a peer: %v, %v", keysOf(named), err)
	}
	for keys, want := range map[string]string{"upstream,bogus": "bogus", "kruise": "--peers=kruise"} {
		if _, err := selectedVariants(keys, two); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s without Kruise: error %v, want one saying %q", keys, err, want)
		}
	}
}
