package revision

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/dump"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

func testSet() *everynodev1alpha1.DaemonSet {
	return &everynodev1alpha1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default", UID: "u1",
			Annotations: map[string]string{everynodev1alpha1.AnnotationChangeCause: "v2", "other": "x"}},
		Spec: everynodev1alpha1.DaemonSetSpec{
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}},
			},
		},
	}
}

// override's patch has its keys sorted, as every set read from the API
// server has: a custom resource is stored as a map.
var override = everynodev1alpha1.NodeOverride{
	NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "big"}},
	Patch:        runtime.RawExtension{Raw: []byte(`{"spec":{"containers":[{"image":"agent:big","name":"agent"}]}}`)},
}

// upstreamHash is k8s.io/kubernetes/pkg/controller.ComputeHash, restated.
func upstreamHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	h.Reset()
	fmt.Fprintf(h, "%v", dump.ForHash(*template))
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		h.Write(b)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

func TestHash(t *testing.T) {
	base := testSet()
	image := testSet()
	image.Spec.Template.Spec.Containers[0].Image = "agent:2"
	withOverride := testSet()
	withOverride.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override}

	if got, want := HashOf(base), upstreamHash(&base.Spec.Template, nil); got != want {
		t.Errorf("hash without overrides = %s, want upstream's %s", got, want)
	}
	if got, want := Hash(&base.Spec.Template, nil, ptr.To[int32](3)), upstreamHash(&base.Spec.Template, ptr.To[int32](3)); got != want {
		t.Errorf("hash with collisionCount = %s, want upstream's %s", got, want)
	}
	distinct := map[string]string{
		"base":           HashOf(base),
		"image":          HashOf(image),
		"override":       HashOf(withOverride),
		"collision 1":    Hash(&base.Spec.Template, nil, ptr.To[int32](1)),
		"collision 2":    Hash(&base.Spec.Template, nil, ptr.To[int32](2)),
		"override, col.": Hash(&base.Spec.Template, withOverride.Spec.NodeOverrides, ptr.To[int32](1)),
	}
	seen := map[string]string{}
	for name, h := range distinct {
		if other, dup := seen[h]; dup {
			t.Errorf("%s and %s hash alike (%s)", name, other, h)
		}
		seen[h] = name
	}
	if HashOf(base) != HashOf(testSet()) {
		t.Error("hash is not stable")
	}
}

