package placement_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

func strategySet(t appsv1.DaemonSetUpdateStrategyType, ru *everynodev1alpha1.RollingUpdateDaemonSet) *everynodev1alpha1.DaemonSet {
	return &everynodev1alpha1.DaemonSet{Spec: everynodev1alpha1.DaemonSetSpec{
		UpdateStrategy: everynodev1alpha1.DaemonSetUpdateStrategy{Type: t, RollingUpdate: ru},
	}}
}

func intOrStr(v string) *intstr.IntOrString {
	x := intstr.Parse(v)
	return &x
}

func TestUpdateStrategy(t *testing.T) {
	const rolling, onDelete = appsv1.RollingUpdateDaemonSetStrategyType, appsv1.OnDeleteDaemonSetStrategyType
	tests := map[string]struct {
		ds *everynodev1alpha1.DaemonSet
		// desired is the node count Limits and Kept scale to.
		desired                          int
		wantRolling, wantSurge, wantLimt bool
		wantMaxSurge, wantMaxUnavailable int
		wantKept                         int
	}{
		// The one rule every part shares: an empty type is apps/v1's
		// default, RollingUpdate, with maxUnavailable 1 and maxSurge 0.
		"empty type reads as RollingUpdate": {
			ds: strategySet("", nil), desired: 10, wantRolling: true, wantMaxUnavailable: 1,
		},
		"empty type with maxSurge surges": {
			ds:      strategySet("", &everynodev1alpha1.RollingUpdateDaemonSet{MaxSurge: intOrStr("2"), MaxUnavailable: intOrStr("0")}),
			desired: 10, wantRolling: true, wantSurge: true, wantMaxSurge: 2,
		},
		"RollingUpdate without rollingUpdate gets the defaults": {
			ds: strategySet(rolling, nil), desired: 10, wantRolling: true, wantMaxUnavailable: 1,
		},
		"percentages round up": {
			ds:      strategySet(rolling, &everynodev1alpha1.RollingUpdateDaemonSet{MaxUnavailable: intOrStr("10%"), Partition: intOrStr("25%")}),
			desired: 11, wantRolling: true, wantMaxUnavailable: 2, wantKept: 3, wantLimt: true,
		},
		"maxSurge percentage surges, and maxUnavailable stays as given": {
			ds:      strategySet(rolling, &everynodev1alpha1.RollingUpdateDaemonSet{MaxSurge: intOrStr("1%"), MaxUnavailable: intOrStr("0")}),
			desired: 1000, wantRolling: true, wantSurge: true, wantMaxSurge: 10,
		},
		"both zero: maxUnavailable 1, as upstream": {
			ds:      strategySet(rolling, &everynodev1alpha1.RollingUpdateDaemonSet{MaxSurge: intOrStr("0"), MaxUnavailable: intOrStr("0%")}),
			desired: 5, wantRolling: true, wantMaxUnavailable: 1,
		},
		"both zero on no nodes stays zero": {
			ds:      strategySet(rolling, &everynodev1alpha1.RollingUpdateDaemonSet{MaxSurge: intOrStr("0"), MaxUnavailable: intOrStr("0")}),
			desired: 0, wantRolling: true,
		},
		"OnDelete replaces nothing, whatever rollingUpdate says": {
			ds:      strategySet(onDelete, &everynodev1alpha1.RollingUpdateDaemonSet{MaxSurge: intOrStr("1"), MaxUnavailable: intOrStr("0")}),
			desired: 10,
		},
		"an unknown type replaces nothing, as upstream's controller": {
			ds: strategySet("Sometimes", nil), desired: 10,
		},
		"canary selector limits the rollout": {
			ds:      strategySet(rolling, &everynodev1alpha1.RollingUpdateDaemonSet{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}}),
			desired: 10, wantRolling: true, wantMaxUnavailable: 1, wantLimt: true,
		},
		"partition zero limits nothing": {
			ds:      strategySet(rolling, &everynodev1alpha1.RollingUpdateDaemonSet{Partition: intOrStr("0%")}),
			desired: 10, wantRolling: true, wantMaxUnavailable: 1,
		},
		"partition as a number": {
			ds:      strategySet(rolling, &everynodev1alpha1.RollingUpdateDaemonSet{Partition: ptr.To(intstr.FromInt32(4))}),
			desired: 10, wantRolling: true, wantMaxUnavailable: 1, wantKept: 4, wantLimt: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := placement.UpdateStrategy(tc.ds)
			if got := s.RollingUpdate(); got != tc.wantRolling {
				t.Errorf("RollingUpdate() = %v, want %v", got, tc.wantRolling)
			}
			if got := s.AllowsSurge(); got != tc.wantSurge {
				t.Errorf("AllowsSurge() = %v, want %v", got, tc.wantSurge)
			}
			if got := s.Limited(); got != tc.wantLimt {
				t.Errorf("Limited() = %v, want %v", got, tc.wantLimt)
			}
			surge, unavailable, err := s.Limits(tc.desired)
			if err != nil || surge != tc.wantMaxSurge || unavailable != tc.wantMaxUnavailable {
				t.Errorf("Limits(%d) = %d, %d, %v; want %d, %d, nil", tc.desired, surge, unavailable, err, tc.wantMaxSurge, tc.wantMaxUnavailable)
			}
			if kept, err := s.Kept(tc.desired); err != nil || kept != tc.wantKept {
				t.Errorf("Kept(%d) = %d, %v; want %d", tc.desired, kept, err, tc.wantKept)
			}
		})
	}
}

func TestUpdateStrategyBadValues(t *testing.T) {
	ds := strategySet(appsv1.RollingUpdateDaemonSetStrategyType, &everynodev1alpha1.RollingUpdateDaemonSet{
		MaxSurge: intOrStr("lots"), Partition: intOrStr("some"),
	})
	s := placement.UpdateStrategy(ds)
	if _, _, err := s.Limits(10); err == nil {
		t.Error("Limits accepted maxSurge \"lots\"")
	}
	if s.AllowsSurge() {
		t.Error("an unparsable maxSurge allows a surge")
	}
	if _, err := s.Kept(10); err == nil {
		t.Error("Kept accepted partition \"some\"")
	}
	if !s.Limited() {
		t.Error("an unparsable partition must count as limiting: readers wait for the controller's word")
	}
}

func TestUpdateStrategyLeavesTheSetAlone(t *testing.T) {
	ds := strategySet("", nil)
	_ = placement.UpdateStrategy(ds)
	if ds.Spec.UpdateStrategy.Type != "" || ds.Spec.UpdateStrategy.RollingUpdate != nil {
		t.Fatalf("UpdateStrategy wrote defaults into the set: %+v", ds.Spec.UpdateStrategy)
	}
}

func TestRevisionHistoryLimit(t *testing.T) {
	ds := &everynodev1alpha1.DaemonSet{}
	if got := placement.RevisionHistoryLimit(ds); got != 10 {
		t.Errorf("default = %d, want apps/v1's 10", got)
	}
	ds.Spec.RevisionHistoryLimit = ptr.To[int32](0)
	if got := placement.RevisionHistoryLimit(ds); got != 0 {
		t.Errorf("explicit 0 = %d, want 0", got)
	}
}
