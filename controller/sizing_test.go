package controller

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// sizedSet is a set whose agent asks 5% of the node's cpu, at least 100m,
// and 10% of its memory as a limit.
func sizedSet(name string) *everynodev1alpha1.DaemonSet {
	ds := newSet(name)
	ds.Spec.NodeSizing = []everynodev1alpha1.ContainerSizing{{Name: "agent", Resources: []everynodev1alpha1.ResourceSizing{
		{Resource: corev1.ResourceCPU, Requests: everynodev1alpha1.ResourceShare{Fraction: "0.05", Min: qty("100m")}},
		{Resource: corev1.ResourceMemory, Requests: everynodev1alpha1.ResourceShare{Fraction: "0.01"}, Limits: &everynodev1alpha1.ResourceShare{Fraction: "0.1"}},
	}}}
	return ds
}

func qty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// addSizedNodes adds nodes with the given cpu counts and 4Gi of memory
// per core.
func addSizedNodes(f *fixture, cpus ...int) {
	for i, cpu := range cpus {
		n := newNode(fmt.Sprintf("node-%d", i), nil)
		n.Status.Allocatable = corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(cpu), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(int64(cpu)<<32, resource.BinarySI),
		}
		f.add(n)
	}
}

// cpuRequests maps each live pod's node to its agent's cpu request.
func (f *fixture) cpuRequests() map[string]string {
	f.t.Helper()
	out := map[string]string{}
	list, err := f.kube.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), "")
	if err != nil {
		f.t.Fatal(err)
	}
	for _, p := range list.(*corev1.PodList).Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		q := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
		out[p.Annotations[everynodev1alpha1.AnnotationTargetNode]] = q.String()
	}
	return out
}

// podResizes returns the names of the pods the last sync resized, sorted.
func (f *fixture) podResizes() []string {
	var out []string
	for _, a := range f.kube.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "pods" && a.GetSubresource() == "resize" {
			out = append(out, a.(clienttesting.PatchAction).GetName())
		}
	}
	sort.Strings(out)
	return out
}

// actuateResizes plays kubelet for every pod: its containers' status
// resources become what its spec asks, unless refuse names its node.
func (f *fixture) actuateResizes(refuse string) {
	f.t.Helper()
	list, err := f.kube.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), "")
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range list.(*corev1.PodList).Items {
		p := list.(*corev1.PodList).Items[i].DeepCopy()
		if p.Spec.NodeName == refuse {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible, Message: "Node didn't have enough capacity"})
		} else {
			p.Status.ContainerStatuses = nil
			for _, c := range p.Spec.Containers {
				p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Ready: true, Resources: c.Resources.DeepCopy()})
			}
		}
		p.ResourceVersion = fmt.Sprint(f.podSeq.Add(1))
		f.update(p)
	}
	f.syncCaches()
}

// Nodes of three sizes get three pod sizes, at creation, and the pods
// count as updated: the sizes are not part of the revision.
func TestNewPodsSizedForTheirNode(t *testing.T) {
	f := newFixture(t)
	addSizedNodes(f, 1, 8, 64)
	ds := sizedSet("agent")
	f.add(ds)
	f.runRollout(ds)
	want := map[string]string{"node-0": "100m", "node-1": "400m", "node-2": "3200m"}
	if got := f.cpuRequests(); !reflect.DeepEqual(got, want) {
		t.Errorf("cpu requests %v, want %v", got, want)
	}
	st := f.set(ds).Status
	if st.UpdatedNumberScheduled != 3 || st.NumberAvailable != 3 {
		t.Errorf("updated %d available %d, want 3 and 3", st.UpdatedNumberScheduled, st.NumberAvailable)
	}
	if st.NodeSizing == nil || st.NodeSizing.Sized != 3 {
		t.Errorf("status.nodeSizing = %+v, want 3 sized", st.NodeSizing)
	}
}

// The revision hash does not read spec.nodeSizing: a new rule is not a
// new revision, so it replaces no pod.
func TestRevisionHashIgnoresNodeSizing(t *testing.T) {
	a, b := newSet("agent"), sizedSet("agent")
	if revisionHash(a) != revisionHash(b) {
		t.Errorf("hash %s with nodeSizing, %s without", revisionHash(b), revisionHash(a))
	}
}

