package soak

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// The catalog has 20 sets of both kinds and every update strategy the
// issue names.
func TestCatalogCoversEveryStrategy(t *testing.T) {
	cat := Catalog()
	if len(cat) != 20 {
		t.Fatalf("%d sets, want 20", len(cat))
	}
	has := map[string]bool{}
	names := map[string]bool{}
	for _, s := range cat {
		if names[s.Name] {
			t.Errorf("two sets named %s", s.Name)
		}
		names[s.Name] = true
		has[string(s.Kind)] = true
		ds := s.Everynode("soak", s.Template("v1", 1))
		st := placement.UpdateStrategy(ds)
		surge, unavailable, err := st.Limits(100)
		if err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
		switch {
		case s.OnDelete:
			has["OnDelete"] = true
		case surge > 0:
			has["maxSurge"] = true
		case unavailable > 0:
			has["maxUnavailable"] = true
		}
		if s.Partition != "" {
			has["partition"] = true
		}
		if s.Canary {
			has["canary"] = true
		}
		if s.InPlace != "" {
			has["InPlaceIfPossible"] = true
			if surge != 0 {
				t.Errorf("%s: InPlaceIfPossible with maxSurge %d: the CRD refuses it", s.Name, surge)
			}
		}
		if s.Overrides {
			has["nodeOverrides"] = true
		}
		if s.Sizing {
			has["nodeSizing"] = true
			if errs := placement.ValidateNodeSizing(ds.Spec.NodeSizing, &ds.Spec.Template, field.NewPath("spec", "nodeSizing")); len(errs) > 0 {
				t.Errorf("%s: %v", s.Name, errs.ToAggregate())
			}
		}
		if s.StartAfter != "" {
			has["startAfter"] = true
			dep, ok := Lookup(s.StartAfter)
			if !ok {
				t.Errorf("%s waits for %s, which is not in the catalog", s.Name, s.StartAfter)
			}
			if got := ds.Spec.StartAfter[0].APIGroup; (dep.Kind == KindApps) != (got == everynodev1alpha1.GroupApps) {
				t.Errorf("%s: startAfter apiGroup %q for a set of kind %s", s.Name, got, dep.Kind)
			}
		}
		if s.OnFailure != "" {
			has["onFailure"] = true
		}
		if surge > 0 && unavailable > 0 {
			t.Errorf("%s: maxSurge and maxUnavailable both set: the CRD refuses it", s.Name)
		}
		if s.Kind == KindApps && (s.Limited() || s.InPlace != "" || s.Overrides || s.Sizing || s.StartAfter != "" || s.OnFailure != "") {
			t.Errorf("%s: apps/v1 has no field for %s", s.Name, s.Describe())
		}
		tmpl := s.Template("v1", 1)
		if tmpl.Labels[SetLabel] != s.Name || tmpl.Labels["app"] != s.Name {
			t.Errorf("%s: template labels %v", s.Name, tmpl.Labels)
		}
	}
	for _, want := range []string{string(KindEverynode), string(KindApps), "OnDelete", "maxSurge", "maxUnavailable", "partition", "canary",
		"InPlaceIfPossible", "nodeOverrides", "nodeSizing", "startAfter", "onFailure"} {
		if !has[want] {
			t.Errorf("no set with %s", want)
		}
	}
}

func TestAppsSet(t *testing.T) {
	s, _ := Lookup("s17-apps-surge")
	ds := s.Apps("soak", s.Template("v1", 1))
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ru == nil || ru.MaxSurge.IntValue() != 1 || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("apps strategy %+v", ds.Spec.UpdateStrategy)
	}
	if got := ds.Spec.Template.Spec.NodeSelector; got[PoolLabel] != "b" || got[NodeLabel] != "true" {
		t.Errorf("node selector %v", got)
	}
}
