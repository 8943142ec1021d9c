package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// The unreachable-nodes scenario (issue 56, --scenario=unreachable). Per
// system, in one run:
//
//  1. the set rolls out on every node, then updates (maxUnavailable 10%)
//     on a healthy cluster: the healthy time;
//  2. 2% of the nodes, spread evenly by name, turn unreachable as
//     kube-controller-manager's node lifecycle controller leaves them (the
//     bench's kube-controller-manager runs only the DaemonSet controller,
//     so the bench writes it): Ready Unknown, the unreachable NoSchedule
//     and NoExecute taints, the nodes' pods not Ready. A
//     ValidatingAdmissionPolicy keeps their "kubelet" (kwok) from
//     confirming a pod's deletion there, as no kubelet can;
//  3. the set updates again: the time until every serving node runs an
//     available pod of the new image, within a window of
//     unreachableWindow times the healthy time (upstream counts the
//     unreachable nodes' pods against maxUnavailable and may never
//     finish: then the report says how far it got);
//  4. the nodes heal, the set is torn down.
//
// The figure: the second update's time against the first's, per system.
const (
	unreachableShare  = 0.02
	unreachableWindow = 3
	partitionPolicy   = "bench-unreachable"
)

// unreachableResult is one system's run.
type unreachableResult struct {
	system string
	round  int
	// healthy and degraded are the two updates' seconds; degraded is NaN
	// when the window ran out, and servingDone then says how many of the
	// serving nodes had an available pod of the new image.
	healthy, degraded float64
	serving, done     int
	// requests are the controller's requests in the second update's window.
	requests int
}

// unreachableNodes picks share of the cluster's nodes, spread evenly by
// name, so neither a rollout by name nor one in map order meets them all
// first or last.
func unreachableNodes(names []string, share float64) []string {
	sort.Strings(names)
	n := max(1, int(math.Round(float64(len(names))*share)))
	step := float64(len(names)) / float64(n)
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, names[int(float64(i)*step+step/2)])
	}
	return out
}

func (b *bench) unreachableOnce(ctx context.Context, s system, round int) (*unreachableResult, error) {
	lbl := b.label(s, round)
	res := &unreachableResult{system: s.name, round: round}
	b.quiet(ctx, lbl, 5*time.Minute)
	b.t.resetSeen()
	logf("%s rollout on %d nodes", lbl, b.c.nodes)
	t0 := time.Now()
	if err := b.w.create(ctx, s, image1); err != nil {
		return nil, err
	}
	b.wait(ctx, lbl+" rollout", t0, image1, false)
	b.settle(ctx, lbl)
	b.quiet(ctx, lbl, 5*time.Minute)

	budget := b.c.unreachableBudget
	logf("%s healthy update, maxUnavailable %s", lbl, budget)
	t1 := time.Now()
	if err := b.w.rollingUpdate(ctx, s, image2, budget, "0"); err != nil {
		return nil, err
	}
	res.healthy = b.wait(ctx, lbl+" healthy update", t1, image2, true)
	if s.name == everynode.name {
		b.flushDeferred(ctx, lbl)
	}
	b.settle(ctx, lbl)

	nodes, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	down := unreachableNodes(names, unreachableShare)
	isDown := map[string]bool{}
	for _, n := range down {
		isDown[n] = true
	}
	serving := map[string]bool{}
	for _, n := range names {
		if !isDown[n] {
			serving[n] = true
		}
	}
	res.serving = len(serving)
	logf("%s %d nodes unreachable: %s", lbl, len(down), strings.Join(down[:min(5, len(down))], ", "))
	if err := b.partition(ctx, down); err != nil {
		return nil, err
	}
	heal := func() {
		if err := b.heal(context.Background(), down); err != nil {
			logf("%s warning: healing the unreachable nodes: %v", lbl, err)
		}
	}
	b.quiet(ctx, lbl, 5*time.Minute)

	before := b.m.snapshot(ctx)
	logf("%s update with %d nodes unreachable, maxUnavailable %s", lbl, len(down), budget)
	t2 := time.Now()
	if err := b.w.rollingUpdate(ctx, s, image3, budget, "0"); err != nil {
		heal()
		return nil, err
	}
	window := time.Duration(unreachableWindow * res.healthy * float64(time.Second))
	if math.IsNaN(res.healthy) {
		window = b.c.phaseTimeout
	}
	window = max(window, time.Minute)
	lastLog := time.Now()
	var got map[string]time.Time
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, window, true, func(context.Context) (bool, error) {
		got = b.t.availableTimes(image3, serving)
		if len(got) >= len(serving) {
			return true, nil
		}
		if time.Since(lastLog) >= 10*time.Second {
			logf("%s %d/%d serving nodes updated (%.0fs)", lbl, len(got), len(serving), time.Since(t2).Seconds())
			lastLog = time.Now()
		}
		return false, nil
	})
	res.done = len(got)
	res.degraded = math.NaN()
	if err == nil {
		var last time.Time
		for _, at := range got {
			if at.After(last) {
				last = at
			}
		}
		res.degraded = last.Sub(t2).Seconds()
	} else if ctx.Err() != nil {
		heal()
		return nil, ctx.Err()
	}
	end := time.Now()
	if s.name == everynode.name {
		b.flushDeferred(ctx, lbl)
	}
	time.Sleep(3 * time.Second)
	if b.c.auditLog != "" {
		aw, err := readAudit(b.c.auditLog, before.auditOffset, t2, end)
		if err != nil {
			logf("%s warning: %v", lbl, err)
		}
		ctrl := clientKCM
		if s.name == everynode.name {
			ctrl = clientEverynode
		}
		res.requests = aw.byClient[ctrl]
	}
	logf("%s healthy update %.1fs; with %d unreachable: %d/%d serving nodes updated, %s; %d controller requests",
		lbl, res.healthy, len(down), res.done, res.serving, fmtSecs(res.degraded, window), res.requests)

	heal()
	logf("%s cleaning up", lbl)
	if err := b.w.teardown(ctx, s, b.t); err != nil {
		return nil, err
	}
	return res, nil
}

