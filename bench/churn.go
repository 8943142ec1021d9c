package main

import (
	"context"
	"encoding/json"
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// The join-under-churn scenario (issue 35, --scenario=churn). A real
// cluster runs many DaemonSets, and nodes join while one of them is in the
// middle of a long rolling update: that is when a new node waits for its
// CNI, CSI and log agents (kubernetes#121474, #128442). Per system:
//
//  1. ten sets from the manifest, a mix like a real cluster's: two select
//     a node pool (only half the joining nodes are in it), one uses the
//     host network, one tolerates every taint, the rest run everywhere;
//  2. once all are available, set 0 rolls (maxUnavailable 10%) from one
//     image to the other and back, again and again, so its requests keep
//     the controller's client budget busy for the whole window;
//  3. meanwhile churnJoins nodes join, one every churnEvery;
//  4. the figure, per joined node: from its create to the moment every
//     daemon pod that belongs there is available (any revision of set 0).
const (
	churnSets  = 10
	churnJoins = 240
	churnEvery = 500 * time.Millisecond
	// churnLabel is on every churn set's pods; churnSetLabel names the set.
	churnLabel    = "bench.everynode.io/churn"
	churnSetLabel = "bench.everynode.io/churn-set"
	churnPool     = "bench.everynode.io/pool"
)

// churnSetName is set i's name.
func churnSetName(i int) string { return fmt.Sprintf("churn-%d", i) }

// churnInPool says whether set i runs only on nodes of pool a.
func churnInPool(i int) bool { return i == 4 || i == 5 }

// churnObject is set i of the mix, for system s.
func (w *workload) churnObject(s system, i int) *unstructured.Unstructured {
	u := w.object(s, image1)
	name := churnSetName(i)
	u.SetName(name)
	labels := map[string]any{churnLabel: "true", churnSetLabel: name}
	_ = unstructured.SetNestedMap(u.Object, map[string]any{"matchLabels": map[string]any{churnSetLabel: name}}, "spec", "selector")
	_ = unstructured.SetNestedMap(u.Object, labels, "spec", "template", "metadata", "labels")
	switch {
	case churnInPool(i):
		_ = unstructured.SetNestedStringMap(u.Object, map[string]string{churnPool: "a"}, "spec", "template", "spec", "nodeSelector")
	case i == 6:
		_ = unstructured.SetNestedField(u.Object, true, "spec", "template", "spec", "hostNetwork")
	case i == 7:
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"operator": "Exists"}}, "spec", "template", "spec", "tolerations")
	}
	return u
}

// churnResult is one system's run of the scenario.
type churnResult struct {
	system          string
	round           int
	joined, settled int
	p50, p99, max   float64 // seconds, per joined node
	updates         int     // rollouts of set 0 finished in the window
	window          float64 // seconds from the first join to the last node settled
}