// A node's allocatable grows: its pod is resized in place, the others
// are left alone, nothing is deleted or created.
func TestAllocatableChangeResizesInPlace(t *testing.T) {
	f := newFixture(t)
	addSizedNodes(f, 2, 4, 8)
	ds := sizedSet("agent")
	f.add(ds)
	f.runRollout(ds)
	f.actuateResizes("")
	before := f.livePodsOn("node-1")[0]

	f.queue.drain()
	f.changeNode("node-1", func(n *corev1.Node) {
		n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("16")
	})
	if got := f.queue.drain(); !reflect.DeepEqual(got, []string{"default/agent"}) {
		t.Errorf("queued %v after the node's allocatable changed, want the sized set", got)
	}
	f.syncCaches()
	f.mustSync(ds)
	if got := f.podResizes(); !reflect.DeepEqual(got, []string{before.Name}) {
		t.Fatalf("resized %v, want only %s", got, before.Name)
	}
	if len(f.podCreates())+len(f.podDeletes()) > 0 {
		t.Errorf("created %v, deleted %v: a resize recreates nothing", f.createdNodes(), f.podDeletes())
	}
	after := f.livePodsOn("node-1")[0]
	if after.UID != before.UID {
		t.Errorf("UID %s became %s", before.UID, after.UID)
	}
	if q := after.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; q.String() != "800m" {
		t.Errorf("cpu request after the resize %s, want 800m", q.String())
	}
	if !hasEvent(f.events(), "Normal SuccessfulResize Resized pod "+before.Name+" on node node-1: agent: requests cpu=800m") {
		t.Errorf("no SuccessfulResize event naming the size: %v", f.events())
	}
	// Until the kubelet reports the new size, the next sync sends nothing
	// again; after, nothing is left to do.
	f.syncCaches()
	f.mustSync(ds)
	if got := f.podResizes(); len(got) > 0 {
		t.Errorf("resized again before the kubelet answered: %v", got)
	}
	f.actuateResizes("")
	f.mustSync(ds)
	if got := f.podResizes(); len(got) > 0 {
		t.Errorf("resized again after the kubelet answered: %v", got)
	}
}

// A new rule resizes every pod, never more than maxUnavailable in flight.
func TestRuleChangeResizesWithinTheBudget(t *testing.T) {
	f := newFixture(t)
	addSizedNodes(f, 2, 2, 2, 2, 2, 2, 2)
	ds := sizedSet("agent")
	f.add(ds)
	f.runRollout(ds)
	f.actuateResizes("")

	ds = f.set(ds).DeepCopy()
	ds.Spec.NodeSizing[0].Resources[0].Requests.Fraction = "0.25"
	ds.Generation++
	f.update(ds)
	resized := map[string]bool{}
	for i := 0; i < 20 && len(resized) < 7; i++ {
		f.mustSync(ds)
		got := f.podResizes()
		if len(got) > 1 {
			t.Fatalf("sync %d resized %v, want at most maxUnavailable (1) in flight", i, got)
		}
		for _, p := range got {
			resized[p] = true
		}
		f.syncCaches()
		// A second sync before the kubelet answers sends nothing.
		f.mustSync(ds)
		if got := f.podResizes(); len(got) > 0 {
			t.Fatalf("sync %d: %v resized while one is in flight", i, got)
		}
		f.actuateResizes("")
	}
	if len(resized) != 7 {
		t.Fatalf("resized %d of 7 pods", len(resized))
	}
	for node, cpu := range f.cpuRequests() {
		if cpu != "500m" {
			t.Errorf("%s: cpu %s, want 500m", node, cpu)
		}
	}
	if hash := revisionHash(ds); f.set(ds).Status.UpdateRevision != hash {
		t.Errorf("update revision changed")
	}
}

// A rule whose min is above a node's allocatable is reported and not
// acted on, sync after sync.
func TestRuleThatDoesNotFitIsReported(t *testing.T) {
	f := newFixture(t)
	addSizedNodes(f, 2, 16)
	ds := sizedSet("agent")
	f.add(ds)
	f.runRollout(ds)
	f.actuateResizes("")

	ds = f.set(ds).DeepCopy()
	ds.Spec.NodeSizing[0].Resources[0].Requests.Min = qty("4")
	ds.Generation++
	f.update(ds)
	var resized []string
	for i := 0; i < 5; i++ {
		f.mustSync(ds)
		resized = append(resized, f.podResizes()...)
		f.syncCaches()
		f.actuateResizes("")
	}
	if len(resized) != 1 || !strings.HasPrefix(resized[0], "agent-") || f.livePodsOn("node-1")[0].Name != resized[0] {
		t.Errorf("resized %v, want node-1's pod once", resized)
	}
	st := f.set(ds).Status
	c := meta.FindStatusCondition(st.Conditions, everynodev1alpha1.ConditionNodeSizingDoesNotFit)
	if c == nil || c.Reason != everynodev1alpha1.ReasonRequestsAboveAllocatable || !strings.Contains(c.Message, "node-0 (agent: cpu 4 > allocatable 2)") {
		t.Errorf("NodeSizingDoesNotFit = %+v", c)
	}
	if st.NodeSizing == nil || st.NodeSizing.DoesNotFit != 1 || st.NodeSizing.Sized != 1 || st.NodeSizing.Waiting != 1 {
		t.Errorf("status.nodeSizing = %+v, want 1 sized, 1 waiting, 1 node it does not fit", st.NodeSizing)
	}
}

