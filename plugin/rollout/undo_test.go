package rollout

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement/revision"
)

var bigPool = []everynodev1alpha1.NodeOverride{{
	NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "big"}},
	Patch:        runtime.RawExtension{Raw: []byte(`{"spec":{"containers":[{"name":"app","image":"img:big"}]}}`)},
}}

func withOverrides(o []everynodev1alpha1.NodeOverride) func(*everynodev1alpha1.DaemonSet) {
	return func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.NodeOverrides = o }
}

func withCause(cause string) func(*everynodev1alpha1.DaemonSet) {
	return func(ds *everynodev1alpha1.DaemonSet) {
		metav1.SetMetaDataAnnotation(&ds.ObjectMeta, everynodev1alpha1.AnnotationChangeCause, cause)
	}
}

// undoFixture: fluentd at revision 3 ("image v3"), revision 2 had node
// overrides, revision 1 no change-cause.
func undoFixture(t *testing.T, edits ...func(*everynodev1alpha1.DaemonSet)) *fixture {
	base := newSet("fluentd", "img:v3", withCause("image v3"))
	revs := []*appsv1.ControllerRevision{
		newRevision(t, base, 1, "img:v1", ""),
		newRevision(t, base, 2, "img:v2", "image v2", withOverrides(bigPool)),
		newRevision(t, base, 3, "img:v3", "image v3"),
	}
	ds := base.DeepCopy()
	for _, e := range edits {
		e(ds)
	}
	return newFixture(ds, revs[0], revs[1], revs[2])
}