// churnOnce runs the scenario once for s.
func (b *bench) churnOnce(ctx context.Context, s system, round int) (*churnResult, error) {
	lbl := b.label(s, round)
	res := &churnResult{system: s.name, round: round}
	avail := newAvailability()
	stopInformer, err := avail.start(ctx, b)
	if err != nil {
		return nil, err
	}
	defer stopInformer()

	logf("%s churn: %d sets", lbl, churnSets)
	for i := range churnSets {
		if _, err := b.w.dyn.Resource(s.gvr).Namespace(benchNamespace).Create(ctx, b.w.churnObject(s, i), metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating %s %s: %w", s.name, churnSetName(i), err)
		}
	}
	if err := b.churnWaitAll(ctx, lbl, s, "the sets available"); err != nil {
		return nil, err
	}
	b.settle(ctx, lbl)

	// Set 0 rolls back and forth until the joins are done.
	rolling, stopRolling := context.WithCancel(ctx)
	defer stopRolling()
	var updates atomic.Int64
	var churnDone sync.WaitGroup
	churnDone.Go(func() {
		img := image2
		for rolling.Err() == nil {
			if err := b.churnPatchImage(ctx, s, img); err != nil {
				logf("%s churn: %v", lbl, err)
				return
			}
			if err := wait.PollUntilContextCancel(rolling, 250*time.Millisecond, true, func(context.Context) (bool, error) {
				return b.churnSetDone(ctx, s, 0), nil
			}); err != nil {
				return
			}
			updates.Add(1)
			img = map[string]string{image2: image3, image3: image2}[img]
		}
	})
	// Let the first update take the budget before the first node joins.
	time.Sleep(2 * time.Second)

	logf("%s churn: %d nodes join, one every %s, while %s rolls", lbl, churnJoins, churnEvery, churnSetName(0))
	var (
		mu      sync.Mutex
		created = map[string]time.Time{}
		inPool  = map[string]bool{}
		joins   sync.WaitGroup
	)
	first := time.Now()
	tick := time.NewTicker(churnEvery)
	for i := range churnJoins {
		if i > 0 {
			<-tick.C
		}
		pool := map[bool]string{true: "a", false: "b"}[i%2 == 0]
		joins.Go(func() {
			nt, err := joinNodes(ctx, b.cs, fmt.Sprintf("churn-r%d-%s-%03d", round, s.name, i), 1, map[string]string{churnPool: pool}, b.c.phaseTimeout)
			if err != nil {
				logf("%s churn: %v", lbl, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for n, t := range nt {
				created[n], inPool[n] = t.created, pool == "a"
			}
		})
	}
	tick.Stop()
	joins.Wait()

	// Every joined node's wait, once all have settled or the phase times out.
	var waits []time.Duration
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, b.c.phaseTimeout, true, func(context.Context) (bool, error) {
		waits = waits[:0]
		for n, at := range created {
			if done, ok := avail.nodeDone(n, inPool[n]); ok {
				waits = append(waits, done.Sub(at))
			}
		}
		return len(waits) == len(created), nil
	})
	res.window = time.Since(first).Seconds()
	stopRolling()
	churnDone.Wait()
	res.joined, res.settled, res.updates = len(created), len(waits), int(updates.Load())
	res.p50, res.p99, res.max = math.NaN(), math.NaN(), math.NaN()
	if len(waits) > 0 && len(waits) == len(created) {
		res.p50, res.p99 = percentile(waits, 50).Seconds(), percentile(waits, 99).Seconds()
		res.max = percentile(waits, 100).Seconds()
	}
	logf("%s churn: %d of %d joined nodes settled; per node p50 %.2fs p99 %.2fs max %.2fs; %d updates of %s meanwhile",
		lbl, res.settled, res.joined, res.p50, res.p99, res.max, res.updates, churnSetName(0))

	logf("%s churn: cleaning up", lbl)
	if err := b.churnTeardown(ctx, s); err != nil {
		return nil, err
	}
	return res, deleteJoinedNodes(ctx, b.cs)
}

// churnPatchImage rolls set 0 to img with maxUnavailable 10%.
func (b *bench) churnPatchImage(ctx context.Context, s system, img string) error {
	patch, _ := json.Marshal([]map[string]any{
		{"op": "add", "path": "/spec/updateStrategy", "value": map[string]any{"type": "RollingUpdate",
			"rollingUpdate": map[string]any{"maxUnavailable": "10%", "maxSurge": 0}}},
		{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": img},
	})
	_, err := b.w.dyn.Resource(s.gvr).Namespace(benchNamespace).Patch(ctx, churnSetName(0), types.JSONPatchType, patch, metav1.PatchOptions{})
	return err
}

// churnSetDone says whether set i's status shows its generation observed
// and every pod updated and available.
func (b *bench) churnSetDone(ctx context.Context, s system, i int) bool {
	u, err := b.w.dyn.Resource(s.gvr).Namespace(benchNamespace).Get(ctx, churnSetName(i), metav1.GetOptions{})
	if err != nil {
		return false
	}
	gen := u.GetGeneration()
	st := func(f string) int64 { v, _, _ := unstructured.NestedInt64(u.Object, "status", f); return v }
	return st("observedGeneration") >= gen && st("updatedNumberScheduled") == st("desiredNumberScheduled") &&
		st("numberAvailable") == st("desiredNumberScheduled")
}

func (b *bench) churnWaitAll(ctx context.Context, lbl string, s system, what string) error {
	done := 0
	// The reads take ctx, not the poll's: a pass begun before the deadline
	// counts every set.
	err := wait.PollUntilContextTimeout(ctx, time.Second, b.c.phaseTimeout, true, func(context.Context) (bool, error) {
		done = 0
		for i := range churnSets {
			if b.churnSetDone(ctx, s, i) {
				done++
			}
		}
		return done == churnSets, nil
	})
	if err != nil {
		return fmt.Errorf("%s: %d of %d sets done after %s", what, done, churnSets, b.c.phaseTimeout)
	}
	return nil
}

// churnTeardown deletes the sets, then their pods and revisions itself (the
// garbage collector may be off), and waits for the pods to go.
func (b *bench) churnTeardown(ctx context.Context, s system) error {
	for i := range churnSets {
		err := b.w.dyn.Resource(s.gvr).Namespace(benchNamespace).Delete(ctx, churnSetName(i), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s: %w", churnSetName(i), err)
		}
	}
	time.Sleep(2 * time.Second) // the controller stops making pods for the deleted sets
	crs := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "controllerrevisions"}
	_ = b.w.dyn.Resource(crs).Namespace(benchNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: churnLabel + "=true"})
	// One set's pods a call: all of them at once (10,000 at 1,000 nodes)
	// outlasted kube-apiserver's request timeout. A failed call is tried
	// again until the pods are gone.
	zero := int64(0)
	for range 600 {
		list, err := b.cs.CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{LabelSelector: churnLabel + "=true", Limit: 1})
		if err == nil && len(list.Items) == 0 {
			return nil
		}
		for i := range churnSets {
			sel := metav1.ListOptions{LabelSelector: churnSetLabel + "=" + churnSetName(i)}
			if err := b.cs.CoreV1().Pods(benchNamespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, sel); err != nil {
				logf("churn teardown: deleting the pods of %s: %v (trying again)", churnSetName(i), err)
			}
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("churn pods still there after 10 minutes")
}

// availability records, per node and set, when a pod of the set on the
// node was first seen available (Ready; the sets have no minReadySeconds).
type availability struct {
	mu sync.Mutex
	at map[string]map[string]time.Time // node -> set -> first seen available
}

func newAvailability() *availability {
	return &availability{at: map[string]map[string]time.Time{}}
}

func (a *availability) start(ctx context.Context, b *bench) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(b.cs, 0, informers.WithNamespace(benchNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = churnLabel + "=true" }))
	inf := factory.Core().V1().Pods().Informer()
	observe := func(o any) {
		p, ok := o.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" || !podReady(p) {
			return
		}
		now := time.Now()
		set := p.Labels[churnSetLabel]
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.at[p.Spec.NodeName] == nil {
			a.at[p.Spec.NodeName] = map[string]time.Time{}
		}
		if _, seen := a.at[p.Spec.NodeName][set]; !seen {
			a.at[p.Spec.NodeName][set] = now
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: observe, UpdateFunc: func(_, o any) { observe(o) }}); err != nil {
		cancel()
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("churn pod informer did not sync")
	}
	return func() { cancel(); factory.Shutdown() }, nil
}

