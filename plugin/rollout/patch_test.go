package rollout

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

var restartTime = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

func paused(ds *everynodev1alpha1.DaemonSet) {
	ds.Spec.UpdateStrategy.RollingUpdate = &everynodev1alpha1.RollingUpdateDaemonSet{Paused: true}
}

func onDelete(ds *everynodev1alpha1.DaemonSet) {
	ds.Spec.UpdateStrategy.Type = appsv1.OnDeleteDaemonSetStrategyType
}

// failedOn is a set whose rollout of revision hash paused itself.
func failedOn(hash string) func(*everynodev1alpha1.DaemonSet) {
	return func(ds *everynodev1alpha1.DaemonSet) {
		ds.Status.UpdateRevision = hash
		ds.Status.RolloutFailure = &everynodev1alpha1.RolloutFailure{Revision: hash, Action: everynodev1alpha1.RolloutFailurePause}
	}
}

func TestPatches(t *testing.T) {
	tests := map[string]struct {
		ds      *everynodev1alpha1.DaemonSet
		build   func(*everynodev1alpha1.DaemonSet) ([]byte, error)
		want    string // the patch; "" for none
		wantErr string
	}{
		"restart": {
			ds:    newSet("x", "img:v1"),
			build: func(ds *everynodev1alpha1.DaemonSet) ([]byte, error) { return restartPatch(ds, restartTime) },
			want:  `{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":"2026-03-14T15:09:26Z"}}}}}`,
		},
		"restart twice in a second": {
			ds: newSet("x", "img:v1", func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Template.Annotations = map[string]string{everynodev1alpha1.AnnotationRestartedAt: "2026-03-14T15:09:26Z"}
			}),
			build:   func(ds *everynodev1alpha1.DaemonSet) ([]byte, error) { return restartPatch(ds, restartTime) },
			wantErr: "restart has already been triggered within the past second",
		},
		"restart paused": {
			ds:      newSet("x", "img:v1", paused),
			build:   func(ds *everynodev1alpha1.DaemonSet) ([]byte, error) { return restartPatch(ds, restartTime) },
			wantErr: "can't restart a paused daemon set (run rollout resume first)",
		},
		"pause": {
			ds:    newSet("x", "img:v1"),
			build: func(ds *everynodev1alpha1.DaemonSet) ([]byte, error) { return pausePatch(ds, true) },
			want:  `{"spec":{"updateStrategy":{"rollingUpdate":{"paused":true}}}}`,
		},
		"pause paused": {
			ds:    newSet("x", "img:v1", paused),
			build: func(ds *everynodev1alpha1.DaemonSet) ([]byte, error) { return pausePatch(ds, true) },
		},
		"pause OnDelete": {
			ds:      newSet("x", "img:v1", onDelete),
			build:   func(ds *everynodev1alpha1.DaemonSet) ([]byte, error) { return pausePatch(ds, true) },
			wantErr: "can't pause: its updateStrategy is OnDelete",
		},
		"resume": {
			ds:    newSet("x", "img:v1", paused),
			build: func(ds *everynodev1alpha1.DaemonSet) ([]byte, error) { return pausePatch(ds, false) },
			want:  `{"spec":{"updateStrategy":{"rollingUpdate":{"paused":null}}}}`,
		},
		"resume a rollout that paused itself": {
			ds:    newSet("x", "img:v1", failedOn("abc")),
			build: func(ds *everynodev1alpha1.DaemonSet) ([]byte, error) { return pausePatch(ds, false) },
			want:  `{"metadata":{"annotations":{"everynode.io/resume-revision":"abc"}}}`,
		},
		"resume one paused both ways": {
			ds:    newSet("x", "img:v1", paused, failedOn("abc")),
			build: func(ds *everynodev1alpha1.DaemonSet) ([]byte, error) { return pausePatch(ds, false) },
			want:  `{"metadata":{"annotations":{"everynode.io/resume-revision":"abc"}},"spec":{"updateStrategy":{"rollingUpdate":{"paused":null}}}}`,
		},
		"resume one already resumed": {
			ds: newSet("x", "img:v1", failedOn("abc"), func(ds *everynodev1alpha1.DaemonSet) {
				ds.Annotations = map[string]string{everynodev1alpha1.AnnotationResumeRevision: "abc"}
			}),
			build: func(ds *everynodev1alpha1.DaemonSet) ([]byte, error) { return pausePatch(ds, false) },
		},
		"a failure of an older revision is not resumed": {
			ds:    newSet("x", "img:v1", failedOn("abc"), func(ds *everynodev1alpha1.DaemonSet) { ds.Status.UpdateRevision = "def" }),
			build: func(ds *everynodev1alpha1.DaemonSet) ([]byte, error) { return pausePatch(ds, false) },
		},
		"resume running": {
			ds:    newSet("x", "img:v1"),
			build: func(ds *everynodev1alpha1.DaemonSet) ([]byte, error) { return pausePatch(ds, false) },
		},
		"resume OnDelete": {
			ds:    newSet("x", "img:v1", onDelete),
			build: func(ds *everynodev1alpha1.DaemonSet) ([]byte, error) { return pausePatch(ds, false) },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := tc.build(tc.ds)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("patch %s, want %s", got, tc.want)
			}
		})
	}
}