func TestUndo(t *testing.T) {
	tests := map[string]struct {
		fixture   func(*testing.T) *fixture
		args      []string
		wantOut   string
		wantHas   []string
		wantErr   error
		wantImage string // of the set afterwards ("" : unchanged)
		wantCause string // of the set afterwards, when wantImage is set
		wantOver  bool   // node overrides present afterwards
		wantDry   bool   // the update was a server dry run
	}{
		"previous revision": {
			fixture:   func(t *testing.T) *fixture { return undoFixture(t) },
			args:      []string{"fluentd"},
			wantOut:   "daemonset.everynode.io/fluentd rolled back\n",
			wantImage: "img:v2", wantCause: "image v2", wantOver: true,
		},
		"to revision 1 drops the change-cause and the overrides": {
			fixture:   func(t *testing.T) *fixture { return undoFixture(t, withOverrides(bigPool)) },
			args:      []string{"daemonset/fluentd", "--to-revision=1"},
			wantOut:   "daemonset.everynode.io/fluentd rolled back\n",
			wantImage: "img:v1", wantCause: "",
		},
		"already there": {
			fixture: func(t *testing.T) *fixture { return undoFixture(t) },
			args:    []string{"fluentd", "--to-revision=3"},
			wantOut: "daemonset.everynode.io/fluentd skipped rollback (current template already matches revision 3)\n",
		},
		"already there but for the hash label and the cause": {
			fixture: func(t *testing.T) *fixture {
				return undoFixture(t, withCause("edited"), func(ds *everynodev1alpha1.DaemonSet) {
					ds.Spec.Template.Labels[revision.HashLabel] = "abc"
				})
			},
			args:    []string{"fluentd", "--to-revision=3"},
			wantOut: "daemonset.everynode.io/fluentd skipped rollback (current template already matches revision 3)\n",
		},
		"other overrides are a different revision": {
			fixture:   func(t *testing.T) *fixture { return undoFixture(t, withOverrides(bigPool)) },
			args:      []string{"fluentd", "--to-revision=3"},
			wantOut:   "daemonset.everynode.io/fluentd rolled back\n",
			wantImage: "img:v3", wantCause: "image v3",
		},
		"client dry run changes nothing and shows the template": {
			fixture: func(t *testing.T) *fixture { return undoFixture(t) },
			args:    []string{"fluentd", "--to-revision=1", "--dry-run=client"},
			wantHas: []string{"daemonset.everynode.io/fluentd will roll back to Pod Template:\n", "img:v1", " (dry run)\n"},
		},
		"client dry run as an object": {
			fixture: func(t *testing.T) *fixture { return undoFixture(t) },
			args:    []string{"fluentd", "--dry-run", "-o", "jsonpath={.spec.template.spec.containers[0].image}"},
			wantOut: "img:v2",
		},
		"server dry run": {
			fixture: func(t *testing.T) *fixture { return undoFixture(t) },
			args:    []string{"fluentd", "--dry-run=server"},
			wantOut: "daemonset.everynode.io/fluentd rolled back (server dry run)\n",
			// The fake persists dry runs: what matters is the option.
			wantImage: "img:v2", wantCause: "image v2", wantOver: true, wantDry: true,
		},
		"unknown revision": {
			fixture: func(t *testing.T) *fixture { return undoFixture(t) },
			args:    []string{"fluentd", "--to-revision=9"},
			wantErr: errUnknownRevision,
		},
		"no history": {
			fixture: func(*testing.T) *fixture { return newFixture(newSet("fluentd", "img:v1")) },
			args:    []string{"fluentd"},
			wantErr: errNoHistory,
		},
		"no previous revision": {
			fixture: func(t *testing.T) *fixture {
				ds := newSet("fluentd", "img:v1")
				return newFixture(ds, newRevision(t, ds, 1, "img:v1", ""))
			},
			args:    []string{"fluentd"},
			wantErr: errNoPreviousRevision,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := tc.fixture(t)
			before := f.set(t, "fluentd")
			out, _, err := f.run(t, append([]string{"undo"}, tc.args...)...)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if n := len(f.writes("update")); n != 0 {
					t.Errorf("%d updates after an error", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantOut != "" && out != tc.wantOut {
				t.Errorf("printed %q, want %q", out, tc.wantOut)
			}
			mustContain(t, out, tc.wantHas...)

			updates := f.writes("update")
			after := f.set(t, "fluentd")
			if tc.wantImage == "" {
				if len(updates) != 0 || !apiequalitySets(before, after) {
					t.Fatalf("set changed (%d updates)", len(updates))
				}
				return
			}
			if len(updates) != 1 {
				t.Fatalf("%d updates, want 1", len(updates))
			}
			u := updates[0].(clienttesting.UpdateActionImpl)
			if got := u.Object.(*everynodev1alpha1.DaemonSet).ResourceVersion; got != before.ResourceVersion {
				t.Errorf("update with resourceVersion %q, want the one read, %q", got, before.ResourceVersion)
			}
			if dry := len(u.UpdateOptions.DryRun) == 1 && u.UpdateOptions.DryRun[0] == metav1.DryRunAll; dry != tc.wantDry {
				t.Errorf("dry run = %v, want %v", dry, tc.wantDry)
			}
			if u.UpdateOptions.FieldManager != fieldManager {
				t.Errorf("field manager %q", u.UpdateOptions.FieldManager)
			}
			if got := after.Spec.Template.Spec.Containers[0].Image; got != tc.wantImage {
				t.Errorf("image %q, want %q", got, tc.wantImage)
			}
			if got := after.Annotations[everynodev1alpha1.AnnotationChangeCause]; got != tc.wantCause {
				t.Errorf("change-cause %q, want %q", got, tc.wantCause)
			}
			if got := len(after.Spec.NodeOverrides) > 0; got != tc.wantOver {
				t.Errorf("node overrides present = %v, want %v", got, tc.wantOver)
			}
			if after.Spec.Selector == nil || after.Spec.UpdateStrategy.Type != before.Spec.UpdateStrategy.Type {
				t.Error("undo changed more than the template, overrides and cause")
			}
		})
	}
}

func apiequalitySets(a, b *everynodev1alpha1.DaemonSet) bool {
	return a.ResourceVersion == b.ResourceVersion && a.Spec.Template.Spec.Containers[0].Image == b.Spec.Template.Spec.Containers[0].Image
}

func TestUndoRetriesAConflictOnAFreshRead(t *testing.T) {
	f := undoFixture(t)
	conflicts := 1
	f.everynode.PrependReactor("update", "daemonsets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		// Someone else changed the set meanwhile.
		// The tracker, not the client: the fake holds its lock while
		// reactors run.
		gvr := everynodev1alpha1.SchemeGroupVersion.WithResource("daemonsets")
		obj, err := f.everynode.Tracker().Get(gvr, testNamespace, "fluentd")
		if err != nil {
			t.Fatal(err)
		}
		ds := obj.(*everynodev1alpha1.DaemonSet).DeepCopy()
		ds.ResourceVersion = "2"
		ds.Spec.MinReadySeconds = 30
		if err := f.everynode.Tracker().Update(gvr, ds, ds.Namespace); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewConflict(everynodev1alpha1.Resource("daemonsets"), "fluentd", errors.New("the object has been modified"))
	})
	out, _, err := f.run(t, "undo", "fluentd")
	if err != nil {
		t.Fatal(err)
	}
	if out != "daemonset.everynode.io/fluentd rolled back\n" {
		t.Errorf("printed %q", out)
	}
	updates := f.writes("update")
	if len(updates) != 2 {
		t.Fatalf("%d updates, want 2", len(updates))
	}
	second := updates[1].(clienttesting.UpdateActionImpl).Object.(*everynodev1alpha1.DaemonSet)
	if second.ResourceVersion != "2" || second.Spec.MinReadySeconds != 30 {
		t.Errorf("retry did not start from a fresh read: rv %q minReadySeconds %d", second.ResourceVersion, second.Spec.MinReadySeconds)
	}
	if img := f.set(t, "fluentd").Spec.Template.Spec.Containers[0].Image; img != "img:v2" {
		t.Errorf("image %q after retry", img)
	}
}