// nodeDone is when the last daemon pod that belongs on node turned
// available, if all have.
func (a *availability) nodeDone(node string, inPool bool) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var last time.Time
	for i := range churnSets {
		if churnInPool(i) && !inPool {
			continue
		}
		at, ok := a.at[node][churnSetName(i)]
		if !ok {
			return time.Time{}, false
		}
		if at.After(last) {
			last = at
		}
	}
	return last, true
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// writeChurnReport writes <out>/<N>-nodes-churn.md: the per-node figures of
// every run, and the medians with the tie rule.
func writeChurnReport(c config, runs []*churnResult, start time.Time) (string, error) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Join under churn, %d nodes\n\n", c.nodes)
	fmt.Fprintf(&sb, "%s, everynode %s, %d rounds of A (apps/v1, kube-controller-manager) and B (everynode.io/v1alpha1) alternated, "+
		"both at client QPS %d, burst %d. %d sets (two on half the joining nodes, one hostNetwork, one tolerating everything); "+
		"set 0 rolls (maxUnavailable 10%%) back and forth while %d nodes join, one every %s. "+
		"Figure: per joined node, create to every daemon pod of it available. Each cell: median (min–max) over the rounds; "+
		"a ratio (everynode / upstream) counts only where the medians differ by more than the larger spread, otherwise tie.\n\n",
		start.Format("2006-01-02 15:04"), c.rev, c.rounds, c.qps, c.burst, churnSets, churnJoins, churnEvery)
	fig := func(name, unit string, get func(*churnResult) float64) {
		var a, b []float64
		for _, r := range runs {
			if r.system == upstream.name {
				a = append(a, get(r))
			} else {
				b = append(b, get(r))
			}
		}
		sa, sb2 := summarize(a), summarize(b)
		ratio := "–"
		if sa.median > 0 && !math.IsNaN(sb2.median) {
			spread := math.Max(sa.max-sa.min, sb2.max-sb2.min)
			ratio = fmt.Sprintf("%.2f", sb2.median/sa.median)
			if math.Abs(sb2.median-sa.median) <= spread {
				ratio += " (tie)"
			}
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s |\n", name, unit, fmtSummary(sa), fmtSummary(sb2), ratio)
	}
	sb.WriteString("| figure | unit | upstream (apps/v1) | everynode | ratio |\n|---|---|---|---|---|\n")
	fig("join under churn p50", "s", func(r *churnResult) float64 { return r.p50 })
	fig("join under churn p99", "s", func(r *churnResult) float64 { return r.p99 })
	fig("join under churn, slowest node", "s", func(r *churnResult) float64 { return r.max })
	fig("updates of set 0 during the window", "n", func(r *churnResult) float64 { return float64(r.updates) })
	fig("window (first join to last node settled)", "s", func(r *churnResult) float64 { return r.window })
	sb.WriteString("\n| run | joined | settled | p50 s | p99 s | max s | updates |\n|---|---|---|---|---|---|---|\n")
	sorted := append([]*churnResult(nil), runs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].round < sorted[j].round })
	for _, r := range sorted {
		fmt.Fprintf(&sb, "| %s r%d | %d | %d | %s | %s | %s | %d |\n", r.system, r.round, r.joined, r.settled,
			fmtNum(r.p50), fmtNum(r.p99), fmtNum(r.max), r.updates)
	}
	path := reportBase(c.out, c.nodes) + "-churn.md"
	return path, os.WriteFile(path, []byte(sb.String()), 0o644)
}
