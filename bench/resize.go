package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The resize scenario (issue 57, --scenario=resize): every pod's cpu
// request goes from 100m to 200m, maxUnavailable 10%, at equal client QPS:
//
//   - upstream: apps/v1, the template's request changes, a new revision
//     recreates every pod;
//   - everynode recreate: the same template change on an everynode set;
//   - everynode resize: the set's spec.nodeSizing changes instead, and
//     every running pod is resized in place (pods/resize).
//
// Figure: from the set's patch until every node runs an available pod
// whose spec asks 200m and, for a resized pod, whose kubelet (kwok's
// kubelet-resize, a second after the change) reports 200m. Requests: the
// controller's, from the audit log, in that window.

const (
	resizeFrom = 100 // millicores, the fluentd manifest's request
	resizeTo   = 200
)

type resizeVariant struct {
	// key names it in --resize-variants.
	key  string
	name string
	sys  system
	// sizing: change spec.nodeSizing rather than the template.
	sizing bool
}

var resizeVariants = []resizeVariant{
	{key: "upstream", name: "upstream (recreate)", sys: upstream},
	{key: "recreate", name: "everynode (recreate)", sys: everynode},
	{key: "resize", name: "everynode (resize in place)", sys: everynode, sizing: true},
}

// selectedResizeVariants returns the variants whose keys are listed
// (comma separated), all when keys is empty.
func selectedResizeVariants(keys string) ([]resizeVariant, error) {
	if keys == "" {
		return resizeVariants, nil
	}
	var out []resizeVariant
	for _, k := range strings.Split(keys, ",") {
		i := slices.IndexFunc(resizeVariants, func(v resizeVariant) bool { return v.key == strings.TrimSpace(k) })
		if i < 0 {
			return nil, fmt.Errorf("--resize-variants: no variant %q (upstream, recreate, resize)", k)
		}
		out = append(out, resizeVariants[i])
	}
	return out, nil
}

type resizeResult struct {
	variant  string
	round    int
	update   float64
	requests map[string]int
	total    int
	podsMade int
}

// cpuShare is a nodeSizing share that gives exactly milli millicores on a
// node of allocatable cpu alloc (in millicores): the fraction milli/alloc,
// and min milli in case the decimal rounds a millicore away. Every bench
// node has the same allocatable, so every pod gets the same request.
func cpuShare(milli, alloc int64) map[string]any {
	f := strconv.FormatFloat(float64(milli)/float64(alloc), 'f', -1, 64)
	if len(f) > 16 {
		f = f[:16]
	}
	return map[string]any{"fraction": f, "min": fmt.Sprintf("%dm", milli)}
}

func (b *bench) nodeCPU(ctx context.Context) (int64, error) {
	list, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || len(list.Items) == 0 {
		return 0, fmt.Errorf("reading a node's allocatable cpu: %v", err)
	}
	q := list.Items[0].Status.Allocatable[corev1.ResourceCPU]
	return q.MilliValue(), nil
}

// cpuRequest is a pod's first container's cpu request in millicores, and
// what its kubelet reports (-1: nothing reported).
func cpuRequest(p *corev1.Pod) (spec, status int64) {
	q := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
	status = -1
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == p.Spec.Containers[0].Name && s.Resources != nil {
			r := s.Resources.Requests[corev1.ResourceCPU]
			status = r.MilliValue()
		}
	}
	return q.MilliValue(), status
}

