package webhook

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// validateStartAfter refuses a spec.startAfter that closes a cycle through
// ds among the sets the webhook's cache holds: on every node of the cycle
// each pod would wait for the next. The schema checks each entry's shape.
// It looks only when the list changed (or on create): an edit of anything
// else must not fail on a cycle closed elsewhere, which the controller
// reports (StartOrderBroken) and does not wait on. A set the cache has not
// seen yet is taken as having no dependencies, so a cycle closed by two
// writes at once can pass here; the controller reports that one too.
func validateStartAfter(ds, old *everynodev1alpha1.DaemonSet, namespace string, sets SetGetter) field.ErrorList {
	if len(ds.Spec.StartAfter) == 0 || sets == nil {
		return nil
	}
	if old != nil && equality.Semantic.DeepEqual(ds.Spec.StartAfter, old.Spec.StartAfter) {
		return nil
	}
	self := ds
	if ds.Namespace == "" {
		self = ds.DeepCopy()
		self.Namespace = namespace
	}
	start := placement.SetStartKey(self)
	edges := func(k placement.StartKey) []placement.StartKey {
		if k == start {
			return placement.StartAfterKeys(self)
		}
		if k.Group != everynodev1alpha1.GroupEverynode {
			return nil
		}
		other, err := sets.DaemonSets(k.Namespace).Get(k.Name)
		if err != nil {
			return nil
		}
		return placement.StartAfterKeys(other)
	}
	cycle := placement.StartCycle(start, edges)
	if cycle == nil {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("spec", "startAfter"), placement.CycleString(cycle[1:2]),
		"closes a start-order cycle: "+placement.CycleString(cycle)+"; each pod would wait for the next on every node")}
}
