package placement

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// In takeover mode everynode reconciles apps/v1 DaemonSets with the same
// controller as its own kind. An apps/v1 set is converted to the everynode
// type where the controller reads it (FromApps) and back where it writes
// it (AppsStatus); the converted object keeps apps/v1's apiVersion and kind
// in its TypeMeta (IsApps), which is how every rule that differs by kind
// tells them apart: the owner reference of its pods and revisions, the
// revision data (package revision), and the events' object reference.
// Everynode's own fields are zero on a converted set, so their rules do
// nothing: no node overrides, no partition or pause, podUpdatePolicy
// Recreate, no onFailure.

// AppsKind is the group, version and kind of the built-in DaemonSet.
var AppsKind = appsv1.SchemeGroupVersion.WithKind(KindDaemonSet)

// IsApps reports whether ds was converted from an apps/v1 DaemonSet.
func IsApps(ds *everynodev1alpha1.DaemonSet) bool {
	return ds.APIVersion == AppsKind.GroupVersion().String() && ds.Kind == AppsKind.Kind
}

// FromApps returns the everynode DaemonSet with the metadata, spec and
// status of the apps/v1 DaemonSet in, marked as one (IsApps). It shares
// in's maps, slices and pointers, so it is as read-only as the informer
// cache it usually comes from; deep-copy it before changing it. The
// apps/v1 status conditions are not carried over: the controller never
// writes them (kube-controller-manager does not either), and AppsStatus
// leaves them as they are on the server.
func FromApps(in *appsv1.DaemonSet) *everynodev1alpha1.DaemonSet {
	ds := &everynodev1alpha1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: AppsKind.GroupVersion().String(), Kind: AppsKind.Kind},
		ObjectMeta: in.ObjectMeta,
		Spec: everynodev1alpha1.DaemonSetSpec{
			Selector:             in.Spec.Selector,
			Template:             in.Spec.Template,
			MinReadySeconds:      in.Spec.MinReadySeconds,
			RevisionHistoryLimit: in.Spec.RevisionHistoryLimit,
			UpdateStrategy:       everynodev1alpha1.DaemonSetUpdateStrategy{Type: in.Spec.UpdateStrategy.Type},
		},
		Status: everynodev1alpha1.DaemonSetStatus{
			CurrentNumberScheduled: in.Status.CurrentNumberScheduled,
			NumberMisscheduled:     in.Status.NumberMisscheduled,
			DesiredNumberScheduled: in.Status.DesiredNumberScheduled,
			NumberReady:            in.Status.NumberReady,
			ObservedGeneration:     in.Status.ObservedGeneration,
			UpdatedNumberScheduled: in.Status.UpdatedNumberScheduled,
			NumberAvailable:        in.Status.NumberAvailable,
			NumberUnavailable:      in.Status.NumberUnavailable,
			CollisionCount:         in.Status.CollisionCount,
		},
	}
	if ru := in.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		ds.Spec.UpdateStrategy.RollingUpdate = &everynodev1alpha1.RollingUpdateDaemonSet{
			MaxUnavailable: ru.MaxUnavailable,
			MaxSurge:       ru.MaxSurge,
		}
	}
	return ds
}

// AppsStatus is the part of an everynode status that apps/v1 has, the
// fields kube-controller-manager writes: the counts, observedGeneration
// and collisionCount. A merge patch of it (as the controller writes it)
// leaves the set's conditions alone, as kube-controller-manager does.
func AppsStatus(st *everynodev1alpha1.DaemonSetStatus) appsv1.DaemonSetStatus {
	return appsv1.DaemonSetStatus{
		CurrentNumberScheduled: st.CurrentNumberScheduled,
		NumberMisscheduled:     st.NumberMisscheduled,
		DesiredNumberScheduled: st.DesiredNumberScheduled,
		NumberReady:            st.NumberReady,
		ObservedGeneration:     st.ObservedGeneration,
		UpdatedNumberScheduled: st.UpdatedNumberScheduled,
		NumberAvailable:        st.NumberAvailable,
		NumberUnavailable:      st.NumberUnavailable,
		CollisionCount:         st.CollisionCount,
	}
}

// SetRef returns the owner reference of obj that names its controlling
// DaemonSet of either kind, everynode's or apps/v1's, or nil. It is the
// test for an orphan: an object another DaemonSet controls is not one,
// whichever kind controls it. ControllerRef is the everynode-only test.
func SetRef(obj metav1.Object) *metav1.OwnerReference {
	if ref := ControllerRef(obj); ref != nil {
		return ref
	}
	return AppsControllerRef(obj)
}

// AppsControllerRef returns the owner reference of obj that names its
// controlling apps/v1 DaemonSet (group apps, any version), or nil.
func AppsControllerRef(obj metav1.Object) *metav1.OwnerReference {
	return daemonSetRef(obj, appsv1.GroupName)
}

// MarkPatch is the strategic merge patch that gives an existing pod the
// daemon-pod label, so that everynode's pod informer (which selects on
// it) sees the pod: for the pods kube-controller-manager made, at a
// takeover (package takeover) or a migration (the controller's
// adopt-unmarked-pods). Only the controller may send it: the pod webhook
// refuses it from anyone else.
var MarkPatch = []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, everynodev1alpha1.LabelDaemonPod, everynodev1alpha1.LabelDaemonPodValue))
