package webhook

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

func TestValidateStartAfter(t *testing.T) {
	set := func(ns, name string, deps ...everynodev1alpha1.StartDependency) *everynodev1alpha1.DaemonSet {
		return &everynodev1alpha1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       everynodev1alpha1.DaemonSetSpec{StartAfter: deps},
		}
	}
	dep := func(name string) everynodev1alpha1.StartDependency {
		return everynodev1alpha1.StartDependency{Name: name}
	}
	cases := map[string]struct {
		cached []runtime.Object
		ds     *everynodev1alpha1.DaemonSet
		old    *everynodev1alpha1.DaemonSet
		cycle  string // "" when allowed
	}{
		"no dependencies":     {ds: set("ns", "a")},
		"missing dependency":  {ds: set("ns", "a", dep("b"))},
		"chain":               {cached: []runtime.Object{set("ns", "b", dep("c")), set("ns", "c")}, ds: set("ns", "a", dep("b"))},
		"self":                {ds: set("ns", "a", dep("a")), cycle: "everynode.io/ns/a -> everynode.io/ns/a"},
		"two":                 {cached: []runtime.Object{set("ns", "b", dep("a"))}, ds: set("ns", "a", dep("b")), cycle: "everynode.io/ns/a -> everynode.io/ns/b -> everynode.io/ns/a"},
		"across namespaces":   {cached: []runtime.Object{set("other", "b", everynodev1alpha1.StartDependency{Namespace: "ns", Name: "a"})}, ds: set("ns", "a", everynodev1alpha1.StartDependency{Namespace: "other", Name: "b"}), cycle: "everynode.io/ns/a -> everynode.io/other/b -> everynode.io/ns/a"},
		"apps of the name":    {cached: []runtime.Object{set("ns", "b", dep("a"))}, ds: set("ns", "a", everynodev1alpha1.StartDependency{APIGroup: "apps", Name: "b"})},
		"the cached old self": {cached: []runtime.Object{set("ns", "a"), set("ns", "b", dep("a"))}, ds: set("ns", "a", dep("b")), old: set("ns", "a"), cycle: "everynode.io/ns/a -> everynode.io/ns/b -> everynode.io/ns/a"},
		"unchanged list":      {cached: []runtime.Object{set("ns", "b", dep("a"))}, ds: set("ns", "a", dep("b")), old: set("ns", "a", dep("b"))},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, sets := listers(t, tc.cached...)
			errs := validateStartAfter(tc.ds, tc.old, tc.ds.Namespace, sets)
			switch {
			case tc.cycle == "" && len(errs) > 0:
				t.Errorf("refused: %v", errs)
			case tc.cycle != "" && (len(errs) != 1 || !strings.Contains(errs[0].Detail, tc.cycle) || errs[0].Field != "spec.startAfter"):
				t.Errorf("errors %v, want the cycle %s", errs, tc.cycle)
			}
		})
	}
}
