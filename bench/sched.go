package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// The scheduler phase: plain pods, created by the benchmark as fast as it
// can (QPS 1000), so that the scheduler, not a controller's client limit,
// sets the pace. Once through kube-scheduler with the everynode extender
// (schedulerName default-scheduler: the non-daemon path every pod of the
// cluster takes) and once through a second kube-scheduler without any
// extender (schedulerName no-extender, started by make bench), same pods,
// same cluster.
const (
	schedNamespace = "bench-sched"
	noExtenderName = "no-extender"
)

// schedRound runs the scheduler phase once with and once without the
// extender, the order alternating between rounds.
func (b *bench) schedRound(ctx context.Context, round int) ([]*schedResult, error) {
	n := b.c.schedPods
	if n == 0 {
		n = b.c.nodes
	}
	type side struct{ name, metrics string }
	sides := []side{{corev1.DefaultSchedulerName, b.c.schedulerMetrics}, {noExtenderName, b.c.noExtenderMetrics}}
	if round%2 == 0 {
		sides[0], sides[1] = sides[1], sides[0]
	}
	var out []*schedResult
	for _, s := range sides {
		res, err := b.schedThroughput(ctx, s.name, s.metrics, n)
		if err != nil {
			return nil, fmt.Errorf("scheduler phase, round %d: %w", round, err)
		}
		out = append(out, res)
	}
	return out, nil
}

// schedResult is one scheduler phase run.
type schedResult struct {
	scheduler   string
	pods        int
	seconds     float64 // first create to last bind
	podsPerSec  float64 // pods / seconds
	sliP99Milli float64 // scheduler_pod_scheduling_sli_duration_seconds p99, NaN if not scraped
}

// schedThroughput creates n pods for schedulerName and waits until all are
// bound; sliURL is that scheduler's /metrics (may be empty).
func (b *bench) schedThroughput(ctx context.Context, schedulerName, sliURL string, n int) (*schedResult, error) {
	lbl := fmt.Sprintf("[scheduler %s]", schedulerName)
	if err := b.cleanSchedPods(ctx); err != nil {
		return nil, err
	}
	var before scrape
	if sliURL != "" {
		before, _ = get(ctx, b.m.sched, sliURL)
	}

	// Count binds through an informer (it re-lists if the watch breaks),
	// started before the first create.
	var (
		mu    sync.Mutex
		bound = map[string]bool{}
		last  time.Time
	)
	observe := func(o any) {
		if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			mu.Lock()
			if !bound[p.Name] {
				bound[p.Name] = true
				last = time.Now()
			}
			mu.Unlock()
		}
	}
	infCtx, stopInformer := context.WithCancel(ctx)
	defer stopInformer()
	f := informers.NewSharedInformerFactoryWithOptions(b.cs, 0, informers.WithNamespace(schedNamespace))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: observe, UpdateFunc: func(_, o any) { observe(o) },
	}); err != nil {
		return nil, err
	}
	f.Start(infCtx.Done())
	if !cache.WaitForCacheSync(infCtx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("%s pod informer did not sync", lbl)
	}

	logf("%s %d pods", lbl, n)
	start := time.Now()
	var createErr atomic.Value
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1)); i <= n && ctx.Err() == nil; i = int(next.Add(1)) {
				pod := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sched-%05d", i), Labels: map[string]string{"app": "sched-bench"}},
					Spec: corev1.PodSpec{
						SchedulerName:                 schedulerName,
						Containers:                    []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
						TerminationGracePeriodSeconds: ptr.To[int64](0),
					},
				}
				if _, err := b.cs.CoreV1().Pods(schedNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					createErr.Store(err)
					return
				}
			}
		})
	}

	lastLog := time.Now()
	done := 0
	var failed error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Until(start.Add(b.c.phaseTimeout)), true, func(context.Context) (bool, error) {
		mu.Lock()
		done = len(bound)
		mu.Unlock()
		if done >= n {
			return true, nil
		}
		if failed, _ = createErr.Load().(error); failed != nil {
			return false, failed
		}
		if time.Since(lastLog) >= 10*time.Second {
			logf("%s %d/%d bound (%.0fs)", lbl, done, n, time.Since(start).Seconds())
			lastLog = time.Now()
		}
		return false, nil
	})
	wg.Wait()
	if failed != nil {
		return nil, fmt.Errorf("%s creating pods: %w", lbl, failed)
	}
	if err != nil {
		return nil, fmt.Errorf("%s only %d of %d pods bound in %s", lbl, done, n, b.c.phaseTimeout)
	}
	stopInformer()
	mu.Lock()
	res := &schedResult{scheduler: schedulerName, pods: n, seconds: last.Sub(start).Seconds(), sliP99Milli: math.NaN()}
	mu.Unlock()
	res.podsPerSec = float64(n) / res.seconds
	if sliURL != "" {
		if after, err := get(ctx, b.m.sched, sliURL); err == nil && before != nil {
			name := "scheduler_pod_scheduling_sli_duration_seconds"
			res.sliP99Milli = ms(after.since(before, name, nil), 0.99)
		}
	}
	logf("%s %d pods bound in %.1fs: %.1f pods/s, scheduling SLI p99 %.0f ms", lbl, n, res.seconds, res.podsPerSec, res.sliP99Milli)
	return res, b.cleanSchedPods(ctx)
}

// cleanSchedPods deletes the phase's pods and waits until they are gone.
func (b *bench) cleanSchedPods(ctx context.Context) error {
	if err := ensureNamespace(ctx, b.cs, schedNamespace); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := b.cs.CoreV1().Pods(schedNamespace).DeleteCollection(ctx,
			metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
			logf("cleanup: deleting scheduler-phase pods: %v (retrying)", err)
		}
		pods, err := b.cs.CoreV1().Pods(schedNamespace).List(ctx, metav1.ListOptions{})
		if err == nil && len(pods.Items) == 0 {
			return nil
		}
		time.Sleep(2 * time.Second)
	}
	return fmt.Errorf("scheduler-phase pods still there after 10m")
}