func fmtSecs(s float64, window time.Duration) string {
	if math.IsNaN(s) {
		return fmt.Sprintf("not done in %s", window.Round(time.Second))
	}
	return fmt.Sprintf("%.1fs", s)
}

// partition makes nodes unreachable as kube-controller-manager's node
// lifecycle controller leaves a node whose Lease went stale, and keeps
// kwok from confirming pod deletions there.
func (b *bench) partition(ctx context.Context, nodes []string) error {
	quoted := make([]string, len(nodes))
	for i, n := range nodes {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: partitionPolicy},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Ignore),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{
				{RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Delete},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
				{RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/status"}}}},
			}},
			Variables: []admissionv1.Variable{{Name: "nodes", Expression: "[" + strings.Join(quoted, ", ") + "]"}},
			Validations: []admissionv1.Validation{{
				Expression: "request.operation != 'DELETE' || !has(oldObject.spec.nodeName) || !(oldObject.spec.nodeName in variables.nodes) || !has(oldObject.metadata.deletionTimestamp)",
				Message:    "the node is unreachable: no kubelet confirms this pod is gone",
			}, {
				// kwok, playing the kubelet, would report the pods Ready
				// again (e2e/kwok: kubelet-ready).
				Expression: "request.operation != 'UPDATE' || !has(object.spec.nodeName) || !(object.spec.nodeName in variables.nodes) || !has(object.status.conditions) || !object.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
				Message:    "the node is unreachable: no kubelet reports this pod Ready",
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: partitionPolicy},
		Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: partitionPolicy, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	if _, err := b.cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("partition policy: %w", err)
	}
	if _, err := b.cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("partition binding: %w", err)
	}
	now := metav1.Now()
	for _, name := range nodes {
		if err := b.changeNode(ctx, name, true, func(n *corev1.Node) {
			for i := range n.Status.Conditions {
				if c := &n.Status.Conditions[i]; c.Type == corev1.NodeReady {
					c.Status, c.Reason, c.Message, c.LastTransitionTime = corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status.", now
				}
			}
		}); err != nil {
			return fmt.Errorf("node %s Unknown: %w", name, err)
		}
		if err := b.changeNode(ctx, name, false, func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints,
				corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
				corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &now})
		}); err != nil {
			return fmt.Errorf("node %s tainted: %w", name, err)
		}
		pods, err := b.cs.CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
		if err != nil {
			return err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{
				{"type": "Ready", "status": "False", "reason": "NodeNotReady", "lastTransitionTime": now.UTC().Format(time.RFC3339)}}}})
			if _, err := b.cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
				return fmt.Errorf("pod %s not Ready: %w", p.Name, err)
			}
		}
	}
	return nil
}