func TestUndoMessages(t *testing.T) {
	f := undoFixture(t, func(ds *everynodev1alpha1.DaemonSet) {
		ds.Annotations[corev1.LastAppliedConfigAnnotation] = "{}"
	})
	_, stderr, err := f.run(t, "undo", "fluentd", "--to-revision=9")
	want := `roll back daemon set "fluentd": unknown revision 9: daemon set "fluentd" has revisions 1, 2, 3`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	mustContain(t, stderr, "Warning: resource daemonsets.everynode.io/fluentd was previously managed with 'kubectl apply'")

	f = newFixture(newSet("fluentd", "img:v1"))
	_, _, err = f.run(t, "undo", "fluentd")
	if err == nil || !strings.Contains(err.Error(), `daemon set "fluentd" has no rollout history: no ControllerRevision in namespace "ns1" is controlled by it`) {
		t.Errorf("no history: err = %v", err)
	}
	for _, args := range [][]string{
		{"undo", "fluentd", "--dry-run=maybe"},
		{"undo", "fluentd", "--to-revision=-2"},
		{"undo"},
		{"undo", "fluentd", "-l", "app=x"},
		{"undo", "fluentd", "-A"},
		{"undo", "-l", "app in (x"},
	} {
		if _, _, err := f.run(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

func TestSameRevision(t *testing.T) {
	reformatted := []everynodev1alpha1.NodeOverride{{
		NodeSelector: bigPool[0].NodeSelector,
		Patch:        runtime.RawExtension{Raw: []byte("{ \"spec\": {\"containers\": [{\"image\": \"img:big\", \"name\": \"app\"}]} }")},
	}}
	tests := map[string]struct {
		a, b *everynodev1alpha1.DaemonSet
		want bool
	}{
		"equal":                    {newSet("x", "img:v1"), newSet("x", "img:v1"), true},
		"other image":              {newSet("x", "img:v1"), newSet("x", "img:v2"), false},
		"set metadata is not part": {newSet("x", "img:v1", withCause("a")), newSet("x", "img:v1", withCause("b")), true},
		"hash label ignored": {newSet("x", "img:v1"), newSet("x", "img:v1", func(ds *everynodev1alpha1.DaemonSet) {
			ds.Spec.Template.Labels[revision.HashLabel] = "abc"
		}), true},
		"nil and empty annotations": {newSet("x", "img:v1"), newSet("x", "img:v1", func(ds *everynodev1alpha1.DaemonSet) {
			ds.Spec.Template.Annotations = map[string]string{}
		}), true},
		"overrides differ":              {newSet("x", "img:v1"), newSet("x", "img:v1", withOverrides(bigPool)), false},
		"overrides formatted otherwise": {newSet("x", "img:v1", withOverrides(bigPool)), newSet("x", "img:v1", withOverrides(reformatted)), true},
		"nil and empty overrides":       {newSet("x", "img:v1"), newSet("x", "img:v1", withOverrides([]everynodev1alpha1.NodeOverride{})), true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := sameRevision(tc.a, tc.b); got != tc.want {
				t.Errorf("sameRevision = %v, want %v", got, tc.want)
			}
		})
	}
}
