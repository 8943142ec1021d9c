package controller

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement/revision"
)

// revisions returns the set's ControllerRevisions in the fake API server
// as "name:number", sorted by number.
func (f *fixture) revisions() []*appsv1.ControllerRevision {
	f.t.Helper()
	list, err := f.kube.AppsV1().ControllerRevisions(ns).List(f.ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []*appsv1.ControllerRevision
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	revision.SortByRevision(out)
	return out
}

func revNames(revs []*appsv1.ControllerRevision) []string {
	var out []string
	for _, r := range revs {
		out = append(out, fmt.Sprintf("%s:%d", r.Name, r.Revision))
	}
	return out
}

func TestRevisionCreated(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 1)
	ds := newSet("agent")
	ds.Annotations = map[string]string{
		everynodev1alpha1.AnnotationChangeCause:            "kubectl apply --record",
		"kubectl.kubernetes.io/last-applied-configuration": "{...}",
	}
	f.add(ds)
	f.mustSync(ds)

	revs := f.revisions()
	if len(revs) != 1 {
		t.Fatalf("revisions = %v, want one", revNames(revs))
	}
	rev, hash := revs[0], revisionHash(ds)
	if rev.Name != "agent-"+hash || rev.Revision != 1 || rev.Labels[revision.HashLabel] != hash || rev.Labels["app"] != "agent" {
		t.Errorf("revision %s:%d labels %v, want agent-%s:1 with the template labels and hash", rev.Name, rev.Revision, rev.Labels, hash)
	}
	if want := map[string]string{everynodev1alpha1.AnnotationChangeCause: "kubectl apply --record"}; !reflect.DeepEqual(rev.Annotations, want) {
		t.Errorf("annotations = %v, want %v", rev.Annotations, want)
	}
	ref := metav1.GetControllerOf(rev)
	if ref == nil || ref.UID != ds.UID || ref.Kind != "DaemonSet" || ref.APIVersion != "everynode.io/v1alpha1" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("controller ref = %+v", ref)
	}
	data, _ := revision.Data(ds)
	if string(rev.Data.Raw) != string(data) {
		t.Errorf("data = %s, want %s", rev.Data.Raw, data)
	}
	// Pods carry the hash.
	if p := f.podCreates(); len(p) != 1 || p[0].Labels[revision.HashLabel] != hash {
		t.Errorf("created pods %v, want one with hash %s", p, hash)
	}
}

func TestRevisionHistory(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 2)
	ds := newSet("agent")
	f.add(ds)
	f.settle(ds)
	f.runPods()
	v1 := revisionHash(ds)

	ds = f.changeTemplate(ds, "agent:2")
	f.rollout(ds, 2, 1)
	v2 := revisionHash(ds)
	if got, want := revNames(f.revisions()), []string{"agent-" + v1 + ":1", "agent-" + v2 + ":2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("revisions after update = %v, want %v", got, want)
	}

	// Rollback: the first revision is reused and becomes number 3.
	ds = f.changeTemplate(ds, "agent:1")
	ds.Annotations = map[string]string{everynodev1alpha1.AnnotationChangeCause: "rollback"}
	f.update(ds)
	f.rollout(ds, 2, 1)
	revs := f.revisions()
	if got, want := revNames(revs), []string{"agent-" + v2 + ":2", "agent-" + v1 + ":3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("revisions after rollback = %v, want %v", got, want)
	}
	if got := revs[1].Annotations[everynodev1alpha1.AnnotationChangeCause]; got != "rollback" {
		t.Errorf("change-cause of the reused revision = %q, want rollback", got)
	}
	if st := f.set(ds).Status; st.UpdateRevision != v1 || st.CurrentRevision != v1 || st.UpdatedNumberScheduled != 2 {
		t.Errorf("status revisions update=%s current=%s updated=%d, want %s/%s/2", st.UpdateRevision, st.CurrentRevision, st.UpdatedNumberScheduled, v1, v1)
	}
}

func TestRevisionCollision(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 1)
	ds := newSet("agent")
	f.add(ds)
	// Someone else's data under the name our hash gives.
	squatter := ds.DeepCopy()
	squatter.Spec.Template.Spec.Containers[0].Image = "other"
	rev, err := revision.New(squatter, revisionHash(ds), 1)
	if err != nil {
		t.Fatal(err)
	}
	rev.OwnerReferences = nil
	if err := f.kube.Tracker().Add(rev); err != nil { // in the server, not yet in the cache
		t.Fatal(err)
	}

	if err := f.sync(ds); err == nil {
		t.Fatal("sync succeeded despite a name collision")
	}
	if got := f.set(ds).Status.CollisionCount; got == nil || *got != 1 {
		t.Fatalf("collisionCount = %v, want 1", got)
	}
	if !hasEvent(f.events(), "Warning "+ReasonRevisionCollision) {
		t.Error("no RevisionCollision event")
	}
	f.syncCaches()
	f.mustSync(ds)
	fresh := f.set(ds)
	newHash := revisionHash(fresh)
	if newHash == revisionHash(ds) {
		t.Fatal("collisionCount did not change the hash")
	}
	var names []string
	for _, r := range f.revisions() {
		names = append(names, r.Name)
	}
	sort.Strings(names)
	if want := []string{"agent-" + newHash, rev.Name}; !sortedEqual(names, want) {
		t.Errorf("revisions = %v, want %v", names, want)
	}
	if p := f.podCreates(); len(p) != 1 || p[0].Labels[revision.HashLabel] != newHash {
		t.Errorf("pod not created with the new hash %s", newHash)
	}
}

