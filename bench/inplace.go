package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The in-place scenario (issue 33, --scenario=inplace): a rolling update of
// the image, maxUnavailable 10%, at equal client QPS:
//
//   - upstream: apps/v1, kube-controller-manager, recreating each pod;
//   - everynode in place: podUpdatePolicy InPlaceIfPossible with the
//     readiness gate (the default): gate False, patch, gate True;
//   - everynode in place, no gate: inPlaceReadinessGate false: the patch.
//
// With --peers=kruise two more run by default:
//
//   - everynode in place, gate if served: inPlaceGatePolicy IfServed, the
//     gate closed only for a pod an EndpointSlice lists (none here: no
//     Service selects the bench's pods), so the patch alone;
//   - Kruise in place: OpenKruise's Advanced DaemonSet, rollingUpdateType
//     InPlaceIfPossible (its pods made with its InPlaceUpdateReady gate):
//     gate False, patch, gate True, as everynode's gated update.
//
// Per variant: create the set, wait for it on every node, let the cluster
// go quiet, then time the update from the patch of the set until every
// node runs an available pod whose container runs the new image (kwok
// restarts a patched container a second after the change, e2e/kwok), and
// count the controller's requests in that window from the audit log.

// inPlaceVariant is one side of the comparison.
type inPlaceVariant struct {
	// key names it in --inplace-variants.
	key  string
	name string
	sys  system
	// rollingUpdate is the set's spec.updateStrategy.rollingUpdate.
	rollingUpdate map[string]any
	// base is the key of the variant its ratio is taken against; "" for
	// the first variant (upstream's recreate).
	base string
	// until, when not 0, ends the timing once that many nodes run an
	// available pod of the new image: a rollout one pod at a time over
	// 1,000 nodes takes minutes, and its first steps show its pace.
	until int
	// extra variants run only when --inplace-variants names them.
	extra bool
	// withPeers variants run by default only beside a peer (--peers):
	// the comparison they are for needs it.
	withPeers bool
	// served variants have a Service select their pods on one node in
	// servedEvery (served.go).
	served bool
}

// stepPods is how many nodes the maxUnavailable-1 variants time.
const stepPods = 100

var inPlaceVariants = []inPlaceVariant{
	{key: "upstream", name: "upstream (recreate)", sys: upstream,
		rollingUpdate: map[string]any{"maxUnavailable": "10%", "maxSurge": int64(0)}},
	{key: "gate", name: "everynode in place", sys: everynode,
		rollingUpdate: map[string]any{"maxUnavailable": "10%", "maxSurge": int64(0), "podUpdatePolicy": "InPlaceIfPossible"}},
	{key: "nogate", name: "everynode in place, no gate", sys: everynode,
		rollingUpdate: map[string]any{"maxUnavailable": "10%", "maxSurge": int64(0), "podUpdatePolicy": "InPlaceIfPossible", "inPlaceReadinessGate": false}},
	{key: "ifserved", name: "everynode in place, gate if served", sys: everynode, withPeers: true,
		rollingUpdate: map[string]any{"maxUnavailable": "10%", "maxSurge": int64(0), "podUpdatePolicy": "InPlaceIfPossible", "inPlaceGatePolicy": "IfServed"}},
	// The same with a Service selecting the pods of 10% of the nodes:
	// those get the full gate, the rest the patch alone.
	{key: "served", name: "everynode in place, gate if served, 10% served", sys: everynode, withPeers: true, served: true,
		rollingUpdate: map[string]any{"maxUnavailable": "10%", "maxSurge": int64(0), "podUpdatePolicy": "InPlaceIfPossible", "inPlaceGatePolicy": "IfServed"}},
	// Kruise's in-place update: its rollingUpdateType (v1.8.2) with the
	// same budget; Kruise refuses maxSurge with it, as everynode does.
	{key: "kruise", name: "Kruise in place", sys: kruise,
		rollingUpdate: map[string]any{"rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": "10%", "maxSurge": int64(0)}},
	// The default strategy's pace, one pod at a time: each step waits for
	// the pod just replaced to turn ready (controller/pacing.PodEventDelay).
	{key: "upstream-1", name: "upstream (recreate), maxUnavailable 1", sys: upstream, until: stepPods, extra: true,
		rollingUpdate: map[string]any{"maxUnavailable": int64(1), "maxSurge": int64(0)}},
	{key: "recreate-1", name: "everynode (recreate), maxUnavailable 1", sys: everynode, until: stepPods, extra: true, base: "upstream-1",
		rollingUpdate: map[string]any{"maxUnavailable": int64(1), "maxSurge": int64(0)}},
}

