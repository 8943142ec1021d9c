package controller

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

func taint(key string, effect corev1.TaintEffect) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: effect}) }
}

func cordon(n *corev1.Node) {
	n.Spec.Unschedulable = true
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
}

func label(k, v string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[k] = v
	}
}

// TestManagePerNode covers the per-node decisions: which nodes get a pod
// and which pods go, for every kind of node and pod state.
func TestManagePerNode(t *testing.T) {
	deleting := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: t0} }
	tests := map[string]struct {
		nodes      map[string][]func(*corev1.Node)
		set        func(*everynodev1alpha1.DaemonSet)
		pods       func(ds *everynodev1alpha1.DaemonSet, hash string) []*corev1.Pod
		wantCreate []string
		wantDelete []int // indexes into pods
	}{
		"no pods: one per node": {
			nodes:      map[string][]func(*corev1.Node){"a": nil, "b": nil, "c": nil},
			wantCreate: []string{"a", "b", "c"},
		},
		"nothing to do": {
			nodes: map[string][]func(*corev1.Node){"a": nil, "b": nil},
			pods: func(ds *everynodev1alpha1.DaemonSet, h string) []*corev1.Pod {
				return []*corev1.Pod{newPod(ds, "a", h), newPod(ds, "b", h)}
			},
		},
		"node selector: only labelled nodes": {
			nodes: map[string][]func(*corev1.Node){"a": {label("pool", "x")}, "b": nil},
			set: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "x"}
			},
			wantCreate: []string{"a"},
		},
		"node labelled out of the selector: pod deleted": {
			nodes: map[string][]func(*corev1.Node){"a": {label("pool", "x")}, "b": {label("pool", "y")}},
			set: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "x"}
			},
			pods: func(ds *everynodev1alpha1.DaemonSet, h string) []*corev1.Pod {
				return []*corev1.Pod{newPod(ds, "a", h), newPod(ds, "b", h)}
			},
			wantDelete: []int{1},
		},
		"required node affinity": {
			nodes: map[string][]func(*corev1.Node){"a": {label("zone", "z1")}, "b": {label("zone", "z2")}},
			set: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z2"}}},
					}}},
				}}
			},
			wantCreate: []string{"b"},
		},
		"NoSchedule taint: no new pod": {
			nodes: map[string][]func(*corev1.Node){"a": {taint("dedicated", corev1.TaintEffectNoSchedule)}, "b": nil},
			pods: func(ds *everynodev1alpha1.DaemonSet, h string) []*corev1.Pod {
				return []*corev1.Pod{newPod(ds, "b", h)}
			},
		},
		"NoSchedule taint: running pod stays": {
			nodes: map[string][]func(*corev1.Node){"a": {taint("dedicated", corev1.TaintEffectNoSchedule)}},
			pods: func(ds *everynodev1alpha1.DaemonSet, h string) []*corev1.Pod {
				return []*corev1.Pod{newPod(ds, "a", h)}
			},
		},
		"NoExecute taint: pod removed": {
			nodes: map[string][]func(*corev1.Node){"a": {taint("evict", corev1.TaintEffectNoExecute)}, "b": nil},
			pods: func(ds *everynodev1alpha1.DaemonSet, h string) []*corev1.Pod {
				return []*corev1.Pod{newPod(ds, "a", h), newPod(ds, "b", h)}
			},
			wantDelete: []int{0},
		},
		"tolerated NoExecute taint: pod stays and is created": {
			nodes: map[string][]func(*corev1.Node){"a": {taint("evict", corev1.TaintEffectNoExecute)}, "b": {taint("evict", corev1.TaintEffectNoExecute)}},
			set: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "evict", Operator: corev1.TolerationOpExists}}
			},
			pods: func(ds *everynodev1alpha1.DaemonSet, h string) []*corev1.Pod {
				return []*corev1.Pod{newPod(ds, "a", h)}
			},
			wantCreate: []string{"b"},
		},
		"not-ready NoExecute taint is tolerated by default": {
			nodes:      map[string][]func(*corev1.Node){"a": {taint(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)}},
			wantCreate: []string{"a"},
		},
		"cordoned node still gets a pod": {
			nodes:      map[string][]func(*corev1.Node){"a": {cordon}},
			wantCreate: []string{"a"},
		},
		"duplicate pods: oldest kept": {
			nodes: map[string][]func(*corev1.Node){"a": nil},
			pods: func(ds *everynodev1alpha1.DaemonSet, h string) []*corev1.Pod {
				return []*corev1.Pod{
					newPod(ds, "a", h, createdAt(t0.Add(-time.Minute))),
					newPod(ds, "a", h, createdAt(t0.Add(-time.Hour))),
					newPod(ds, "a", h, createdAt(t0.Add(-time.Second))),
				}
			},
			wantDelete: []int{0, 2},
		},
		"duplicate pods: a bound pod beats an older unbound one": {
			nodes: map[string][]func(*corev1.Node){"a": nil},
			pods: func(ds *everynodev1alpha1.DaemonSet, h string) []*corev1.Pod {
				return []*corev1.Pod{
					newPod(ds, "a", h, createdAt(t0.Add(-time.Hour)), unbound),
					newPod(ds, "a", h, createdAt(t0.Add(-time.Minute))),
				}
			},
			wantDelete: []int{0},
		},
		"node gone: its pods are deleted, bound or not": {
			nodes: map[string][]func(*corev1.Node){"a": nil},
			pods: func(ds *everynodev1alpha1.DaemonSet, h string) []*corev1.Pod {
				return []*corev1.Pod{newPod(ds, "a", h), newPod(ds, "gone", h), newPod(ds, "gone2", h, unbound)}
			},
			wantDelete: []int{1, 2},
		},
		"terminating pod: no replacement until it is gone": {
			nodes: map[string][]func(*corev1.Node){"a": nil},
			pods: func(ds *everynodev1alpha1.DaemonSet, h string) []*corev1.Pod {
				return []*corev1.Pod{newPod(ds, "a", h, deleting)}
			},
		},
		"succeeded pod is deleted": {
			nodes: map[string][]func(*corev1.Node){"a": nil},
			pods: func(ds *everynodev1alpha1.DaemonSet, h string) []*corev1.Pod {
				return []*corev1.Pod{newPod(ds, "a", h, phase(corev1.PodSucceeded))}
			},
			wantDelete: []int{0},
		},
		"finished and deleted pod is ignored: node gets a new one": {
			nodes: map[string][]func(*corev1.Node){"a": nil},
			pods: func(ds *everynodev1alpha1.DaemonSet, h string) []*corev1.Pod {
				return []*corev1.Pod{newPod(ds, "a", h, phase(corev1.PodFailed), deleting)}
			},
			wantCreate: []string{"a"},
		},
		"orphaned pod is adopted, not doubled": {
			nodes: map[string][]func(*corev1.Node){"a": nil},
			pods: func(ds *everynodev1alpha1.DaemonSet, h string) []*corev1.Pod {
				p := newPod(ds, "a", h)
				p.OwnerReferences = nil
				return []*corev1.Pod{p}
			},
		},
		"pod of an earlier set of the same name is not the set's": {
			nodes: map[string][]func(*corev1.Node){"a": nil},
			pods: func(ds *everynodev1alpha1.DaemonSet, h string) []*corev1.Pod {
				p := newPod(ds, "a", h)
				p.OwnerReferences[0].UID = types.UID("someone-else")
				return []*corev1.Pod{p}
			},
			wantCreate: []string{"a"},
		},
		"template nodeName: only that node": {
			nodes:      map[string][]func(*corev1.Node){"a": nil, "b": nil},
			set:        func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.NodeName = "b" },
			wantCreate: []string{"b"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			for n, mods := range tc.nodes {
				node := newNode(n, nil)
				for _, m := range mods {
					m(node)
				}
				f.add(node)
			}
			ds := newSet("agent")
			if tc.set != nil {
				tc.set(ds)
			}
			hash := addSetWithRevision(f, ds)
			var pods []*corev1.Pod
			if tc.pods != nil {
				pods = tc.pods(ds, hash)
			}
			for _, p := range pods {
				f.add(p)
			}
			f.mustSync(ds)
			if got := f.createdNodes(); !reflect.DeepEqual(got, tc.wantCreate) {
				t.Errorf("created on %v, want %v", got, tc.wantCreate)
			}
			var wantDelete []string
			for _, i := range tc.wantDelete {
				wantDelete = append(wantDelete, pods[i].Name)
			}
			sortStrings(wantDelete)
			if got := f.podDeletes(); !reflect.DeepEqual(got, wantDelete) {
				t.Errorf("deleted %v, want %v", got, wantDelete)
			}
		})
	}
}

