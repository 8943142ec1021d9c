package e2e

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// The leader fence the API server applies (the chart's leader-fence.yaml):
// the controller writes its leadership term on each pod it creates, and a
// create by its identity whose term is older than the Lease's is refused,
// however late it arrives. That is what stops a leader that hung past its
// Lease and woke up from adding a pod beside the new leader's: the soak's
// second 60-minute run saw that create land 30 ms after the old leader
// woke. A term cannot be made older by hand here without a second
// replica, so the refusal is shown with a dry run of the same pod as the
// controller's identity, one term back.
func TestLeaderFence(t *testing.T) {
	sel := map[string]string{scenarioLabel: "fence-" + randSuffix()}
	nodes := createNodes(t, "fence", 2, sel)
	ns := newNamespace(t)
	createSet(t, simpleSet(ns, "agent", sel))
	eventually(t, settle, "a pod on every node", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, func(*corev1.Pod) string { return "" })
	})
	lease, err := kube.CoordinationV1().Leases(releaseNamespace).Get(ctx(t), releaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the leader Lease: %v", err)
	}
	term := ptr.Deref(lease.Spec.LeaseTransitions, 0)
	pods := daemonPods(t, ns, "agent")
	for _, p := range pods {
		if got := p.Annotations[everynodev1alpha1.AnnotationLeaderTerm]; got != strconv.Itoa(int(term)) {
			t.Errorf("pod %s carries leader term %q, want the Lease's %d", p.Name, got, term)
		}
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", harness.EverynodeKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	asController := kubernetes.NewForConfigOrDie(cfg)
	// A plain pod (no daemon label: no webhook of everynode is asked), so
	// that only the policy can refuse it.
	podWithTerm := func(term int32) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "fenced-", Namespace: ns,
				Annotations: map[string]string{everynodev1alpha1.AnnotationLeaderTerm: strconv.Itoa(int(term))}},
			Spec: corev1.PodSpec{NodeName: nodes[0], Containers: []corev1.Container{{Name: "c", Image: "registry.example/agent:v1"}}},
		}
	}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	_, err = asController.CoreV1().Pods(ns).Create(ctx(t), podWithTerm(term-1), dryRun)
	if err == nil || !strings.Contains(err.Error(), "leader term") {
		t.Errorf("a create by the controller's identity one term back (%d, the Lease is at %d): %v; want refused by the leader fence", term-1, term, err)
	}
	if _, err := asController.CoreV1().Pods(ns).Create(ctx(t), podWithTerm(term), dryRun); err != nil {
		t.Errorf("a create in the current term: %v; want admitted", err)
	}
	// Anyone else's pod is not the fence's business, whatever it carries.
	if _, err := kube.CoreV1().Pods(ns).Create(ctx(t), podWithTerm(term-1), dryRun); err != nil {
		t.Errorf("an admin's pod with an old term: %v; want admitted", err)
	}
}
