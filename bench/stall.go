package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// stallAfter is how long a bound pod may wait for kwok to run it before
// the benchmark touches it. A kubelet resyncs its pods every minute; kwok,
// which plays every kubelet here, acts only on watch events, and has left a
// bound pod untouched for minutes (RESULTS.md). Touching the pod sends kwok
// a fresh event, as a kubelet's resync would look again.
// The wait still counts in the pod's times, and the Runs table says how
// many pods were touched, so a run with a stall shows it.
const stallAfter = time.Minute

// stalled returns the live pods bound for longer than after, still
// Pending and not yet touched, and marks them touched.
func (t *tracker) stalled(after time.Duration, now time.Time) []*corev1.Pod {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*corev1.Pod
	for uid, p := range t.pods {
		at, bound := t.boundAt[uid]
		if !bound || now.Sub(at) < after || t.touched[uid] || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodPending {
			continue
		}
		t.touched[uid] = true
		t.touchedSince++
		out = append(out, p)
	}
	return out
}

// stalledTouched is how many pods touchStalled touched since the last reset.
func (t *tracker) stalledTouched() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.touchedSince
}

// touchStalled annotates, every 10 s until ctx ends, the pods kwok has left
// bound and Pending for stallAfter (see there).
func (t *tracker) touchStalled(ctx context.Context, cs kubernetes.Interface) {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			for _, p := range t.stalled(stallAfter, now) {
				patch := fmt.Sprintf(`{"metadata":{"annotations":{"bench.everynode.io/touched":%q}}}`, now.UTC().Format(time.RFC3339))
				if _, err := cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					logf("warning: pod %s/%s has been bound to %s for over %s and is still Pending; touching it failed: %v", p.Namespace, p.Name, p.Spec.NodeName, stallAfter, err)
					continue
				}
				logf("warning: pod %s/%s has been bound to %s for over %s and is still Pending: touched it so kwok looks again", p.Namespace, p.Name, p.Spec.NodeName, stallAfter)
			}
		}
	}
}