// updateStrategy is the set's spec.updateStrategy for v.
func (v inPlaceVariant) updateStrategy() map[string]any {
	return map[string]any{"type": "RollingUpdate", "rollingUpdate": v.rollingUpdate}
}

// pods is how many nodes v's timing covers.
func (v inPlaceVariant) pods(nodes int) int {
	if v.until > 0 && v.until < nodes {
		return v.until
	}
	return nodes
}

// inPlaceResult is one variant's run.
type inPlaceResult struct {
	variant string
	round   int
	// update is the update's seconds, NaN on timeout.
	update float64
	// requests are the controller's requests in the update's window, by
	// "verb resource" (everynode's "create pods" includes its validating
	// webhook's server-side dry run of the new template: same identity);
	// podsMade the pods created in it that are still there.
	requests map[string]int
	total    int
	podsMade int
}

func (b *bench) inPlaceOnce(ctx context.Context, v inPlaceVariant, round int) (*inPlaceResult, error) {
	lbl := fmt.Sprintf("[%s r%d]", v.name, round)
	res := &inPlaceResult{variant: v.name, round: round}
	b.quiet(ctx, lbl, 5*time.Minute)
	b.t.resetSeen()
	obj := b.w.object(v.sys, image1)
	_ = unstructured.SetNestedMap(obj.Object, v.updateStrategy(), "spec", "updateStrategy")
	served := 0
	if v.served {
		n, undo, err := b.serve(ctx, lbl, obj)
		if err != nil {
			return nil, err
		}
		defer undo(context.WithoutCancel(ctx))
		served = n
	}
	logf("%s rollout on %d nodes", lbl, b.c.nodes)
	t0 := time.Now()
	if _, err := b.w.dyn.Resource(v.sys.gvr).Namespace(benchNamespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating %s DaemonSet: %w", v.name, err)
	}
	b.wait(ctx, lbl+" rollout", t0, image1, false)
	if v.sys.name == everynode.name {
		b.flushDeferred(ctx, lbl)
	}
	b.settle(ctx, lbl)
	if served > 0 {
		if err := b.listServed(ctx, lbl, served); err != nil {
			return nil, err
		}
	}
	b.quiet(ctx, lbl, 5*time.Minute)

	before := b.m.snapshot(ctx)
	b.t.resetSeen()
	logf("%s rolling update of the image, %v, timed over %d nodes", lbl, v.rollingUpdate, v.pods(b.c.nodes))
	t1 := time.Now()
	var err error
	if res.update, err = b.updateImage(ctx, lbl, v.sys.gvr, t1, v.sys.name == everynode.name, v.pods(b.c.nodes)); err != nil {
		return nil, err
	}
	// The audit log is written asynchronously: give it a moment.
	time.Sleep(3 * time.Second)
	end := time.Now()
	if v.until > 0 && !math.IsNaN(res.update) {
		// The rollout goes on past the nodes timed: count only their
		// window.
		end = t1.Add(time.Duration(res.update * float64(time.Second)))
	}
	res.podsMade = b.t.createdSince(t1)
	if b.c.auditLog != "" {
		aw, err := readAudit(b.c.auditLog, before.auditOffset, t1, end)
		if err != nil {
			logf("%s warning: %v", lbl, err)
		}
		res.requests, res.total = aw.byVerbResource[v.sys.client], aw.byClient[v.sys.client]
	}
	logf("%s update %.1fs; %d controller requests (%.2f per pod), %d pods made: %v",
		lbl, res.update, res.total, float64(res.total)/float64(v.pods(b.c.nodes)), res.podsMade, res.requests)

	logf("%s cleaning up", lbl)
	if err := b.w.teardown(ctx, v.sys, b.t); err != nil {
		return nil, err
	}
	return res, nil
}