// The controller applies the set's node overrides to the pods it makes,
// per node, so they hold where no webhook runs; the pin and tolerations
// stay whatever an override says.
func TestCreatedPodsCarryNodeOverrides(t *testing.T) {
	f := newFixture(t)
	f.add(newNode("node-big", map[string]string{"pool": "big"}), newNode("node-small", nil))
	ds := newSet("agent")
	ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{{
		NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "big"}},
		Patch:        runtime.RawExtension{Raw: []byte(`{"metadata":{"labels":{"size":"big"}},"spec":{"containers":[{"name":"agent","image":"agent:big"}],"affinity":null}}`)},
	}}
	addSetWithRevision(f, ds)
	f.mustSync(ds)
	got := map[string]*corev1.Pod{}
	for _, p := range f.podCreates() {
		got[p.Annotations[everynodev1alpha1.AnnotationTargetNode]] = p
	}
	big, small := got["node-big"], got["node-small"]
	if big == nil || small == nil {
		t.Fatalf("created on %v, want node-big and node-small", f.createdNodes())
	}
	if img := big.Spec.Containers[0].Image; img != "agent:big" || big.Labels["size"] != "big" {
		t.Errorf("node-big's pod: image %s, labels %v; want the override's", img, big.Labels)
	}
	if img := small.Spec.Containers[0].Image; img != "agent:1" || small.Labels["size"] != "" {
		t.Errorf("node-small's pod: image %s, labels %v; want the template's", img, small.Labels)
	}
	if want := placement.PinToNode(nil, "node-big"); !apiequality.Semantic.DeepEqual(big.Spec.Affinity, want) {
		t.Errorf("node-big's pod affinity %+v after an override dropping it; want the pin to node-big", big.Spec.Affinity)
	}
}