func TestPatchCommands(t *testing.T) {
	tests := map[string]struct {
		sets    []*everynodev1alpha1.DaemonSet
		args    []string
		wantOut string
		wantErr string
		// wantPatched are the sets patched, by name.
		wantPatched []string
		check       func(t *testing.T, f *fixture)
	}{
		"pause": {
			sets:        []*everynodev1alpha1.DaemonSet{newSet("fluentd", "img:v1")},
			args:        []string{"pause", "fluentd"},
			wantOut:     "daemonset.everynode.io/fluentd paused\n",
			wantPatched: []string{"fluentd"},
			check: func(t *testing.T, f *fixture) {
				if !placement.UpdateStrategy(f.set(t, "fluentd")).Paused {
					t.Error("not paused")
				}
			},
		},
		"already paused": {
			sets:    []*everynodev1alpha1.DaemonSet{newSet("fluentd", "img:v1", paused)},
			args:    []string{"pause", "fluentd"},
			wantOut: "daemonset.everynode.io/fluentd already paused\n",
		},
		"pause OnDelete": {
			sets:    []*everynodev1alpha1.DaemonSet{newSet("fluentd", "img:v1", onDelete)},
			args:    []string{"pause", "fluentd"},
			wantErr: `daemonsets.everynode.io "fluentd": can't pause: its updateStrategy is OnDelete, which replaces a pod only when you delete it; pause applies to RollingUpdate`,
		},
		"resume": {
			sets:        []*everynodev1alpha1.DaemonSet{newSet("fluentd", "img:v1", paused)},
			args:        []string{"resume", "ds/fluentd"},
			wantOut:     "daemonset.everynode.io/fluentd resumed\n",
			wantPatched: []string{"fluentd"},
			check: func(t *testing.T, f *fixture) {
				if placement.UpdateStrategy(f.set(t, "fluentd")).Paused {
					t.Error("still paused")
				}
			},
		},
		"already resumed": {
			sets:    []*everynodev1alpha1.DaemonSet{newSet("fluentd", "img:v1")},
			args:    []string{"resume", "fluentd"},
			wantOut: "daemonset.everynode.io/fluentd already resumed\n",
		},
		"restart": {
			sets:        []*everynodev1alpha1.DaemonSet{newSet("fluentd", "img:v1")},
			args:        []string{"restart", "fluentd"},
			wantOut:     "daemonset.everynode.io/fluentd restarted\n",
			wantPatched: []string{"fluentd"},
			check: func(t *testing.T, f *fixture) {
				ds := f.set(t, "fluentd")
				if got := ds.Spec.Template.Annotations[everynodev1alpha1.AnnotationRestartedAt]; got != "2026-03-14T15:09:26Z" {
					t.Errorf("restartedAt = %q", got)
				}
				if ds.Spec.Template.Spec.Containers[0].Image != "img:v1" {
					t.Error("restart changed the containers")
				}
			},
		},
		"restart paused": {
			sets:    []*everynodev1alpha1.DaemonSet{newSet("fluentd", "img:v1", paused)},
			args:    []string{"restart", "fluentd"},
			wantErr: `daemonsets.everynode.io "fluentd": can't restart a paused daemon set (run rollout resume first)`,
		},
		"by selector: one fails, the others go on": {
			sets: []*everynodev1alpha1.DaemonSet{
				newSet("a", "img:v1", withLabels("tier", "node")),
				newSet("b", "img:v1", withLabels("tier", "node"), onDelete),
				newSet("c", "img:v1", withLabels("tier", "node"), paused),
				newSet("d", "img:v1"),
			},
			args:        []string{"pause", "-l", "tier=node"},
			wantOut:     "daemonset.everynode.io/a paused\ndaemonset.everynode.io/c already paused\n",
			wantErr:     `daemonsets.everynode.io "b": can't pause`,
			wantPatched: []string{"a"},
		},
		"-o name": {
			sets:        []*everynodev1alpha1.DaemonSet{newSet("fluentd", "img:v1")},
			args:        []string{"pause", "fluentd", "-o", "name"},
			wantOut:     "daemonset.everynode.io/fluentd\n",
			wantPatched: []string{"fluentd"},
		},
		"-o jsonpath shows the patched object": {
			sets:        []*everynodev1alpha1.DaemonSet{newSet("fluentd", "img:v1")},
			args:        []string{"pause", "fluentd", "-o", "jsonpath={.spec.updateStrategy.rollingUpdate.paused}"},
			wantOut:     "true",
			wantPatched: []string{"fluentd"},
		},
		"missing": {
			args:    []string{"resume", "missing"},
			wantErr: `daemonsets.everynode.io "missing" not found`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var objs []runtime.Object
			for _, ds := range tc.sets {
				objs = append(objs, ds)
			}
			f := newFixture(objs...)
			out, _, err := f.run(t, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %v, want %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if out != tc.wantOut {
				t.Errorf("printed %q, want %q", out, tc.wantOut)
			}
			var patched []string
			for _, a := range f.writes("patch") {
				p := a.(clienttesting.PatchActionImpl)
				if p.PatchType != types.MergePatchType {
					t.Errorf("patch type %s", p.PatchType)
				}
				if p.PatchOptions.FieldManager != fieldManager {
					t.Errorf("field manager %q", p.PatchOptions.FieldManager)
				}
				patched = append(patched, p.Name)
			}
			if strings.Join(patched, ",") != strings.Join(tc.wantPatched, ",") {
				t.Errorf("patched %v, want %v", patched, tc.wantPatched)
			}
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
}

func withLabels(k, v string) func(*everynodev1alpha1.DaemonSet) {
	return func(ds *everynodev1alpha1.DaemonSet) { ds.Labels = map[string]string{k: v} }
}
