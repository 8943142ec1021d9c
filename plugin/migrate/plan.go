// Package migrate is `kubectl everynode migrate`: it moves a DaemonSet
// between the apps/v1 kind and everynode's without restarting a pod. The
// old object is deleted with propagationPolicy Orphan (its pods and
// revisions stay, without an owner), the new one is created with the same
// selector and template, and its controller adopts the pods. The pods'
// revision hash is the new set's too (everynode hashes a template as
// upstream does), so no rolling update starts: the command checks that
// before it deletes anything.
//
// The rules are pure functions here (plan.go); command.go is the shell
// that reads, writes and waits.
package migrate

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
	"everynode.io/everynode/placement/revision"
)

// Direction is where a migration goes.
type Direction string

const (
	ToEverynode Direction = "everynode"
	ToApps      Direction = "apps"
)

// keptMetadata is the metadata the new object takes from the old: its
// labels and annotations, less what the API server or a controller wrote
// for the old kind.
func keptMetadata(in metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: in.Name, Namespace: in.Namespace}
	if len(in.Labels) > 0 {
		out.Labels = make(map[string]string, len(in.Labels))
		for k, v := range in.Labels {
			out.Labels[k] = v
		}
	}
	for k, v := range in.Annotations {
		switch k {
		case appsv1.DeprecatedTemplateGeneration, "kubectl.kubernetes.io/last-applied-configuration",
			everynodev1alpha1.AnnotationAdoptUnmarkedPods:
			continue
		}
		if out.Annotations == nil {
			out.Annotations = make(map[string]string)
		}
		out.Annotations[k] = v
	}
	return out
}

// EverynodeFromApps is the everynode set that takes over from in: the same
// selector, template, strategy, minReadySeconds and history limit, marked
// to adopt the pods kube-controller-manager made
// (AnnotationAdoptUnmarkedPods).
func EverynodeFromApps(in *appsv1.DaemonSet) *everynodev1alpha1.DaemonSet {
	conv := placement.FromApps(in)
	ds := &everynodev1alpha1.DaemonSet{
		ObjectMeta: keptMetadata(in.ObjectMeta),
		Spec:       *conv.Spec.DeepCopy(),
	}
	if ds.Annotations == nil {
		ds.Annotations = map[string]string{}
	}
	ds.Annotations[everynodev1alpha1.AnnotationAdoptUnmarkedPods] = "true"
	return ds
}

// AppsFromEverynode is the apps/v1 DaemonSet that takes over from in, or
// an error naming the fields apps/v1 cannot hold.
func AppsFromEverynode(in *everynodev1alpha1.DaemonSet) (*appsv1.DaemonSet, error) {
	if lost := everynodeOnly(in); len(lost) > 0 {
		return nil, fmt.Errorf("DaemonSet %s/%s uses what apps/v1 does not have: %s; remove them first, or keep it an everynode set",
			in.Namespace, in.Name, strings.Join(lost, ", "))
	}
	out := &appsv1.DaemonSet{
		ObjectMeta: keptMetadata(in.ObjectMeta),
		Spec: appsv1.DaemonSetSpec{
			Selector:             in.Spec.Selector.DeepCopy(),
			Template:             *in.Spec.Template.DeepCopy(),
			MinReadySeconds:      in.Spec.MinReadySeconds,
			RevisionHistoryLimit: in.Spec.RevisionHistoryLimit,
			UpdateStrategy:       appsv1.DaemonSetUpdateStrategy{Type: in.Spec.UpdateStrategy.Type},
		},
	}
	if ru := in.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		out.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ru.MaxUnavailable, MaxSurge: ru.MaxSurge}
	}
	return out, nil
}

// everynodeOnly names the fields of in that apps/v1 lacks and that are set.
func everynodeOnly(in *everynodev1alpha1.DaemonSet) []string {
	var lost []string
	if len(in.Spec.NodeOverrides) > 0 {
		lost = append(lost, "spec.nodeOverrides")
	}
	if in.Spec.NodeReadinessGate {
		lost = append(lost, "spec.nodeReadinessGate")
	}
	if ru := in.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		if ru.Partition != nil {
			lost = append(lost, "rollingUpdate.partition")
		}
		if ru.NodeSelector != nil {
			lost = append(lost, "rollingUpdate.nodeSelector")
		}
		if ru.Paused {
			lost = append(lost, "rollingUpdate.paused")
		}
		if ru.PodUpdatePolicy == everynodev1alpha1.PodUpdateInPlaceIfPossible {
			lost = append(lost, "rollingUpdate.podUpdatePolicy")
		}
		if ru.OnFailure != nil {
			lost = append(lost, "rollingUpdate.onFailure")
		}
	}
	return lost
}

// AtRest reports why a set is not at rest (a rollout under way, or a
// status that does not describe its spec yet), or "" when it is: every
// desired pod is of the current template. Moving a set mid-rollout would
// hand the new controller a rollout it did not start.
func AtRest(generation int64, st appsv1.DaemonSetStatus) string {
	switch {
	case st.ObservedGeneration < generation:
		return fmt.Sprintf("its status describes generation %d, not its spec's %d: its controller has not caught up", st.ObservedGeneration, generation)
	case st.UpdatedNumberScheduled < st.DesiredNumberScheduled:
		return fmt.Sprintf("a rollout is under way: %d of %d pods are of the current template", st.UpdatedNumberScheduled, st.DesiredNumberScheduled)
	}
	return ""
}

// SameHash says, as an error, when the pods of old would not count as the
// new set's: the hash of the template the new set will store (after the
// API server's defaults, from a dry-run create) differs from the one its
// pods carry. Then the new controller would replace every pod.
func SameHash(podHash string, stored *everynodev1alpha1.DaemonSet) error {
	newHash := revision.Hash(&stored.Spec.Template, stored.Spec.NodeOverrides, nil)
	if newHash == podHash {
		return nil
	}
	return fmt.Errorf("the new DaemonSet's revision hash would be %s, but the pods carry %s: its controller would replace every pod. "+
		"The template the API server stores for the new kind differs from the old one's (defaults or a webhook), or the old set's collisionCount "+
		"is set; nothing was changed", newHash, podHash)
}