// newPodStart says how kwok started the new pods of upstream's recreate.
func newPodStart(c config) string {
	if c.kwokStartDelay {
		return "New pods start as slowly as a restart in place: waiting in ContainerCreating a second after their binding, running a second later (e2e/kwok/start-delay.yaml)."
	}
	return "New pods are Running and Ready the moment they are bound (kwok's pod-ready), which no kubelet does: recreate gets a start faster than a restart in place."
}

// writeInPlaceReport writes <out>/<N>-nodes-inplace.md: the update times
// and requests per pod of every variant, with the tie rule against
// upstream's recreate.
func writeInPlaceReport(c config, runs []*inPlaceResult, start time.Time) (string, error) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Rolling update in place, %d nodes\n\n", c.nodes)
	fmt.Fprintf(&sb, "%s, everynode %s, %d rounds of the variants alternated, all at client QPS %d, burst %d. "+
		"The image of the set changes, maxUnavailable 10%%: upstream (apps/v1, kube-controller-manager) recreates each pod; "+
		"everynode patches it in place, with its readiness gate (gate False, patch, gate True) and without. "+
		"The maxUnavailable 1 variants (`--inplace-variants=upstream-1,recreate-1`) recreate one pod at a time, the default strategy, and are timed over their first %d nodes; their ratio is everynode's against upstream's. "+
		"Figure: from the set's patch until every node (or every node timed) has an available pod whose container runs the new image (kwok restarts a "+
		"patched container after one second, e2e/kwok). %s Requests: the controller's, from the audit log, in that window (everynode's one \"create pods\" is its validating webhook's dry run of the new template, made under the same identity). "+
		"Each cell: median (min–max) over the rounds; a ratio (variant / upstream) counts only where the medians differ by more "+
		"than the larger spread, otherwise tie.\n\n",
		start.Format("2006-01-02 15:04"), c.rev, c.rounds, c.qps, c.burst, stepPods, newPodStart(c))
	get := func(name string, f func(*inPlaceResult) float64) summary {
		var xs []float64
		for _, r := range runs {
			if r.variant == name {
				xs = append(xs, f(r))
			}
		}
		return summarize(xs)
	}
	update := func(r *inPlaceResult) float64 { return r.update }
	// Kruise's column, only when its variant ran: the report of the two
	// systems stays as it was.
	kruiseName := ""
	if i := slices.IndexFunc(inPlaceVariants, func(v inPlaceVariant) bool { return v.sys.name == kruise.name }); get(inPlaceVariants[i].name, update).n > 0 {
		kruiseName = inPlaceVariants[i].name
		sb.WriteString("Kruise in place: OpenKruise's Advanced DaemonSet (apps.kruise.io/v1alpha1, kruise-manager), rollingUpdateType InPlaceIfPossible, which makes its pods with its readiness gate InPlaceUpdateReady and, per pod, writes it False, patches the image and writes it True; " +
			"everynode in place, gate if served: inPlaceGatePolicy IfServed, with no Service selecting the bench's pods, so the patch alone; " +
			"with 10% served, a Service selects the pods of one node in ten (labelled through the set's nodeOverrides), which get the full gate. The last column is the variant's median over Kruise's, under the same tie rule.\n\n")
		sb.WriteString("| variant | nodes timed | update s | ratio to upstream | controller requests per pod | pods created | ratio to Kruise in place |\n|---|---|---|---|---|---|---|\n")
	} else {
		sb.WriteString("| variant | nodes timed | update s | ratio to upstream | controller requests per pod | pods created |\n|---|---|---|---|---|---|\n")
	}
	ratioTo := func(s, base summary) string {
		ratio := fmt.Sprintf("%.2f", s.median/base.median)
		if math.Abs(s.median-base.median) <= math.Max(base.max-base.min, s.max-s.min) {
			ratio += " (tie)"
		}
		return ratio
	}
	for _, v := range inPlaceVariants {
		if get(v.name, update).n == 0 {
			continue
		}
		s := get(v.name, update)
		base := get(v.baseName(), update)
		ratio := "–"
		if v.sys.name != upstream.name && base.median > 0 && !math.IsNaN(s.median) {
			ratio = ratioTo(s, base)
		}
		made := get(v.name, func(r *inPlaceResult) float64 { return float64(r.podsMade) })
		perPod := get(v.name, func(r *inPlaceResult) float64 { return float64(r.total) / float64(v.pods(c.nodes)) })
		fmt.Fprintf(&sb, "| %s | %d | %s | %s | %s | %s |", v.name, v.pods(c.nodes), fmtSummary(s), ratio, fmtSummary(perPod), fmtNum(made.median))
		if kruiseName != "" {
			k, toKruise := get(kruiseName, update), "–"
			if v.sys.name == everynode.name && v.until == 0 && k.median > 0 && !math.IsNaN(s.median) {
				toKruise = ratioTo(s, k)
			}
			fmt.Fprintf(&sb, " %s |", toKruise)
		}
		sb.WriteString("\n")
	}
	sb.WriteString("\nRequests by verb and resource, per run:\n\n| run | update s | requests | by verb and resource |\n|---|---|---|---|\n")
	sorted := append([]*inPlaceResult(nil), runs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].round < sorted[j].round })
	for _, r := range sorted {
		fmt.Fprintf(&sb, "| %s r%d | %s | %d | %s |\n", r.variant, r.round, fmtNum(r.update), r.total, byVerbResource(r.requests))
	}
	path := reportBase(c.out, c.nodes) + "-inplace" + c.peersSuffix() + ".md"
	return path, os.WriteFile(path, []byte(sb.String()), 0o644)
}

