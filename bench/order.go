package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// Start order under churn (issue 58, --scenario=order), everynode only
// (upstream has no start order). A two-level chain, order-a <- order-b <-
// order-c (b starts after a, c after b), and churn-0 of the churn scenario
// rolling back and forth; meanwhile churnJoins nodes join, one every
// churnEvery. Per joined node:
//
//   - join: node created to c's pod Ready;
//   - the chain's own time: what the three daemons take to start
//     themselves, one after the other: the sum over a, b, c of bound to
//     Ready (kwok's start; KWOK_START_DELAY=1 makes it a kubelet's two
//     steps);
//   - the wait: a's pod bound to c's pod Ready, less the chain's own time:
//     what the ordering itself costs (the controller seeing a Ready
//     dependency, removing the gate, the scheduler binding);
//   - order kept: b bound no earlier than a seen Ready, c no earlier than b
//     (both seen by one watch), counted as violations otherwise;
//   - writes: the controller's pod patches in the window (gate removals;
//     churn-0 recreates, it patches nothing) against the chain's pods
//     created gated: the goal is one patch per gated pod and none for
//     the others.
var orderChain = []struct{ name, after string }{{"order-a", ""}, {"order-b", "order-a"}, {"order-c", "order-b"}}

// orderResult is one run of the scenario.
type orderResult struct {
	round                  int
	joined, settled        int
	join, own, waitFor     [3]float64 // p50, p99, max seconds per joined node
	violations             int
	chainPods, gated       int
	patches, creates       int // the controller's pod patches and creates in the window (audit log)
	updates                int
	window                 float64
	auditRead              bool
	gatedNotRemoved, other int
}

// orderObject is chain set name, starting after after ("" for none).
func (w *workload) orderObject(s system, name, after string) *unstructured.Unstructured {
	u := w.object(s, image1)
	u.SetName(name)
	_ = unstructured.SetNestedMap(u.Object, map[string]any{"matchLabels": map[string]any{churnSetLabel: name}}, "spec", "selector")
	_ = unstructured.SetNestedMap(u.Object, map[string]any{churnLabel: "true", churnSetLabel: name}, "spec", "template", "metadata", "labels")
	if after != "" {
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": after}}, "spec", "startAfter")
	}
	return u
}

// orderPod is what the scenario's watch saw of one chain pod.
type orderPod struct {
	createdGated    bool
	bound, ready    time.Time
	gateRemovedSeen bool
}

// orderWatch records, per node and chain set, the pod's times.
type orderWatch struct {
	mu   sync.Mutex
	pods map[string]map[string]*orderPod // node -> set -> pod
}

func (o *orderWatch) start(ctx context.Context, b *bench) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(b.cs, 0, informers.WithNamespace(benchNamespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = churnLabel + "=true" }))
	inf := factory.Core().V1().Pods().Informer()
	gated := func(p *corev1.Pod) bool {
		for _, g := range p.Spec.SchedulingGates {
			if g.Name == everynodev1alpha1.SchedulingGateStartAfter {
				return true
			}
		}
		return false
	}
	observe := func(p *corev1.Pod, added bool) {
		set := p.Labels[churnSetLabel]
		if !strings.HasPrefix(set, "order-") || p.DeletionTimestamp != nil {
			return
		}
		node := p.Annotations[everynodev1alpha1.AnnotationTargetNode]
		now := time.Now()
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.pods[node] == nil {
			o.pods[node] = map[string]*orderPod{}
		}
		op := o.pods[node][set]
		if op == nil {
			op = &orderPod{createdGated: added && gated(p)}
			o.pods[node][set] = op
		}
		if op.createdGated && !gated(p) {
			op.gateRemovedSeen = true
		}
		if p.Spec.NodeName != "" && op.bound.IsZero() {
			op.bound = now
		}
		if podReady(p) && op.ready.IsZero() {
			op.ready = now
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { observe(obj.(*corev1.Pod), true) },
		UpdateFunc: func(_, obj any) { observe(obj.(*corev1.Pod), false) },
	}); err != nil {
		cancel()
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("order pod informer did not sync")
	}
	return func() { cancel(); factory.Shutdown() }, nil
}

// node returns a copy of node's chain pods once all three are Ready.
func (o *orderWatch) node(node string) ([3]orderPod, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out [3]orderPod
	for i, s := range orderChain {
		p := o.pods[node][s.name]
		if p == nil || p.ready.IsZero() || p.bound.IsZero() {
			return out, false
		}
		out[i] = *p
	}
	return out, true
}