func TestDataApplyRoundTrip(t *testing.T) {
	tests := map[string]struct {
		overrides     []everynodev1alpha1.NodeOverride
		wantInData    string
		wantNotInData string
	}{
		"without overrides": {wantInData: `{"spec":{"template":`, wantNotInData: "nodeOverrides"},
		"with overrides":    {overrides: []everynodev1alpha1.NodeOverride{override}, wantInData: `{"spec":{"nodeOverrides":[{"nodeSelector":{"matchLabels":{"pool":"big"}},"patch":{"spec"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ds := testSet()
			ds.Spec.NodeOverrides = tc.overrides
			data, err := Data(ds)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), tc.wantInData) {
				t.Errorf("data %s does not contain %s", data, tc.wantInData)
			}
			if tc.wantNotInData != "" && strings.Contains(string(data), tc.wantNotInData) {
				t.Errorf("data %s contains %s", data, tc.wantNotInData)
			}
			// Restore onto a set that has moved on.
			target := testSet()
			target.Spec.Template.Spec.Containers[0].Image = "agent:9"
			target.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{{NodeSelector: &metav1.LabelSelector{}}}
			if err := Apply(data, target); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(target.Spec.Template, ds.Spec.Template) || !reflect.DeepEqual(target.Spec.NodeOverrides, ds.Spec.NodeOverrides) {
				t.Errorf("restored template %+v overrides %+v, want %+v %+v", target.Spec.Template, target.Spec.NodeOverrides, ds.Spec.Template, ds.Spec.NodeOverrides)
			}
			if HashOf(target) != HashOf(ds) {
				t.Error("restored set hashes differently")
			}
		})
	}
	bad := testSet()
	if err := Apply([]byte("{"), bad); err == nil || !reflect.DeepEqual(bad, testSet()) {
		t.Errorf("Apply of bad data = %v and changed the set", err)
	}
	// Upstream writes the template with "$patch":"replace"; that still applies.
	ds := testSet()
	if err := Apply([]byte(`{"spec":{"template":{"$patch":"replace","spec":{"containers":[{"name":"x","image":"y"}]}}}}`), ds); err != nil || ds.Spec.Template.Spec.Containers[0].Image != "y" {
		t.Errorf("Apply of upstream-style data: %v, image %s", err, ds.Spec.Template.Spec.Containers[0].Image)
	}
}

func TestMatch(t *testing.T) {
	ds := testSet()
	data, _ := Data(ds)
	other := testSet()
	other.Spec.Template.Spec.Containers[0].Image = "agent:2"
	otherData, _ := Data(other)
	var indented bytes.Buffer
	if err := json.Indent(&indented, data, "", "  "); err != nil {
		t.Fatal(err)
	}
	// The same template as the apps/v1 kind stores it (upstream's format).
	asApps := testSet()
	asApps.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}
	appsData, _ := Data(asApps)
	if bytes.Equal(appsData, data) || !bytes.Contains(appsData, []byte(`"$patch":"replace"`)) {
		t.Fatalf("apps/v1 data %s, want the template with upstream's replace directive", appsData)
	}
	otherAsApps := other.DeepCopy()
	otherAsApps.TypeMeta = asApps.TypeMeta
	otherAppsData, _ := Data(otherAsApps)
	tests := map[string]struct {
		raw  []byte
		want bool
	}{
		"same bytes":                             {data, true},
		"written by the apps/v1 kind (migrated)": {appsData, true},
		"other template, apps/v1 kind":           {otherAppsData, false},
		"JSON null":                              {[]byte("null"), false},
		"same JSON, reformatted":                 {indented.Bytes(), true},
		"other template":                         {otherData, false},
		"garbage":                                {[]byte("nope"), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Match(ds, &appsv1.ControllerRevision{Data: runtime.RawExtension{Raw: tc.raw}})
			if err != nil || got != tc.want {
				t.Errorf("Match = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestName(t *testing.T) {
	if got := Name("agent", "abc"); got != "agent-abc" {
		t.Errorf("Name = %s", got)
	}
	long := strings.Repeat("a", 250)
	if got := Name(long, "abc"); len(got) != maxNamePrefix+4 || !strings.HasSuffix(got, "-abc") {
		t.Errorf("Name of a long set = %d chars", len(got))
	}
}

func TestNew(t *testing.T) {
	ds := testSet()
	rev, err := New(ds, "h1", 4)
	if err != nil {
		t.Fatal(err)
	}
	if rev.Name != "agent-h1" || rev.Namespace != "default" || rev.Revision != 4 {
		t.Errorf("rev %s/%s:%d", rev.Namespace, rev.Name, rev.Revision)
	}
	if want := map[string]string{"app": "agent", HashLabel: "h1"}; !reflect.DeepEqual(rev.Labels, want) {
		t.Errorf("labels = %v, want %v", rev.Labels, want)
	}
	if want := map[string]string{everynodev1alpha1.AnnotationChangeCause: "v2"}; !reflect.DeepEqual(rev.Annotations, want) {
		t.Errorf("annotations = %v, want only the change-cause %v", rev.Annotations, want)
	}
	if ds.Spec.Template.Labels[HashLabel] != "" {
		t.Error("New changed the set's template labels")
	}
	ref := metav1.GetControllerOf(rev)
	if ref == nil || ref.APIVersion != "everynode.io/v1alpha1" || ref.Kind != "DaemonSet" || ref.UID != "u1" {
		t.Errorf("owner = %+v", ref)
	}
}

func TestToDelete(t *testing.T) {
	revs := func(nums ...int64) []*appsv1.ControllerRevision {
		var out []*appsv1.ControllerRevision
		for _, n := range nums {
			out = append(out, &appsv1.ControllerRevision{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("r", n), Labels: map[string]string{HashLabel: fmt.Sprint("h", n)}},
				Revision:   n,
			})
		}
		return out
	}
	tests := map[string]struct {
		old  []*appsv1.ControllerRevision
		keep int
		live map[string]bool
		want []string
	}{
		"within the limit":         {old: revs(1, 2), keep: 2},
		"oldest go first":          {old: revs(3, 1, 2), keep: 1, want: []string{"r1", "r2"}},
		"live revisions are kept":  {old: revs(1, 2, 3), keep: 1, live: map[string]bool{"h1": true}, want: []string{"r2", "r3"}},
		"all live: none deleted":   {old: revs(1, 2), keep: 0, live: map[string]bool{"h1": true, "h2": true}},
		"limit 0 deletes all dead": {old: revs(1, 2), keep: 0, want: []string{"r1", "r2"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, r := range ToDelete(tc.old, tc.keep, tc.live) {
				got = append(got, r.Name)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ToDelete = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCanonical(t *testing.T) {
	tests := map[string]struct {
		in, want string
		wantErr  bool
	}{
		"keys sorted at every level": {in: `{"b":1,"a":{"d":[{"z":1,"y":2}],"c":null}}`, want: `{"a":{"c":null,"d":[{"y":2,"z":1}]},"b":1}`},
		"spacing removed":            {in: " {\"a\" : [ 1, 2 ] }\n", want: `{"a":[1,2]}`},
		"numbers as the API server":  {in: `{"n":9007199254740993,"f":1.50,"e":1e3}`, want: `{"e":1000,"f":1.5,"n":9007199254740993}`},
		"strings escaped as Marshal": {in: `{"s":"<a&b>"}`, want: `{"s":"\u003ca\u0026b\u003e"}`},
		"not JSON":                   {in: `{"a":`, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Canonical([]byte(tc.in))
			if tc.wantErr {
				if err == nil {
					t.Fatalf("Canonical(%s) = %s, want an error", tc.in, got)
				}
				if IsCanonical([]byte(tc.in)) {
					t.Fatalf("IsCanonical(%s) = true for data that does not parse", tc.in)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("Canonical(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
			}
			if !IsCanonical(got) {
				t.Fatalf("IsCanonical(%s) = false for Canonical's own output", got)
			}
			if tc.in != tc.want && IsCanonical([]byte(tc.in)) {
				t.Fatalf("IsCanonical(%s) = true, want false", tc.in)
			}
		})
	}
}

// The garbage collector orphans a revision with a strategic merge patch
// of its owner references. The API server applies it to the object turned
// into a map and back, and refuses the result if data changed by a single
// byte. Data must come out of that round trip as it went in. The struct
// encoding everynode wrote before (fields in struct order) does not, which
// is the bug this guards.
func TestDataSurvivesTheGarbageCollectorsPatch(t *testing.T) {
	ds := testSet()
	ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override}
	ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	rev, err := New(ds, "h1", 1)
	if err != nil {
		t.Fatal(err)
	}
	// What the garbage collector sends to orphan a dependent
	// (GenerateDeleteOwnerRefStrategicMergeBytes), applied as the API
	// server's strategicPatchObject does.
	patch := map[string]interface{}{"metadata": map[string]interface{}{
		"ownerReferences": []interface{}{map[string]interface{}{"$patch": "delete", "uid": string(ds.UID)}},
		"uid":             "r1",
	}}
	roundTrip := func(rev *appsv1.ControllerRevision) []byte {
		t.Helper()
		rev = rev.DeepCopy()
		rev.UID = "r1"
		original, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rev)
		if err != nil {
			t.Fatal(err)
		}
		patched, err := strategicpatch.StrategicMergeMapPatch(original, patch, &appsv1.ControllerRevision{})
		if err != nil {
			t.Fatal(err)
		}
		var out appsv1.ControllerRevision
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(patched, &out); err != nil {
			t.Fatal(err)
		}
		if len(out.OwnerReferences) != 0 {
			t.Fatalf("owner references %v left after the patch", out.OwnerReferences)
		}
		return out.Data.Raw
	}
	if got := roundTrip(rev); !bytes.Equal(got, rev.Data.Raw) {
		t.Errorf("data changed by the patch:\n got %s\nwant %s", got, rev.Data.Raw)
	}

	legacy := rev.DeepCopy()
	legacy.Data.Raw, _ = json.Marshal(data{Spec: dataSpec{Template: ds.Spec.Template, NodeOverrides: ds.Spec.NodeOverrides}})
	if IsCanonical(legacy.Data.Raw) {
		t.Fatalf("the struct encoding counts as canonical: %s", legacy.Data.Raw)
	}
	if got := roundTrip(legacy); bytes.Equal(got, legacy.Data.Raw) {
		t.Errorf("the struct encoding survived the patch; this test no longer shows the bug it guards")
	}
	if !MatchData(legacy.Data.Raw, rev.Data.Raw) {
		t.Errorf("the struct and canonical encodings of one set do not match as JSON")
	}
}