// A closed write fence (the leader's Lease is a lease duration old) stops
// every pod create and delete of the sync, with the fence's error.
func TestWriteFenceStopsPodWrites(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 2)
	ds := newSet("agent")
	addSetWithRevision(f, ds)
	f.ctx = WithWriteFence(f.ctx, func() error { return errors.New("lease too old") })
	err := f.sync(ds)
	if err == nil || !strings.Contains(err.Error(), "lease too old") {
		t.Fatalf("sync = %v, want the fence's error", err)
	}
	if c := f.podCreates(); len(c) != 0 {
		t.Errorf("%d pods created behind a closed fence", len(c))
	}
}

// A leadership term makes its controller with the fenced context and runs
// it with the elector's (cmd/everynode leader.go): the fence New was given
// must hold for syncs whose context has none.
func TestWriteFenceFromNew(t *testing.T) {
	f := newFixtureWith(t, func(f *fixture) {
		f.ctx = WithWriteFence(f.ctx, func() error { return errors.New("lease too old") })
	})
	addNodes(f, 2)
	ds := newSet("agent")
	addSetWithRevision(f, ds)
	f.ctx = context.Background()
	err := f.sync(ds)
	if err == nil || !strings.Contains(err.Error(), "lease too old") {
		t.Fatalf("sync = %v, want the fence's error", err)
	}
	if c := f.podCreates(); len(c) != 0 {
		t.Errorf("%d pods created behind a closed fence", len(c))
	}
}

// Under leader election every pod a sync creates carries the term it was
// created in, the term of the sync's context or else New's, for the API
// server's fence; without leader election none does.
func TestCreatedPodsCarryTheLeaderTerm(t *testing.T) {
	for _, tc := range []struct {
		name      string
		newCtx    func(context.Context) context.Context
		syncCtx   func(context.Context) context.Context
		want      string
		wantNoAnn bool
	}{
		{name: "the sync's term", syncCtx: func(ctx context.Context) context.Context { return WithLeaderTerm(ctx, 7) }, want: "7"},
		{name: "New's term", newCtx: func(ctx context.Context) context.Context { return WithLeaderTerm(ctx, 3) }, want: "3"},
		{name: "the sync's over New's", newCtx: func(ctx context.Context) context.Context { return WithLeaderTerm(ctx, 3) },
			syncCtx: func(ctx context.Context) context.Context { return WithLeaderTerm(ctx, 4) }, want: "4"},
		{name: "no leader election", wantNoAnn: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixtureWith(t, func(f *fixture) {
				if tc.newCtx != nil {
					f.ctx = tc.newCtx(f.ctx)
				}
			})
			if tc.syncCtx != nil {
				f.ctx = tc.syncCtx(context.Background())
			} else {
				f.ctx = context.Background()
			}
			addNodes(f, 2)
			ds := newSet("agent")
			addSetWithRevision(f, ds)
			f.mustSync(ds)
			creates := f.podCreates()
			if len(creates) != 2 {
				t.Fatalf("%d pods created, want 2", len(creates))
			}
			for _, pod := range creates {
				got, ok := pod.Annotations[everynodev1alpha1.AnnotationLeaderTerm]
				switch {
				case tc.wantNoAnn && ok:
					t.Errorf("a pod has term %q without leader election", got)
				case !tc.wantNoAnn && got != tc.want:
					t.Errorf("pod has term %q, want %q", got, tc.want)
				}
			}
		})
	}
}

// While a rolling update's deletes are yet to show, a node that joins gets
// its pod from the very next sync, which does nothing else; a node whose
// creation is pending gets no second pod, nor do the nodes whose pods are
// being deleted (they still show).
func TestBareNodeGetsItsPodWhileChangesArePending(t *testing.T) {
	f := newFixture(t)
	ds := outdatedSet(f, 4, "2")
	key := cache.MetaObjectToName(ds)
	f.mustSync(ds)
	if got := len(f.podDeletes()); got != 2 {
		t.Fatalf("%d deletes, want the 2 maxUnavailable allows", got)
	}
	if f.c.state.satisfied(key) {
		t.Fatal("the deletes show already: nothing is pending")
	}
	f.add(newNode("node-new", nil))
	f.mustSync(ds)
	if got := f.createdNodes(); !reflect.DeepEqual(got, []string{"node-new"}) {
		t.Errorf("created on %v while the deletes are pending, want node-new", got)
	}
	if got := f.podDeletes(); len(got) != 0 {
		t.Errorf("deleted %v while earlier deletes are pending", got)
	}
	f.mustSync(ds)
	if got := f.createdNodes(); len(got) != 0 {
		t.Errorf("created on %v with node-new's creation pending", got)
	}
}