// A resize the kubelet refuses (Infeasible) is done by a new pod.
func TestInfeasibleResizeRecreatesThePod(t *testing.T) {
	f := newFixture(t)
	addSizedNodes(f, 2, 4)
	ds := sizedSet("agent")
	f.add(ds)
	f.runRollout(ds)
	f.actuateResizes("")
	refused := f.livePodsOn("node-1")[0]

	f.changeNode("node-1", func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("8") })
	f.syncCaches()
	f.mustSync(ds)
	f.syncCaches()
	f.actuateResizes("node-1")
	f.mustSync(ds)
	if got := f.podDeletes(); !reflect.DeepEqual(got, []string{refused.Name}) {
		t.Fatalf("deleted %v, want %s", got, refused.Name)
	}
	if !hasEvent(f.events(), "Normal RecreatingForSize Recreating pod "+refused.Name+" on node node-1 for its size: its kubelet refuses the resize (PodResizePending Infeasible)") {
		t.Errorf("no RecreatingForSize event: %v", f.events())
	}
	f.syncCaches()
	f.runRollout(ds)
	if got := f.cpuRequests()["node-1"]; got != "400m" {
		t.Errorf("the new pod asks %s cpu, want 400m", got)
	}
}

// A leaving node keeps its pod as it is: no resize there (its pod is
// kept to the end, as by the rolling update).
func TestResizeLeavesLeavingNodesAlone(t *testing.T) {
	f := newFixture(t)
	addSizedNodes(f, 2, 2, 2)
	ds := sizedSet("agent")
	f.add(ds)
	f.runRollout(ds)
	f.actuateResizes("")
	f.changeNode("node-1", func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: placement.TaintKarpenterDisrupted, Effect: corev1.TaintEffectNoSchedule})
	})
	ds = f.set(ds).DeepCopy()
	ds.Spec.NodeSizing[0].Resources[0].Requests.Fraction = "0.25"
	ds.Generation++
	f.update(ds)
	for i := 0; i < 6; i++ {
		f.mustSync(ds)
		f.syncCaches()
		f.actuateResizes("")
	}
	want := map[string]string{"node-0": "500m", "node-1": "100m", "node-2": "500m"}
	if got := f.cpuRequests(); !reflect.DeepEqual(got, want) {
		t.Errorf("cpu requests %v, want %v", got, want)
	}
	if st := f.set(ds).Status.NodeSizing; st == nil || st.Sized != 2 || st.Waiting != 1 {
		t.Errorf("status.nodeSizing = %+v, want 2 sized, 1 waiting", st)
	}
}

// A resize the API server finds invalid (a QoS class it would change,
// say) is done by a new pod; one RBAC forbids is an error, not a
// recreation.
func TestInvalidResizeRecreatesForbiddenDoesNot(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		recreate bool
	}{
		{"invalid", apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Pod").GroupKind(), "p", nil), true},
		{"forbidden", apierrors.NewForbidden(corev1.Resource("pods/resize"), "p", fmt.Errorf("RBAC")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			addSizedNodes(f, 2)
			ds := sizedSet("agent")
			f.add(ds)
			f.runRollout(ds)
			f.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() == "resize" {
					return true, nil, tc.err
				}
				return false, nil, nil
			})
			f.changeNode("node-0", func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("8") })
			f.syncCaches()
			err := f.sync(ds)
			if got := len(f.podDeletes()) > 0; got != tc.recreate {
				t.Errorf("deleted %v, want a recreation: %v", f.podDeletes(), tc.recreate)
			}
			if (err != nil) == tc.recreate {
				t.Errorf("sync error %v", err)
			}
		})
	}
}

// A pod whose running container reports no resources runs under a kubelet
// that cannot resize (kube-apiserver refuses the resize): it is recreated
// at its node's size rather than sent a resize that must fail.
func TestKubeletWithoutResizeRecreates(t *testing.T) {
	f := newFixture(t)
	addSizedNodes(f, 2)
	ds := sizedSet("agent")
	f.add(ds)
	f.runRollout(ds)
	p := f.livePodsOn("node-0")[0]
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	p.ResourceVersion = fmt.Sprint(f.podSeq.Add(1))
	f.update(p)
	f.changeNode("node-0", func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("8") })
	f.syncCaches()
	f.mustSync(ds)
	if got := f.podResizes(); len(got) > 0 {
		t.Errorf("resized %v: the API would refuse it", got)
	}
	if got := f.podDeletes(); !reflect.DeepEqual(got, []string{p.Name}) {
		t.Errorf("deleted %v, want %s", got, p.Name)
	}
	if !hasEvent(f.events(), "Normal RecreatingForSize Recreating pod "+p.Name+" on node node-0 for its size: its kubelet reports no resources") {
		t.Errorf("events %v", f.events())
	}
}
