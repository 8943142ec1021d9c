package extender

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// gatedNodeNames lists the nodes the snapshot holds back, sorted.
// It also checks that lookup finds each of them through the Bloom filter.
func gatedNodeNames(t *testing.T, g *gateCache) []string {
	t.Helper()
	snap := g.gated()
	if snap == nil {
		return nil
	}
	for name := range snap.reasons {
		if _, ok := snap.lookup(name); !ok {
			t.Errorf("gated node %s not found by lookup", name)
		}
	}
	return slices.Sorted(maps.Keys(snap.reasons))
}

// TestGateInitial checks the snapshot built from the initial lists.
func TestGateInitial(t *testing.T) {
	cni := daemonSet("cni", true)
	tests := map[string]struct {
		objs []runtime.Object
		want []string
	}{
		"no set": {
			objs: []runtime.Object{node("n0", nil)},
		},
		"set without gate": {
			objs: []runtime.Object{node("n0", nil), daemonSet("agent", false)},
		},
		"node just joined, no pod yet": {
			objs: []runtime.Object{node("n0", nil), cni},
			want: []string{"n0"},
		},
		"pod Pending": {
			objs: []runtime.Object{node("n0", nil), cni, daemonPod(cni, "cni-0", "n0", "v1")},
			want: []string{"n0"},
		},
		"pod Ready": {
			objs: []runtime.Object{node("n0", nil), cni, daemonPod(cni, "cni-0", "n0", "v1", ready)},
		},
		"Ready pod terminating": {
			objs: []runtime.Object{node("n0", nil), cni, daemonPod(cni, "cni-0", "n0", "v1", ready, terminating)},
			want: []string{"n0"},
		},
		"old pod Ready while a surge pod starts": {
			objs: []runtime.Object{node("n0", nil), cni,
				daemonPod(cni, "cni-old", "n0", "v1", ready), daemonPod(cni, "cni-new", "n0", "v2")},
		},
		"node outside the node selector": {
			objs: []runtime.Object{node("n0", nil), daemonSet("cni", true, withNodeSelector(map[string]string{"pool": "a"}))},
		},
		"untolerated NoSchedule taint and no pod: never gets one, stays open": {
			objs: []runtime.Object{node("n0", nil, corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoSchedule}), cni},
		},
		"untolerated NoSchedule taint with a pod not Ready: gated": {
			objs: []runtime.Object{node("n0", nil, corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoSchedule}), cni,
				daemonPod(cni, "cni-0", "n0", "v1")},
			want: []string{"n0"},
		},
		"set being deleted": {
			objs: []runtime.Object{node("n0", nil), daemonSet("cni", true, func(ds *everynodev1alpha1.DaemonSet) { ds.DeletionTimestamp = &metav1.Time{} })},
		},
		"several nodes": {
			objs: []runtime.Object{node("n0", nil), node("n1", nil), node("n2", nil), cni,
				daemonPod(cni, "cni-1", "n1", "v1", ready)},
			want: []string{"n0", "n2"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, tc.objs...)
			if got := gatedNodeNames(t, f.ext.gate); !slices.Equal(got, tc.want) {
				t.Errorf("gated nodes = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestGateEvents checks that each informer event moves the snapshot as the
// state it leaves behind says.
func TestGateEvents(t *testing.T) {
	cni := daemonSet("cni", true)
	pending := daemonPod(cni, "cni-0", "n0", "v1")
	readyPod := daemonPod(cni, "cni-0", "n0", "v1", ready)
	base := []runtime.Object{node("n0", nil), node("n1", nil), cni, pending, daemonPod(cni, "cni-1", "n1", "v1", ready)}

	tests := map[string]struct {
		event func(t *testing.T, f *fixture)
		want  []string
	}{
		"nothing happens": {
			event: func(*testing.T, *fixture) {},
			want:  []string{"n0"},
		},
		"pod becomes Ready": {
			event: func(t *testing.T, f *fixture) { f.update(t, pending, readyPod) },
		},
		"Ready pod becomes not Ready": {
			event: func(t *testing.T, f *fixture) {
				f.update(t, pending, readyPod)
				f.update(t, readyPod, pending)
			},
			want: []string{"n0"},
		},
		"pod deleted, node keeps waiting": {
			event: func(t *testing.T, f *fixture) { f.delete(t, pending) },
			want:  []string{"n0"},
		},
		"Ready pod deleted": {
			event: func(t *testing.T, f *fixture) {
				f.update(t, pending, readyPod)
				f.delete(t, readyPod)
			},
			want: []string{"n0"},
		},
		"Ready pod deleted as a tombstone": {
			event: func(t *testing.T, f *fixture) {
				f.update(t, pending, readyPod)
				if err := f.pods.Delete(readyPod); err != nil {
					t.Fatal(err)
				}
				f.ext.podHandler().OnDelete(cacheTombstone(readyPod))
			},
			want: []string{"n0"},
		},
		"node joins": {
			event: func(t *testing.T, f *fixture) { f.create(t, node("n2", nil)) },
			want:  []string{"n0", "n2"},
		},
		"node leaves": {
			event: func(t *testing.T, f *fixture) { f.delete(t, node("n0", nil)) },
		},
		"node relabeled out of the set's selector": {
			event: func(t *testing.T, f *fixture) {
				sel := daemonSet("cni", true, withNodeSelector(map[string]string{"pool": "a"}))
				sel.Generation = 2
				f.update(t, cni, sel)
				f.update(t, node("n0", nil), node("n0", map[string]string{"pool": "a"}))
				f.update(t, node("n1", nil), node("n1", map[string]string{"pool": "b"}))
			},
			want: []string{"n0"},
		},
		"node tainted NoExecute": {
			event: func(t *testing.T, f *fixture) {
				f.update(t, node("n0", nil), node("n0", nil, corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoExecute}))
			},
		},
		"gate turned off": {
			event: func(t *testing.T, f *fixture) {
				off := daemonSet("cni", false)
				off.Generation = 2
				f.update(t, cni, off)
			},
		},
		"set deleted": {
			event: func(t *testing.T, f *fixture) { f.delete(t, cni) },
		},
		"second gated set created": {
			event: func(t *testing.T, f *fixture) { f.create(t, daemonSet("csi", true)) },
			want:  []string{"n0", "n1"},
		},
		"status-only update does not recompute": {
			event: func(t *testing.T, f *fixture) {
				// Change the pods behind the handlers' back: only a
				// recompute would notice, and the same generation must
				// not cause one.
				if err := f.pods.Update(readyPod); err != nil {
					t.Fatal(err)
				}
				status := cni.DeepCopy()
				status.Status.NumberReady = 1
				f.update(t, cni, status)
			},
			want: []string{"n0"},
		},
		"spec change recomputes": {
			event: func(t *testing.T, f *fixture) {
				if err := f.pods.Update(readyPod); err != nil {
					t.Fatal(err)
				}
				spec := cni.DeepCopy()
				spec.Generation = 2
				f.update(t, cni, spec)
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, base...)
			tc.event(t, f)
			if got := gatedNodeNames(t, f.ext.gate); !slices.Equal(got, tc.want) {
				t.Errorf("gated nodes = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestGateSnapshotImmutable checks that a reader's snapshot never changes
// under it: a filter call in flight keeps a consistent view.
func TestGateSnapshotImmutable(t *testing.T) {
	cni := daemonSet("cni", true)
	pending := daemonPod(cni, "cni-0", "n0", "v1")
	f := newFixture(t, node("n0", nil), cni, pending)
	before := f.ext.gate.gated()
	f.update(t, pending, daemonPod(cni, "cni-0", "n0", "v1", ready))
	if _, ok := before.lookup("n0"); !ok || len(before.reasons) != 1 {
		t.Errorf("old snapshot changed to %q", before.reasons)
	}
	if got := f.ext.gate.gated(); got != nil {
		t.Errorf("new snapshot = %q, want nil", got.reasons)
	}
}

func cacheTombstone(obj runtime.Object) cache.DeletedFinalStateUnknown {
	pod := obj.(*corev1.Pod)
	return cache.DeletedFinalStateUnknown{Key: pod.Namespace + "/" + pod.Name, Obj: pod}
}
