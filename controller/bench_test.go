package controller

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// nopPodControl accepts every create and delete without an API call, so a
// benchmark measures the controller, not the fake API server.
type nopPodControl struct{}

func (nopPodControl) CreatePod(context.Context, *everynodev1alpha1.DaemonSet, *corev1.Pod) error {
	return nil
}

func (nopPodControl) UpdatePodInPlace(context.Context, *everynodev1alpha1.DaemonSet, *corev1.Pod, []byte, string) error {
	return nil
}

func (nopPodControl) SetPodGate(context.Context, *everynodev1alpha1.DaemonSet, *corev1.Pod, corev1.ConditionStatus, []byte) error {
	return nil
}

func (nopPodControl) ResizePod(context.Context, *everynodev1alpha1.DaemonSet, *corev1.Pod, []byte, string) error {
	return nil
}

func (nopPodControl) RemoveStartGate(context.Context, *everynodev1alpha1.DaemonSet, *corev1.Pod) error {
	return nil
}

func (nopPodControl) DeletePod(context.Context, *everynodev1alpha1.DaemonSet, string, string, types.UID) error {
	return nil
}

// syncBench prepares a set over n nodes, with a running pod on each when
// withPods, after one sync has written its status, and returns a function
// that runs one full sync as a steady state would.
func syncBench(tb testing.TB, n int, withPods bool) func() {
	f := newFixture(tb)
	f.c.podControl = nopPodControl{}
	f.c.burstReplicas = n // create all at once: the cost of one full sync
	for i := 0; i < n; i++ {
		node := newNode(fmt.Sprintf("node-%05d", i), map[string]string{"kubernetes.io/os": "linux", "zone": fmt.Sprint("z", i%3)})
		if err := f.nodeInf.GetIndexer().Add(node); err != nil {
			tb.Fatal(err)
		}
	}
	ds := newSet("agent")
	hash := addSetWithRevision(f, ds)
	if withPods {
		for i := 0; i < n; i++ {
			if err := f.podInf.GetIndexer().Add(newPod(ds, fmt.Sprintf("node-%05d", i), hash)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	key := cache.MetaObjectToName(ds)
	f.mustSync(ds)
	// The status the first sync wrote, so later syncs have none to write.
	// (Only the set: the pods live in the cache alone.)
	if err := f.setInf.GetIndexer().Update(f.set(ds)); err != nil {
		tb.Fatal(err)
	}
	f.c.state.forget(key)
	return func() {
		if err := f.c.sync(f.ctx, key); err != nil {
			tb.Fatal(err)
		}
		// The nop pod control never shows its pods: forget them, so every
		// iteration creates all n again. The rest of the set's state (its
		// pod memo) stays, as between a real set's syncs.
		f.c.state.with(key, func(st *setState) { st.expected = expectations{} })
	}
}

// BenchmarkSync measures one full sync of a set: "idle" with a pod on every
// node and nothing to do, "create" with no pod yet and one to create per
// node (through a no-op pod control). Compare nodes=1000 with nodes=5000 for
// linearity.
func BenchmarkSync(b *testing.B) {
	for _, mode := range []string{"idle", "create"} {
		for _, n := range []int{1000, 5000} {
			b.Run(fmt.Sprintf("%s/nodes=%d", mode, n), func(b *testing.B) {
				run := syncBench(b, n, mode == "idle")
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					run()
				}
			})
		}
	}
}

// TestSyncCostIsLinear fails if the allocations of one sync grow faster
// than the nodes: from 1,000 to 5,000 nodes they must grow about 5 times
// (quadratic growth would be 25). Allocations, unlike time, are exact.
func TestSyncCostIsLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 6,000 nodes")
	}
	for _, mode := range []string{"idle", "create"} {
		t.Run(mode, func(t *testing.T) {
			small := testing.AllocsPerRun(2, syncBench(t, 1000, mode == "idle"))
			large := testing.AllocsPerRun(2, syncBench(t, 5000, mode == "idle"))
			ratio := large / small
			t.Logf("allocs per sync: %.0f at 1,000 nodes, %.0f at 5,000 (x%.2f)", small, large, ratio)
			if ratio > 6 {
				t.Errorf("allocations grew x%.2f for x5 nodes: not linear", ratio)
			}
		})
	}
}