// orderOnce runs the scenario once.
func (b *bench) orderOnce(ctx context.Context, round int) (*orderResult, error) {
	s := everynode
	lbl := fmt.Sprintf("[order r%d]", round)
	res := &orderResult{round: round}
	watch := &orderWatch{pods: map[string]map[string]*orderPod{}}
	stopWatch, err := watch.start(ctx, b)
	if err != nil {
		return nil, err
	}
	defer stopWatch()

	logf("%s the chain %s <- %s <- %s and %s", lbl, orderChain[0].name, orderChain[1].name, orderChain[2].name, churnSetName(0))
	objs := []*unstructured.Unstructured{b.w.churnObject(s, 0)}
	for _, c := range orderChain {
		objs = append(objs, b.w.orderObject(s, c.name, c.after))
	}
	for _, u := range objs {
		if _, err := b.w.dyn.Resource(s.gvr).Namespace(benchNamespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating %s: %w", u.GetName(), err)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, b.c.phaseTimeout, true, func(context.Context) (bool, error) {
		for _, u := range objs {
			if !b.setDone(ctx, s, u.GetName()) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return nil, fmt.Errorf("%s the sets not available after %s", lbl, b.c.phaseTimeout)
	}
	b.settle(ctx, lbl)

	rolling, stopRolling := context.WithCancel(ctx)
	defer stopRolling()
	var updates atomic.Int64
	var churnDone sync.WaitGroup
	churnDone.Go(func() {
		img := image2
		for rolling.Err() == nil {
			if err := b.churnPatchImage(ctx, s, img); err != nil {
				logf("%s %v", lbl, err)
				return
			}
			if err := wait.PollUntilContextCancel(rolling, 250*time.Millisecond, true, func(context.Context) (bool, error) {
				return b.setDone(ctx, s, churnSetName(0)), nil
			}); err != nil {
				return
			}
			updates.Add(1)
			img = map[string]string{image2: image3, image3: image2}[img]
		}
	})
	time.Sleep(2 * time.Second)

	offset := auditOffset(b.c.auditLog)
	first := time.Now()
	logf("%s %d nodes join, one every %s, while %s rolls", lbl, churnJoins, churnEvery, churnSetName(0))
	var (
		mu      sync.Mutex
		created = map[string]time.Time{}
		joins   sync.WaitGroup
	)
	tick := time.NewTicker(churnEvery)
	for i := range churnJoins {
		if i > 0 {
			<-tick.C
		}
		joins.Go(func() {
			nt, err := joinNodes(ctx, b.cs, fmt.Sprintf("order-r%d-%03d", round, i), 1, nil, b.c.phaseTimeout)
			if err != nil {
				logf("%s %v", lbl, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for n, t := range nt {
				created[n] = t.created
			}
		})
	}
	tick.Stop()
	joins.Wait()

	var chains map[string][3]orderPod
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, b.c.phaseTimeout, true, func(context.Context) (bool, error) {
		chains = map[string][3]orderPod{}
		for n := range created {
			if c, ok := watch.node(n); ok {
				chains[n] = c
			}
		}
		return len(chains) == len(created), nil
	})
	end := time.Now()
	res.window = end.Sub(first).Seconds()
	stopRolling()
	churnDone.Wait()
	res.joined, res.settled, res.updates = len(created), len(chains), int(updates.Load())

	var joinD, ownD, waitD []time.Duration
	for n, c := range chains {
		own := c[0].ready.Sub(c[0].bound) + c[1].ready.Sub(c[1].bound) + c[2].ready.Sub(c[2].bound)
		joinD = append(joinD, c[2].ready.Sub(created[n]))
		ownD = append(ownD, own)
		waitD = append(waitD, c[2].ready.Sub(c[0].bound)-own)
		for i := 1; i < 3; i++ {
			if c[i].bound.Before(c[i-1].ready) {
				res.violations++
			}
		}
		for _, p := range c {
			res.chainPods++
			if p.createdGated {
				res.gated++
				if !p.gateRemovedSeen {
					res.gatedNotRemoved++
				}
			}
		}
	}
	res.join, res.own, res.waitFor = durStats(joinD), durStats(ownD), durStats(waitD)

	if b.c.auditLog != "" {
		// The log is written a moment after each request.
		time.Sleep(2 * time.Second)
		aw, err := readAudit(b.c.auditLog, offset, first, end)
		if err != nil {
			return nil, err
		}
		res.auditRead = true
		res.patches = aw.byVerbResource[clientEverynode]["patch pods"]
		res.creates = aw.byVerbResource[clientEverynode]["create pods"]
	}
	logf("%s %d of %d joined nodes settled; join p50 %.2fs p99 %.2fs; chain's own p50 %.2fs; wait p50 %.2fs p99 %.2fs; "+
		"%d order violations; %d of %d chain pods created gated; controller: %d pod patches, %d pod creates",
		lbl, res.settled, res.joined, res.join[0], res.join[1], res.own[0], res.waitFor[0], res.waitFor[1],
		res.violations, res.gated, res.chainPods, res.patches, res.creates)

	logf("%s cleaning up", lbl)
	names := []string{churnSetName(0)}
	for _, c := range orderChain {
		names = append(names, c.name)
	}
	if err := b.teardownSets(ctx, s, names); err != nil {
		return nil, err
	}
	return res, deleteJoinedNodes(ctx, b.cs)
}

// durStats is p50, p99 and max in seconds, NaN for none.
func durStats(ds []time.Duration) [3]float64 {
	if len(ds) == 0 {
		return [3]float64{math.NaN(), math.NaN(), math.NaN()}
	}
	return [3]float64{percentile(ds, 50).Seconds(), percentile(ds, 99).Seconds(), percentile(ds, 100).Seconds()}
}

// setDone says whether the named set's status shows its generation
// observed and every pod updated and available.
func (b *bench) setDone(ctx context.Context, s system, name string) bool {
	u, err := b.w.dyn.Resource(s.gvr).Namespace(benchNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	st := func(f string) int64 { v, _, _ := unstructured.NestedInt64(u.Object, "status", f); return v }
	return st("observedGeneration") >= u.GetGeneration() && st("updatedNumberScheduled") == st("desiredNumberScheduled") &&
		st("numberAvailable") == st("desiredNumberScheduled")
}

// teardownSets deletes the sets, their revisions and pods (the garbage
// collector may be off), and waits for the pods to go.
func (b *bench) teardownSets(ctx context.Context, s system, names []string) error {
	for _, n := range names {
		if err := b.w.dyn.Resource(s.gvr).Namespace(benchNamespace).Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s: %w", n, err)
		}
	}
	time.Sleep(2 * time.Second)
	crs := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "controllerrevisions"}
	_ = b.w.dyn.Resource(crs).Namespace(benchNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: churnLabel + "=true"})
	zero := int64(0)
	for range 600 {
		list, err := b.cs.CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{LabelSelector: churnLabel + "=true", Limit: 1})
		if err == nil && len(list.Items) == 0 {
			return nil
		}
		for _, n := range names {
			sel := metav1.ListOptions{LabelSelector: churnSetLabel + "=" + n}
			if err := b.cs.CoreV1().Pods(benchNamespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, sel); err != nil {
				logf("teardown: deleting the pods of %s: %v (trying again)", n, err)
			}
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("order pods still there after 10 minutes")
}

// writeOrderReport writes <out>/<N>-nodes-order.md.
func writeOrderReport(c config, runs []*orderResult, start time.Time) (string, error) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Start order under churn, %d nodes\n\n", c.nodes)
	fmt.Fprintf(&sb, "%s, everynode %s, %d rounds, client QPS %d, burst %d. The chain %s <- %s <- %s (spec.startAfter) "+
		"while %s rolls (maxUnavailable 10%%) back and forth and %d nodes join, one every %s. Per joined node: join is node created "+
		"to %s Ready; the chain's own time is the sum of each daemon's bound-to-Ready; the wait is %s bound to %s Ready less the "+
		"chain's own time (what the ordering costs). Writes: the controller's pod patches (gate removals) against the chain's "+
		"pods created gated; the goal is one each, and none for the others.\n\n",
		start.Format("2006-01-02 15:04"), c.rev, c.rounds, c.qps, c.burst, orderChain[0].name, orderChain[1].name, orderChain[2].name,
		churnSetName(0), churnJoins, churnEvery, orderChain[2].name, orderChain[0].name, orderChain[2].name)
	sb.WriteString("| run | joined | settled | join p50 / p99 / max s | chain's own p50 / p99 s | wait p50 / p99 / max s | order violations | chain pods | created gated | gate never seen removed | pod patches | pod creates | extra writes per chain pod | per gated pod | updates of churn-0 |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].round < runs[j].round })
	for _, r := range runs {
		perPod, perGated := "–", "–"
		if r.auditRead && r.chainPods > 0 {
			perPod = fmt.Sprintf("%.3f", float64(r.patches)/float64(r.chainPods))
			if r.gated > 0 {
				perGated = fmt.Sprintf("%.3f", float64(r.patches)/float64(r.gated))
			}
		}
		fmt.Fprintf(&sb, "| r%d | %d | %d | %s / %s / %s | %s / %s | %s / %s / %s | %d | %d | %d | %d | %d | %d | %s | %s | %d |\n",
			r.round, r.joined, r.settled, fmtNum(r.join[0]), fmtNum(r.join[1]), fmtNum(r.join[2]), fmtNum(r.own[0]), fmtNum(r.own[1]),
			fmtNum(r.waitFor[0]), fmtNum(r.waitFor[1]), fmtNum(r.waitFor[2]), r.violations, r.chainPods, r.gated, r.gatedNotRemoved,
			r.patches, r.creates, perPod, perGated, r.updates)
	}
	path := reportBase(c.out, c.nodes) + "-order.md"
	return path, os.WriteFile(path, []byte(sb.String()), 0o644)
}