// byVerbResource writes request counts by "verb resource", sorted.
func byVerbResource(requests map[string]int) string {
	keys := make([]string, 0, len(requests))
	for k := range requests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, requests[k]))
	}
	return strings.Join(parts, ", ")
}

// baseName is the name of the variant v's ratio is taken against.
func (v inPlaceVariant) baseName() string {
	for _, b := range inPlaceVariants {
		if b.key == v.base {
			return b.name
		}
	}
	return inPlaceVariants[0].name
}

// selectedVariants returns the variants whose keys are listed (comma
// separated) and whose systems run; when keys is empty, all but the
// extra ones, and those for a peer only when a peer runs.
func selectedVariants(keys string, systems []system) ([]inPlaceVariant, error) {
	peers := len(systems) > 2
	runs := func(v inPlaceVariant) bool {
		return slices.ContainsFunc(systems, func(s system) bool { return s.name == v.sys.name })
	}
	if keys == "" {
		var out []inPlaceVariant
		for _, v := range inPlaceVariants {
			if !v.extra && runs(v) && (peers || !v.withPeers) {
				out = append(out, v)
			}
		}
		return out, nil
	}
	var out []inPlaceVariant
	for _, k := range strings.Split(keys, ",") {
		i := slices.IndexFunc(inPlaceVariants, func(v inPlaceVariant) bool { return v.key == k })
		if i < 0 {
			return nil, fmt.Errorf("--inplace-variants: unknown variant %q (want upstream, gate, nogate, ifserved, served, kruise, upstream-1, recreate-1)", k)
		}
		if v := inPlaceVariants[i]; !runs(v) {
			return nil, fmt.Errorf("--inplace-variants: variant %q needs --peers=%s", k, v.sys.name)
		}
		out = append(out, inPlaceVariants[i])
	}
	return out, nil
}
