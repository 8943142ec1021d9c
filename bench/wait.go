package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// flushDeferred waits until everynode holds no request back for a spare
// token of its client budget: its Normal events wait while pod work keeps
// the budget busy, which in the benchmark is the whole run, and the run's
// request counts must include them. Done when the
// everynode_controller_deferred_requests gauge reads 0 twice a second
// apart (the events queued behind the one waiting go at 50/s once it
// goes); at most 3 minutes. Once the join's pod work is done the bucket
// refills in seconds and the held requests go, long before everynode's
// own bound on how late an event may be.
func (b *bench) flushDeferred(ctx context.Context, lbl string) {
	start := time.Now()
	zeros := 0
	// The scrape takes ctx, not the poll's: one begun before the 3 minutes
	// are up reads to its end.
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
		sc, err := b.m.everynode(ctx)
		if err != nil {
			return false, fmt.Errorf("reading everynode's deferred requests: %w", err)
		}
		if sc.sum("everynode_controller_deferred_requests", nil) > 0 {
			zeros = 0
			return false, nil
		}
		zeros++
		return zeros == 2, nil
	})
	switch {
	case err == nil:
		logf("%s deferred requests sent after %.1fs", lbl, time.Since(start).Seconds())
	case wait.Interrupted(err):
		logf("%s warning: everynode still defers requests after %s", lbl, time.Since(start).Round(time.Second))
	default:
		logf("%s warning: %v", lbl, err)
	}
}

// settle waits until no pod of the set is still terminating, so a phase
// starts without the previous one's deletions in flight. An update is done
// when its last old pod is deleted, but kwok, which plays the kubelets,
// removes the deleted pods afterwards; a join started meanwhile shares kwok
// with that work (up to 8 s of it at 5,000 nodes). The wait removes it
// as a factor in the next phase (RESULTS.md).
func (b *bench) settle(ctx context.Context, lbl string) {
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, b.c.phaseTimeout, true, func(context.Context) (bool, error) {
		return b.t.state("").terminating == 0, nil
	})
	if err != nil {
		logf("%s warning: %d pods still terminating after %s", lbl, b.t.state("").terminating, b.c.phaseTimeout)
		return
	}
	logf("%s settled in %.1fs", lbl, time.Since(start).Seconds())
}

// wait polls the tracker until every node has an available pod of img (and,
// for an update, no pod of another image is left and there is one pod per
// node), printing progress every 10 s. It returns the seconds since start, or
// NaN on timeout.
func (b *bench) wait(ctx context.Context, what string, start time.Time, img string, update bool) float64 {
	lastLog := time.Now()
	var st state
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Until(start.Add(b.c.phaseTimeout)), true, func(context.Context) (bool, error) {
		st = b.t.state(img)
		if st.availableNodes >= b.c.nodes && (!update || (st.old == 0 && st.live == b.c.nodes)) {
			return true, nil
		}
		if time.Since(lastLog) >= 10*time.Second {
			logf("%s %d/%d available, %d old, %d live (%.0fs)", what, st.availableNodes, b.c.nodes, st.old, st.live, time.Since(start).Seconds())
			lastLog = time.Now()
		}
		return false, nil
	})
	if err != nil {
		if ctx.Err() == nil {
			logf("%s timed out after %s: %d/%d available, %d old, %d live", what, b.c.phaseTimeout, st.availableNodes, b.c.nodes, st.old, st.live)
		}
		return math.NaN()
	}
	// When it happened, not when this poll noticed (up to 100 ms later:
	// 0.25% of a 40 s update, as much as the gap measured).
	d := time.Since(start).Seconds()
	if at := b.t.doneAt(img, update); at.After(start) {
		d = at.Sub(start).Seconds()
	}
	logf("%s done in %.1fs", what, d)
	return d
}

// waitFirst waits, from start, until n nodes have an available pod of img:
// the seconds, NaN on timeout.
func (b *bench) waitFirst(ctx context.Context, what string, start time.Time, img string, n int) float64 {
	lastLog := time.Now()
	var got map[string]time.Time
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Until(start.Add(b.c.phaseTimeout)), true, func(context.Context) (bool, error) {
		if got = b.t.availableTimes(img, nil); len(got) >= n {
			return true, nil
		}
		if time.Since(lastLog) >= 10*time.Second {
			logf("%s %d/%d available (%.0fs)", what, len(got), n, time.Since(start).Seconds())
			lastLog = time.Now()
		}
		return false, nil
	})
	if err != nil {
		if ctx.Err() == nil {
			logf("%s timed out after %s before %d nodes", what, b.c.phaseTimeout, n)
		}
		return math.NaN()
	}
	times := slices.SortedFunc(maps.Values(got), time.Time.Compare)
	d := times[n-1].Sub(start).Seconds()
	logf("%s: %d nodes in %.1fs", what, n, d)
	return d
}

// updateImage patches the bench set's image to image2 and waits, from
// start, until nodes nodes (every node: the update is done) run an
// available pod of it: the seconds, NaN on timeout. With flush it then
// waits for everynode's deferred requests, so the next phase does not
// meet them.
func (b *bench) updateImage(ctx context.Context, lbl string, gvr schema.GroupVersionResource, start time.Time, flush bool, nodes int) (float64, error) {
	patch, _ := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": image2}})
	if _, err := b.w.dyn.Resource(gvr).Namespace(benchNamespace).Patch(ctx, "fluentd-elasticsearch", types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return math.NaN(), fmt.Errorf("patching the %s DaemonSet: %w", gvr.Group, err)
	}
	var secs float64
	if nodes < b.c.nodes {
		secs = b.waitFirst(ctx, lbl+" update", start, image2, nodes)
	} else {
		secs = b.wait(ctx, lbl+" update", start, image2, true)
	}
	if flush {
		b.flushDeferred(ctx, lbl)
	}
	return secs, nil
}
