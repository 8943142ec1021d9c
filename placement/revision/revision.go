// Package revision holds the ControllerRevision rules the controller and the
// kubectl plugin share: the revision hash, the revision name, and the Data a
// revision stores, with the inverse that restores a set from it. The
// controller writes revisions with these functions and the plugin reads
// them back (rollout history and undo), so both agree on one format.
//
// The format follows the built-in DaemonSet controller, extended by
// everynode's spec.nodeOverrides because they, too, change the pods a
// revision makes:
//
//	{"spec":{"nodeOverrides":<list, omitted when empty>,"template":<pod template>}}
//
// The bytes are canonical JSON: compact, with the keys of every object
// sorted, as upstream writes them (it marshals a map, not a struct). Data is
// immutable in the API server, which compares it byte for byte, and other
// clients rewrite it in that form: the garbage collector removes an owner
// reference with a JSON merge patch, which re-encodes the object. Data in
// any other key order makes that patch a change of data, which the API
// server refuses, and `kubectl delete --cascade=orphan` of the set never
// finishes. Revisions stored by everynode before it wrote canonical data
// are replaced by the controller (Canonical tells them apart).
package revision

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"reflect"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/dump"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// HashLabel is the label that carries a revision's hash on the
// ControllerRevision and on every pod made from it, as upstream.
const HashLabel = appsv1.DefaultDaemonSetUniqueLabelKey

// maxNamePrefix keeps `<prefix>-<hash>` within the 253 characters of an
// object name, as upstream history.ControllerRevisionName does.
const maxNamePrefix = 223

// Hash returns the revision hash of a pod template and its node overrides,
// as upstream controller.ComputeHash: fnv32a over the deep-printed template,
// then (everynode only, and only when there are any) the deep-printed
// overrides, then the collision count, encoded with rand.SafeEncodeString.
// A set without overrides therefore hashes exactly as an apps/v1 DaemonSet
// with the same template would.
func Hash(template *corev1.PodTemplateSpec, overrides []everynodev1alpha1.NodeOverride, collisionCount *int32) string {
	hasher := fnv.New32a()
	// Written by hand rather than with upstream's DeepHashObject, which
	// resets the hasher and so cannot hash two objects in sequence.
	fmt.Fprintf(hasher, "%v", dump.ForHash(*template))
	if len(overrides) > 0 {
		fmt.Fprintf(hasher, "%v", dump.ForHash(overrides))
	}
	if collisionCount != nil {
		buf := make([]byte, 8)
		binary.LittleEndian.PutUint32(buf, uint32(*collisionCount))
		hasher.Write(buf)
	}
	return rand.SafeEncodeString(fmt.Sprint(hasher.Sum32()))
}

// HashOf is Hash of a set's template and node overrides with the set's
// current collision count.
func HashOf(ds *everynodev1alpha1.DaemonSet) string {
	return Hash(&ds.Spec.Template, ds.Spec.NodeOverrides, ds.Status.CollisionCount)
}

// Name returns the ControllerRevision name for a set and hash:
// `<set>-<hash>`, the set name cut so the result is a valid name.
func Name(setName, hash string) string {
	if len(setName) > maxNamePrefix {
		setName = setName[:maxNamePrefix]
	}
	return setName + "-" + hash
}

// data is the JSON shape stored in ControllerRevision.Data.
type data struct {
	Spec dataSpec `json:"spec"`
}

type dataSpec struct {
	Template      corev1.PodTemplateSpec           `json:"template"`
	NodeOverrides []everynodev1alpha1.NodeOverride `json:"nodeOverrides,omitempty"`
}

// Data returns what a ControllerRevision of ds stores: the pod template and
// the node overrides, the parts of the spec a rollback restores, in
// canonical JSON.
//
// For a set converted from apps/v1 (placement.IsApps) it is upstream's own
// format instead, byte for byte: the template marked "$patch": "replace",
// a strategic merge patch of the set that `kubectl rollout undo
// daemonset/x` applies as it is, and that upstream's daemon.Match (which
// its e2e suite uses to find the current revision) compares by bytes.
func Data(ds *everynodev1alpha1.DaemonSet) ([]byte, error) {
	raw, err := json.Marshal(data{Spec: dataSpec{Template: ds.Spec.Template, NodeOverrides: ds.Spec.NodeOverrides}})
	if err == nil && placement.IsApps(ds) {
		raw, err = withReplaceDirective(raw)
	}
	if err == nil {
		raw, err = Canonical(raw)
	}
	if err != nil {
		return nil, fmt.Errorf("encode revision data of %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	return raw, nil
}

// withReplaceDirective adds "$patch": "replace" to the template of raw
// revision data, as upstream's getPatch writes it.
func withReplaceDirective(raw []byte) ([]byte, error) {
	var d struct {
		Spec struct {
			Template map[string]any `json:"template"`
		} `json:"spec"`
	}
	if err := utiljson.Unmarshal(raw, &d); err != nil {
		return nil, err
	}
	d.Spec.Template["$patch"] = "replace"
	return json.Marshal(d)
}

// Canonical returns raw re-encoded as canonical JSON: compact, object keys
// sorted at every level, integers as integers. It is what the API server
// writes back when it applies a strategic merge patch to a revision (the
// garbage collector's way to remove an owner reference): it turns the
// object into a map (k8s.io/apimachinery/pkg/util/json keeps integers
// int64) and encodes the map again, so data in this form survives one
// unchanged.
func Canonical(raw []byte) ([]byte, error) {
	var v interface{}
	if err := utiljson.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("decode revision data: %w", err)
	}
	// encoding/json writes map keys sorted.
	return json.Marshal(v)
}

// IsCanonical reports whether raw is already in canonical form. Data that
// does not parse is not, and cannot be made so either.
func IsCanonical(raw []byte) bool {
	c, err := Canonical(raw)
	return err == nil && bytes.Equal(c, raw)
}

// Apply restores the template and node overrides stored in revision data
// onto ds, the inverse of Data: a rollback is Apply of an old revision's
// Data followed by an update of the set. Data without nodeOverrides clears
// them, since the revision was made without any. ds is changed only when
// data parses.
func Apply(raw []byte, ds *everynodev1alpha1.DaemonSet) error {
	var d data
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("decode revision data: %w", err)
	}
	ds.Spec.Template = d.Spec.Template
	ds.Spec.NodeOverrides = d.Spec.NodeOverrides
	return nil
}