// heal undoes partition: the policy goes, the nodes are Ready and
// untainted again. Pods left terminating there are the teardown's.
func (b *bench) heal(ctx context.Context, nodes []string) error {
	_ = b.cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, partitionPolicy, metav1.DeleteOptions{})
	_ = b.cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, partitionPolicy, metav1.DeleteOptions{})
	for _, name := range nodes {
		if err := b.changeNode(ctx, name, false, func(n *corev1.Node) {
			var keep []corev1.Taint
			for _, t := range n.Spec.Taints {
				if t.Key != corev1.TaintNodeUnreachable {
					keep = append(keep, t)
				}
			}
			n.Spec.Taints = keep
		}); err != nil {
			return err
		}
		if err := b.changeNode(ctx, name, true, func(n *corev1.Node) {
			for i := range n.Status.Conditions {
				if c := &n.Status.Conditions[i]; c.Type == corev1.NodeReady {
					c.Status, c.Reason, c.Message, c.LastTransitionTime = corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status", metav1.Now()
				}
			}
		}); err != nil {
			return err
		}
	}
	return nil
}

// changeNode applies change to the node named name, its status when
// status, reading it again on a conflict (kwok writes nodes too).
func (b *bench) changeNode(ctx context.Context, name string, status bool, change func(*corev1.Node)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := b.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(n)
		if status {
			_, err = b.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		} else {
			_, err = b.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		}
		return err
	})
}

// writeUnreachableReport writes <out>/<N>-nodes-unreachable.md.
func writeUnreachableReport(c config, runs []*unreachableResult, start time.Time) (string, error) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Rolling update with %.0f%% of the nodes unreachable, maxUnavailable %s, %d nodes\n\n", unreachableShare*100, c.unreachableBudget, c.nodes)
	fmt.Fprintf(&sb, "%s, everynode %s, %d rounds, upstream and everynode alternated, client QPS %d, burst %d. "+
		"Per run: the set rolls out, updates on the healthy cluster (maxUnavailable %s), then %.0f%% of the nodes, spread by name, "+
		"turn unreachable as kube-controller-manager leaves them (Ready Unknown, the unreachable taints, their pods not Ready; "+
		"kwok cannot confirm a pod's deletion there) and the set updates again. Figure: seconds from the set's patch until every "+
		"serving node runs an available pod of the new image; the second update gets %d times the first's time (at least a minute). "+
		"Each cell: median (min–max); a ratio counts only where the medians differ by more than the larger spread, otherwise tie.\n\n",
		start.Format("2006-01-02 15:04"), c.rev, c.rounds, c.qps, c.burst, c.unreachableBudget, unreachableShare*100, unreachableWindow)
	sb.WriteString("| system | healthy update s | update with nodes unreachable s | ratio (unreachable / healthy) | runs finished | serving nodes updated (median) | controller requests (median) |\n|---|---|---|---|---|---|---|\n")
	for _, s := range []system{upstream, everynode} {
		var healthy, degraded, done, reqs []float64
		finished, total := 0, 0
		serving := 0
		for _, r := range runs {
			if r.system != s.name {
				continue
			}
			total++
			healthy = append(healthy, r.healthy)
			done = append(done, float64(r.done))
			reqs = append(reqs, float64(r.requests))
			serving = r.serving
			if !math.IsNaN(r.degraded) {
				finished++
				degraded = append(degraded, r.degraded)
			}
		}
		if total == 0 {
			continue
		}
		h, d := summarize(healthy), summarize(degraded)
		ratio, dcell := "–", "not done in the window"
		if finished == total {
			dcell = fmtSummary(d)
			ratio = fmt.Sprintf("%.2f", d.median/h.median)
			if math.Abs(d.median-h.median) <= math.Max(h.max-h.min, d.max-d.min) {
				ratio += " (tie)"
			}
		} else if finished > 0 {
			dcell = fmtSummary(d) + fmt.Sprintf(" in %d runs; the others not done", finished)
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %d of %d | %s of %d | %s |\n", s.name, fmtSummary(h), dcell, ratio, finished, total,
			fmt.Sprintf("%.0f", summarize(done).median), serving, fmt.Sprintf("%.0f", summarize(reqs).median))
	}
	sb.WriteString("\nPer run:\n\n| run | healthy s | unreachable s | serving nodes updated | controller requests |\n|---|---|---|---|---|\n")
	sorted := append([]*unreachableResult(nil), runs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].round < sorted[j].round })
	for _, r := range sorted {
		fmt.Fprintf(&sb, "| %s r%d | %s | %s | %d of %d | %d |\n", r.system, r.round, fmtNum(r.healthy), fmtNum(r.degraded), r.done, r.serving, r.requests)
	}
	path := reportBase(c.out, c.nodes) + "-unreachable.md"
	if c.unreachableBudget != "10%" {
		path = reportBase(c.out, c.nodes) + "-unreachable-" + strings.TrimSuffix(c.unreachableBudget, "%") + "pct.md"
	}
	return path, os.WriteFile(path, []byte(sb.String()), 0o644)
}