func (b *bench) resizeOnce(ctx context.Context, v resizeVariant, round int) (*resizeResult, error) {
	lbl := fmt.Sprintf("[%s r%d]", v.name, round)
	res := &resizeResult{variant: v.name, round: round}
	b.quiet(ctx, lbl, 5*time.Minute)
	b.t.resetSeen()
	obj := b.w.object(v.sys, image1)
	_ = unstructured.SetNestedMap(obj.Object, map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": "10%", "maxSurge": int64(0)}}, "spec", "updateStrategy")
	alloc, err := b.nodeCPU(ctx)
	if err != nil {
		return nil, err
	}
	if v.sizing {
		rule := []any{map[string]any{"name": containerName(obj), "resources": []any{
			map[string]any{"resource": "cpu", "requests": cpuShare(resizeFrom, alloc)},
		}}}
		_ = unstructured.SetNestedSlice(obj.Object, rule, "spec", "nodeSizing")
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
	b.quiet(ctx, lbl, 5*time.Minute)

	before := b.m.snapshot(ctx)
	b.t.resetSeen()
	var patch []map[string]any
	if v.sizing {
		patch = []map[string]any{{"op": "replace", "path": "/spec/nodeSizing/0/resources/0/requests", "value": cpuShare(resizeTo, alloc)}}
	} else {
		patch = []map[string]any{{"op": "replace", "path": "/spec/template/spec/containers/0/resources/requests/cpu", "value": fmt.Sprintf("%dm", resizeTo)}}
	}
	body, _ := json.Marshal(patch)
	logf("%s cpu request %dm -> %dm (%s)", lbl, resizeFrom, resizeTo, map[bool]string{true: "spec.nodeSizing", false: "the template"}[v.sizing])
	t1 := time.Now()
	if _, err := b.w.dyn.Resource(v.sys.gvr).Namespace(benchNamespace).Patch(ctx, "fluentd-elasticsearch", types.JSONPatchType, body, metav1.PatchOptions{}); err != nil {
		return nil, fmt.Errorf("patching %s DaemonSet: %w", v.name, err)
	}
	res.update = b.waitSized(ctx, lbl+" update", t1, v.sizing)
	if v.sys.name == everynode.name {
		b.flushDeferred(ctx, lbl)
	}
	time.Sleep(3 * time.Second) // the audit log is written asynchronously
	end := time.Now()
	res.podsMade = b.t.createdSince(t1)
	if b.c.auditLog != "" {
		aw, err := readAudit(b.c.auditLog, before.auditOffset, t1, end)
		if err != nil {
			logf("%s warning: %v", lbl, err)
		}
		ctrl := clientKCM
		if v.sys.name == everynode.name {
			ctrl = clientEverynode
		}
		res.requests, res.total = aw.byVerbResource[ctrl], aw.byClient[ctrl]
	}
	logf("%s update %.1fs; %d controller requests (%.2f per pod), %d pods made: %v",
		lbl, res.update, res.total, float64(res.total)/float64(b.c.nodes), res.podsMade, res.requests)
	logf("%s cleaning up", lbl)
	if err := b.w.teardown(ctx, v.sys, b.t); err != nil {
		return nil, err
	}
	return res, nil
}

func containerName(obj *unstructured.Unstructured) string {
	containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		return ""
	}
	name, _ := containers[0].(map[string]any)["name"].(string)
	return name
}

// waitSized waits until every node runs an available pod asking resizeTo
// and no live pod asks anything else; with resized, the kubelet must also
// report resizeTo (a recreated pod's first status reports nothing: kwok,
// like the scenario, does not count a report for a new pod). The seconds,
// to the poll's 100 ms; NaN on timeout.
func (b *bench) waitSized(ctx context.Context, what string, start time.Time, resized bool) float64 {
	lastLog := time.Now()
	var done, other int
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Until(start.Add(b.c.phaseTimeout)), true, func(context.Context) (bool, error) {
		done, other = b.t.count(func(p *corev1.Pod, now time.Time) int {
			spec, status := cpuRequest(p)
			switch {
			case spec != resizeTo:
				return 2
			case !serving(p, now) || p.Spec.NodeName == "":
				return 0
			case resized && status != resizeTo:
				return 0
			case !resized && status != -1 && status != resizeTo:
				return 0
			}
			return 1
		})
		if done >= b.c.nodes && other == 0 {
			return true, nil
		}
		if time.Since(lastLog) >= 10*time.Second {
			logf("%s %d/%d sized, %d asking other (%.0fs)", what, done, b.c.nodes, other, time.Since(start).Seconds())
			lastLog = time.Now()
		}
		return false, nil
	})
	if err != nil {
		logf("%s timed out: %d/%d sized, %d asking other", what, done, b.c.nodes, other)
		return math.NaN()
	}
	d := time.Since(start).Seconds()
	logf("%s done in %.1fs", what, d)
	return d
}

// writeResizeReport writes <out>/<N>-nodes-resize.md.
func writeResizeReport(c config, runs []*resizeResult, start time.Time) (string, error) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Resize of every pod, %d nodes\n\n", c.nodes)
	fmt.Fprintf(&sb, "%s, everynode %s, %d rounds of the variants alternated, all at client QPS %d, burst %d. "+
		"Every pod's cpu request goes from %dm to %dm, maxUnavailable 10%%: upstream (apps/v1, kube-controller-manager) and everynode recreate each pod "+
		"for the new template; everynode with spec.nodeSizing resizes each running pod in place (pods/resize; the rule is the fraction of the node's cpu "+
		"that gives the request, every bench node being the same size). Figure: from the set's patch until every node runs an available pod asking %dm "+
		"(and, resized, whose kubelet reports it: kwok answers a resize a second after it, e2e/kwok), polled every 100 ms. %s "+
		"Requests: the controller's, from the audit log, in that window. Each cell: median (min–max) over the rounds; a ratio counts only where the "+
		"medians differ by more than the larger spread, otherwise tie.\n\n",
		start.Format("2006-01-02 15:04"), c.rev, c.rounds, c.qps, c.burst, resizeFrom, resizeTo, resizeTo, newPodStart(c))
	get := func(name string, f func(*resizeResult) float64) summary {
		var xs []float64
		for _, r := range runs {
			if r.variant == name {
				xs = append(xs, f(r))
			}
		}
		return summarize(xs)
	}
	update := func(r *resizeResult) float64 { return r.update }
	ratio := func(s, base summary) string {
		if base.n == 0 || base.median <= 0 || math.IsNaN(s.median) {
			return "–"
		}
		out := fmt.Sprintf("%.2f", s.median/base.median)
		if math.Abs(s.median-base.median) <= math.Max(base.max-base.min, s.max-s.min) {
			out += " (tie)"
		}
		return out
	}
	sb.WriteString("| variant | update s | ratio to everynode (recreate) | ratio to upstream | controller requests per pod | pods created |\n|---|---|---|---|---|---|\n")
	for _, v := range resizeVariants {
		s := get(v.name, update)
		if s.n == 0 {
			continue
		}
		perPod := get(v.name, func(r *resizeResult) float64 { return float64(r.total) / float64(c.nodes) })
		made := get(v.name, func(r *resizeResult) float64 { return float64(r.podsMade) })
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s |\n", v.name, fmtSummary(s),
			ratio(s, get(resizeVariants[1].name, update)), ratio(s, get(resizeVariants[0].name, update)), fmtSummary(perPod), fmtNum(made.median))
	}
	sb.WriteString("\nRequests by verb and resource, per run:\n\n| run | update s | requests | by verb and resource |\n|---|---|---|---|\n")
	sorted := append([]*resizeResult(nil), runs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].round < sorted[j].round })
	for _, r := range sorted {
		fmt.Fprintf(&sb, "| %s r%d | %s | %d | %s |\n", r.variant, r.round, fmtNum(r.update), r.total, byVerbResource(r.requests))
	}
	path := reportBase(c.out, c.nodes) + "-resize.md"
	return path, os.WriteFile(path, []byte(sb.String()), 0o644)
}
