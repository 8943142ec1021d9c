package placement

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	utiljson "sigs.k8s.io/json"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// Node overrides (spec.nodeOverrides) as every part reads them: validation
// checks a patch (CheckOverridePatch, ApplyOverride in strict mode), the
// controller applies the matching ones to each pod it makes (NewPodFor),
// and the pod webhook applies them again to the pods of an everynode older
// than this one during an upgrade (a strategic merge patch applied twice
// gives what it gives once).

// CheckOverridePatch makes sure a node override's patch is a JSON object that
// touches only what an override may change: metadata.labels,
// metadata.annotations and spec. The pod's name, namespace and owner are
// the controller's, not the template's.
func CheckOverridePatch(raw []byte) error {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil || doc == nil {
		return errors.New(`must be a JSON object, such as {"spec":{"containers":[{"name":"agent","resources":{"limits":{"memory":"1Gi"}}}]}}`)
	}
	for key, value := range doc {
		switch key {
		case "spec":
		case "metadata":
			var meta map[string]json.RawMessage
			if err := json.Unmarshal(value, &meta); err != nil {
				return errors.New("metadata must be a JSON object")
			}
			for k := range meta {
				if k != "labels" && k != "annotations" {
					return fmt.Errorf("may change only metadata.labels and metadata.annotations, not metadata.%s", k)
				}
			}
		default:
			return fmt.Errorf("may change only metadata and spec of the pod template, not %q", key)
		}
	}
	return nil
}

// ApplyOverride applies a node override's strategic merge patch to a pod
// template and returns the result; tmpl is not modified. Lists merge as
// kubectl would merge them (containers and env by name, for example). With
// strict set, fields the pod template does not have are an error, so a
// misspelt field is reported instead of silently doing nothing.
func ApplyOverride(tmpl *corev1.PodTemplateSpec, patch []byte, strict bool) (*corev1.PodTemplateSpec, error) {
	original, err := json.Marshal(tmpl)
	if err != nil {
		return nil, fmt.Errorf("encode pod template: %w", err)
	}
	patched, err := strategicpatch.StrategicMergePatch(original, patch, corev1.PodTemplateSpec{})
	if err != nil {
		return nil, fmt.Errorf("does not apply to the pod template as a strategic merge patch: %w", err)
	}
	out := &corev1.PodTemplateSpec{}
	if !strict {
		if err := utiljson.UnmarshalCaseSensitivePreserveInts(patched, out); err != nil {
			return nil, fmt.Errorf("patched pod template does not decode: %w", err)
		}
		return out, nil
	}
	strictErrs, err := utiljson.UnmarshalStrict(patched, out)
	if err != nil {
		return nil, fmt.Errorf("patched pod template does not decode: %w", err)
	}
	if len(strictErrs) > 0 {
		msgs := make([]string, len(strictErrs))
		for i, e := range strictErrs {
			msgs[i] = e.Error()
		}
		sort.Strings(msgs)
		return nil, fmt.Errorf("patched pod template has fields a pod does not: %s", strings.Join(msgs, "; "))
	}
	return out, nil
}

// ApplyNodeOverrides applies, in order, every override of the set whose
// node selector matches the node's labels to the pod's labels, annotations
// and spec, as the template-shaped document the overrides were validated
// against. The pod is modified in place.
func ApplyNodeOverrides(pod *corev1.Pod, overrides []everynodev1alpha1.NodeOverride, node *corev1.Node) error {
	for i := range overrides {
		o := &overrides[i]
		selector, err := metav1.LabelSelectorAsSelector(o.NodeSelector)
		if err != nil {
			return fmt.Errorf("spec.nodeOverrides[%d].nodeSelector: %w", i, err)
		}
		if o.NodeSelector == nil || !selector.Matches(labels.Set(node.Labels)) {
			continue
		}
		tmpl := &corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels, Annotations: pod.Annotations},
			Spec:       pod.Spec,
		}
		patched, err := ApplyOverride(tmpl, o.Patch.Raw, false)
		if err != nil {
			return fmt.Errorf("spec.nodeOverrides[%d].patch: %w", i, err)
		}
		pod.Labels, pod.Annotations, pod.Spec = patched.Labels, patched.Annotations, patched.Spec
	}
	return nil
}

// OverrideChanges names the fields eligibility reads (Eligibility: the
// nodeSelector, the required node affinity, the tolerations) that differ
// between a template's pod spec and one with overrides applied. Pod
// (anti-)affinity is not among them: eligibility never reads it.
func OverrideChanges(tmpl, patched *corev1.PodSpec) []string {
	var changed []string
	if !apiequality.Semantic.DeepEqual(tmpl.NodeSelector, patched.NodeSelector) {
		changed = append(changed, "nodeSelector")
	}
	var a, b *corev1.NodeAffinity
	if tmpl.Affinity != nil {
		a = tmpl.Affinity.NodeAffinity
	}
	if patched.Affinity != nil {
		b = patched.Affinity.NodeAffinity
	}
	if !apiequality.Semantic.DeepEqual(a, b) {
		changed = append(changed, "affinity.nodeAffinity")
	}
	if !apiequality.Semantic.DeepEqual(tmpl.Tolerations, patched.Tolerations) {
		changed = append(changed, "tolerations")
	}
	return changed
}
