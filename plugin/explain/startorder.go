package explain

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// Start order (spec.startAfter): which dependency a node's pod waits for,
// by the rule the controller gates and ungates with (placement.StartOrder).

// startInput is what explain reads of a set's dependencies: each one (Set
// nil if missing) and its pods by target node. Cycles are the
// controller's to report (StartOrderBroken); explain does not walk the
// graph.
type startInput struct {
	deps []placement.StartDependency
	pods []map[string][]*corev1.Pod
}

// addStartWaits fills each node's StartWaits with the dependencies its pod
// waits for, for the nodes that should run the set and have no ready pod,
// and makes a gated pod's summary line name the first one.
func addStartWaits(r *Report, nodes []corev1.Node, in *startInput) {
	if in == nil || len(in.deps) == 0 {
		return
	}
	rule := placement.NewStartOrder(in.deps)
	byName := make(map[string]*corev1.Node, len(nodes))
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	counts := map[string]int{}
	for i := range r.Details {
		d := &r.Details[i]
		node := byName[d.Node]
		if node == nil || d.PodReady || !d.ShouldRun {
			continue
		}
		for _, w := range rule.Waits(node, func(j int) []*corev1.Pod { return in.pods[j][d.Node] }) {
			d.StartWaits = append(d.StartWaits, w.String())
		}
		if d.StartGated && len(d.StartWaits) > 0 {
			counts[d.Reason]--
			d.Reason = "pod waits for " + d.StartWaits[0]
			counts[d.Reason]++
		}
	}
	if len(counts) > 0 {
		regroup(r, counts)
	}
}

// regroup applies the changes of counts to the summary.
func regroup(r *Report, delta map[string]int) {
	total := map[string]int{}
	for _, rc := range r.Reasons {
		total[rc.Reason] = rc.Nodes
	}
	for k, n := range delta {
		total[k] += n
	}
	r.Reasons = r.Reasons[:0]
	for reason, n := range total {
		if n > 0 {
			r.Reasons = append(r.Reasons, ReasonCount{Reason: reason, Nodes: n})
		}
	}
	sortReasons(r.Reasons)
}

// readStartInput fetches ds's dependencies and their pods. An apps/v1
// dependency's pods are listed by the label upstream's controller gives
// them, an everynode one's by the daemon-pod label; either kind's are
// then matched by owner UID.
func (o *options) readStartInput(ctx context.Context, ds *everynodev1alpha1.DaemonSet) (*startInput, error) {
	keys := placement.StartAfterKeys(ds)
	if len(keys) == 0 {
		return nil, nil
	}
	en, err := o.f.EverynodeClient()
	if err != nil {
		return nil, err
	}
	core, err := o.f.CoreClient()
	if err != nil {
		return nil, err
	}
	in := &startInput{}
	for _, k := range keys {
		d := placement.StartDependency{Key: k}
		selector := everynodev1alpha1.LabelDaemonPod + "=" + everynodev1alpha1.LabelDaemonPodValue
		switch k.Group {
		case everynodev1alpha1.GroupApps:
			apps, err := o.f.AppsClient()
			if err != nil {
				return nil, err
			}
			set, err := apps.DaemonSets(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
			if err == nil {
				d.Set = placement.FromApps(set)
			}
			selector = placement.TemplateGenerationLabel
		default:
			set, err := en.EverynodeV1alpha1().DaemonSets(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
			if err == nil {
				d.Set = set
			}
		}
		byNode := map[string][]*corev1.Pod{}
		if d.Set != nil {
			list, err := core.Pods(k.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return nil, err
			}
			for i := range list.Items {
				p := &list.Items[i]
				ref := metav1.GetControllerOf(p)
				if ref == nil || ref.UID != d.Set.UID {
					continue
				}
				node := p.Spec.NodeName
				if node == "" {
					node, _ = placement.TargetNode(p)
				}
				byNode[node] = append(byNode[node], p)
			}
		}
		in.deps = append(in.deps, d)
		in.pods = append(in.pods, byNode)
	}
	return in, nil
}