// InPlaceTo reports whether pods of the revision whose data is raw can be
// moved to ds's template in place: the templates differ only in images
// (placement.ImagesOnlyChange) and the node overrides are the same.
func InPlaceTo(raw []byte, ds *everynodev1alpha1.DaemonSet) (bool, error) {
	var d data
	if err := json.Unmarshal(raw, &d); err != nil {
		return false, fmt.Errorf("decode revision data: %w", err)
	}
	return placement.ImagesOnlyChange(&d.Spec.Template, &ds.Spec.Template) &&
		equality.Semantic.DeepEqual(d.Spec.NodeOverrides, ds.Spec.NodeOverrides), nil
}

// Match reports whether rev stores the template and node overrides of ds.
// Byte equality is the fast path; otherwise both are compared as decoded
// JSON, so a revision whose data was re-serialized (key order, spacing) by
// another writer still matches.
func Match(ds *everynodev1alpha1.DaemonSet, rev *appsv1.ControllerRevision) (bool, error) {
	want, err := Data(ds)
	if err != nil {
		return false, err
	}
	return MatchData(want, rev.Data.Raw), nil
}

// MatchData reports whether two revision data documents are equal as JSON,
// with or without upstream's "$patch": "replace" on the template: a set
// moved between the apps/v1 kind and everynode's (kubectl everynode
// migrate) keeps the revisions the other kind wrote, and the one that
// holds its template is its current revision, not a name collision that
// would change the hash and replace every pod.
func MatchData(want, have []byte) bool {
	if bytes.Equal(want, have) {
		return true
	}
	var a, b interface{}
	if json.Unmarshal(want, &a) != nil || json.Unmarshal(have, &b) != nil {
		return false
	}
	return reflect.DeepEqual(withoutReplaceDirective(a), withoutReplaceDirective(b))
}

// withoutReplaceDirective drops "$patch" from spec.template of decoded
// revision data, in place.
func withoutReplaceDirective(v interface{}) interface{} {
	obj, _ := v.(map[string]interface{})
	if spec, ok := obj["spec"].(map[string]interface{}); ok {
		if tmpl, ok := spec["template"].(map[string]interface{}); ok {
			delete(tmpl, "$patch")
		}
	}
	return v
}

// MaxRevision returns the highest Revision number among revs, 0 if none.
func MaxRevision(revs []*appsv1.ControllerRevision) int64 {
	var highest int64
	for _, r := range revs {
		if r.Revision > highest {
			highest = r.Revision
		}
	}
	return highest
}

// SortByRevision sorts revs oldest first: by Revision number, then name so
// the order is total.
func SortByRevision(revs []*appsv1.ControllerRevision) {
	sort.Slice(revs, func(i, j int) bool {
		if revs[i].Revision != revs[j].Revision {
			return revs[i].Revision < revs[j].Revision
		}
		return revs[i].Name < revs[j].Name
	})
}

// ToDelete returns the old revisions that a history limit of keep removes:
// the oldest first, skipping those whose hash is still used by a live pod
// (liveHashes), until no more than keep old revisions are left or only
// live ones remain. old is not modified.
func ToDelete(old []*appsv1.ControllerRevision, keep int, liveHashes map[string]bool) []*appsv1.ControllerRevision {
	toKill := len(old) - keep
	if toKill <= 0 {
		return nil
	}
	sorted := append([]*appsv1.ControllerRevision(nil), old...)
	SortByRevision(sorted)
	var out []*appsv1.ControllerRevision
	for _, r := range sorted {
		if toKill <= 0 {
			break
		}
		if liveHashes[r.Labels[HashLabel]] {
			continue
		}
		out = append(out, r)
		toKill--
	}
	return out
}

// New builds the ControllerRevision of ds with the given hash and revision
// number, as upstream's snapshot: name `<set>-<hash>`, the template's labels
// plus the hash label, the set as controlling owner, and the set's
// kubernetes.io/change-cause annotation (only that one: copying every
// annotation, as upstream does, would copy last-applied-configuration too).
func New(ds *everynodev1alpha1.DaemonSet, hash string, number int64) (*appsv1.ControllerRevision, error) {
	raw, err := Data(ds)
	if err != nil {
		return nil, err
	}
	labels := make(map[string]string, len(ds.Spec.Template.Labels)+1)
	for k, v := range ds.Spec.Template.Labels {
		labels[k] = v
	}
	labels[HashLabel] = hash
	var annotations map[string]string
	if cause, ok := ds.Annotations[everynodev1alpha1.AnnotationChangeCause]; ok {
		annotations = map[string]string{everynodev1alpha1.AnnotationChangeCause: cause}
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            Name(ds.Name, hash),
			Namespace:       ds.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{placement.NewControllerRef(ds)},
		},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: number,
	}, nil
}