func sortedEqual(a, b []string) bool {
	a, b = append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	return reflect.DeepEqual(a, b)
}

func TestRevisionCleanup(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 1)
	ds := newSet("agent")
	ds.Spec.RevisionHistoryLimit = ptr.To[int32](2)
	// Old revisions 1..5; a pod still runs revision 1.
	var oldHashes []string
	for i := 1; i <= 5; i++ {
		old := ds.DeepCopy()
		old.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("agent:old%d", i)
		h := revisionHash(old)
		rev, err := revision.New(old, h, int64(i))
		if err != nil {
			t.Fatal(err)
		}
		f.add(rev)
		oldHashes = append(oldHashes, h)
	}
	f.add(ds, newPod(ds, "node-0", oldHashes[0]))
	ds.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType // keep the old pod
	f.update(ds)
	f.mustSync(ds)

	var got []int64
	for _, r := range f.revisions() {
		got = append(got, r.Revision)
	}
	// Current is 6; of 1..5 only 2 may stay: 1 (live pod) and 5 (newest).
	if want := []int64{1, 5, 6}; !reflect.DeepEqual(got, want) {
		t.Errorf("revisions left = %v, want %v", got, want)
	}
	if st := f.set(ds).Status; st.CurrentRevision != oldHashes[0] {
		t.Errorf("currentRevision = %s, want the live old one %s", st.CurrentRevision, oldHashes[0])
	}
}

func TestRevisionDedup(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 1)
	ds := newSet("agent")
	hash := revisionHash(ds)
	a, _ := revision.New(ds, hash, 1)
	b, _ := revision.New(ds, "other", 2)
	b.Name = "agent-other"
	f.add(ds, a, b, newPod(ds, "node-0", hash))
	f.mustSync(ds)
	if got := revNames(f.revisions()); !reflect.DeepEqual(got, []string{"agent-other:2"}) {
		t.Errorf("revisions = %v, want only the highest duplicate", got)
	}
	var patched bool
	for _, act := range f.kube.Actions() {
		if act.GetVerb() == "patch" && act.GetResource().Resource == "pods" {
			patched = true
		}
	}
	if !patched {
		t.Error("pod of the dropped duplicate not relabelled")
	}
}

// Revisions stored by an everynode that wrote data in struct order (before
// canonical data) are replaced in place: same names, numbers and hash
// labels, data in canonical form, and no pod touched, so upgrading
// everynode starts no rolling update.
func TestLegacyRevisionDataIsReplaced(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 2)
	ds := newSet("agent")
	oldSet := ds.DeepCopy()
	oldSet.Spec.Template.Spec.Containers[0].Image = "agent:0"
	legacy := func(ds *everynodev1alpha1.DaemonSet, number int64) *appsv1.ControllerRevision {
		rev, err := revision.New(ds, revisionHash(ds), number)
		if err != nil {
			t.Fatal(err)
		}
		// Struct order, as everynode wrote it before: the pod template's
		// fields in Go order ("name" before "image").
		var err2 error
		rev.Data.Raw, err2 = json.Marshal(struct {
			Spec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}{Spec: struct {
			Template corev1.PodTemplateSpec `json:"template"`
		}{Template: ds.Spec.Template}})
		if err2 != nil {
			t.Fatal(err2)
		}
		if revision.IsCanonical(rev.Data.Raw) {
			t.Fatalf("test data %s is canonical already", rev.Data.Raw)
		}
		return rev
	}
	hash := revisionHash(ds)
	f.add(ds, legacy(oldSet, 1), legacy(ds, 2), newPod(ds, "node-0", hash), newPod(ds, "node-1", hash))
	f.mustSync(ds)

	revs := f.revisions()
	if got, want := revNames(revs), []string{"agent-" + revisionHash(oldSet) + ":1", "agent-" + hash + ":2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("revisions = %v, want %v", got, want)
	}
	for _, rev := range revs {
		if !revision.IsCanonical(rev.Data.Raw) {
			t.Errorf("revision %s still has data %s", rev.Name, rev.Data.Raw)
		}
		if ref := metav1.GetControllerOf(rev); ref == nil || ref.UID != ds.UID {
			t.Errorf("revision %s lost its owner: %v", rev.Name, ref)
		}
	}
	if want, _ := revision.Data(ds); string(revs[1].Data.Raw) != string(want) {
		t.Errorf("current revision data %s, want %s", revs[1].Data.Raw, want)
	}
	if c, d := f.podCreates(), f.podDeletes(); len(c) != 0 || len(d) != 0 {
		t.Errorf("pods created %d, deleted %v: an upgrade must not touch pods", len(c), d)
	}
	if st := f.set(ds).Status; st.UpdateRevision != hash || st.UpdatedNumberScheduled != 2 {
		t.Errorf("status update revision %s updated %d, want %s and 2", st.UpdateRevision, st.UpdatedNumberScheduled, hash)
	}
}
