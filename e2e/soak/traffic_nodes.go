package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"everynode.io/e2e/cluster"
	"everynode.io/everynode/placement"
)

// Node traffic: nodes joining, leaving (Karpenter's taint, then deleted)
// and cut off (an admission policy refuses their kubelet's writes).

// nodeInfo is one of the soak's nodes as the soak knows it.
type nodeInfo struct {
	name, pool string
	joined     bool
}

// makeNode creates one kwok node of the soak (kwok makes it Ready).
func (r *runner) makeNode(ctx context.Context, name, pool string) error {
	cpu := resource.MustParse(poolSizes[pool])
	alloc := corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: resource.MustParse(poolSizes[pool] + "Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{"type": "kwok", corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
				NodeLabel: "true", PoolLabel: pool},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc.DeepCopy()},
	}
	_, err := r.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// joinNodes adds n nodes, dealt to the pools in turn.
func (r *runner) joinNodes(ctx context.Context, n int) error {
	var errs []error
	for range n {
		r.mu.Lock()
		r.nodeSeq++
		name, pool := fmt.Sprintf("soak-join-%04d", r.nodeSeq), Pools[r.nodeSeq%len(Pools)]
		r.mu.Unlock()
		if err := r.makeNode(ctx, name, pool); err != nil {
			errs = append(errs, err)
			continue
		}
		r.mu.Lock()
		r.nodes = append(r.nodes, nodeInfo{name: name, pool: pool, joined: true})
		r.mu.Unlock()
	}
	return errors.Join(errs...)
}

// pickNodes takes n nodes that are neither cut off nor leaving: with a
// random source of the event (seed and time), from the newest joined
// first for a leave, at random among all for a cut-off.
func (r *runner) pickNodes(e Event, n int, newestFirst bool) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var free []string
	for i := len(r.nodes) - 1; i >= 0; i-- {
		nd := r.nodes[i]
		if !r.busyNodes[nd.name] {
			free = append(free, nd.name)
		}
	}
	// Never more than a third of the nodes away at once, so no pool
	// empties.
	n = min(n, max(0, len(free)-len(r.nodes)*2/3))
	if !newestFirst {
		rng := rand.New(rand.NewPCG(uint64(r.o.Seed), uint64(e.At)))
		rng.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
	}
	out := free[:n]
	for _, name := range out {
		r.busyNodes[name] = true
	}
	return slices.Clone(out)
}

func (r *runner) freeNodes(names []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range names {
		delete(r.busyNodes, n)
	}
}

// leaveNodes takes nodes away as Karpenter does: tainted disrupted
// (leaving: their pods stay to the end), then deleted.
func (r *runner) leaveNodes(ctx context.Context, e Event) error {
	names := r.pickNodes(e, e.N, true)
	if len(names) == 0 {
		return nil
	}
	var errs []error
	for _, name := range names {
		r.rec.act(ActObs{Kind: ActNodeLeave, Name: name})
		err := retry(ctx, time.Minute, func(ctx context.Context) error {
			n, err := r.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: placement.TaintKarpenterDisrupted, Effect: corev1.TaintEffectNoSchedule})
			_, err = r.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		})
		errs = append(errs, err)
	}
	sleep(ctx, 10*time.Second)
	// Deleted even when the traffic is cut: a tainted node left behind is
	// no longer in the harness's list.
	heal := context.WithoutCancel(ctx)
	for _, name := range names {
		err := retry(heal, time.Minute, func(ctx context.Context) error {
			err := r.kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
		errs = append(errs, err)
	}
	r.mu.Lock()
	r.nodes = slices.DeleteFunc(r.nodes, func(n nodeInfo) bool { return slices.Contains(names, n.name) })
	r.mu.Unlock()
	return errors.Join(errs...)
}

// cutOff cuts nodes off from kube-apiserver for e.For, as a network
// partition cuts their kubelets off: the ValidatingAdmissionPolicy of
// e2e/lifecycle_test.go refuses what only kwok writes for them (Lease
// renewals, Ready node and pod statuses, the final delete of a pod).
// kube-controller-manager's node lifecycle controller then marks them
// unreachable after its grace (40 s here).
func (r *runner) cutOff(ctx context.Context, e Event) error {
	nodes := r.pickNodes(e, e.N, false)
	if len(nodes) == 0 {
		return nil
	}
	defer r.freeNodes(nodes)
	name := fmt.Sprintf("soak-partition-%d", e.At/time.Second)
	policy, binding := cluster.PartitionPolicy(name, nodes)
	r.rec.act(ActObs{Kind: ActCutOff, Nodes: nodes})
	adm := r.kube.AdmissionregistrationV1()
	if err := retry(ctx, time.Minute, func(ctx context.Context) error {
		_, err := adm.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}); err != nil {
		return err
	}
	err := retry(ctx, time.Minute, func(ctx context.Context) error {
		_, err := adm.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err == nil {
		sleep(ctx, e.For)
	}
	// Healed whatever happened, and whatever the context says: a
	// partition left behind would outlive the run.
	heal := context.WithoutCancel(ctx)
	errs := []error{err}
	errs = append(errs, retry(heal, 3*time.Minute, func(ctx context.Context) error {
		err := adm.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}), retry(heal, 3*time.Minute, func(ctx context.Context) error {
		err := adm.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}))
	r.rec.act(ActObs{Kind: ActHeal, Nodes: nodes})
	errs = append(errs, cluster.ResyncPods(heal, r.kube, nodes, time.Second))
	return errors.Join(errs...)
}
