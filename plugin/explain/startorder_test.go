package explain

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubefake "k8s.io/client-go/kubernetes/fake"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	everynodefake "everynode.io/everynode/client/clientset/versioned/fake"
	"everynode.io/everynode/placement"
)

// explain names the dependency a gated pod waits for on its node, and
// nothing where the dependency is Ready or missing from the node's
// eligibility.
func TestExplainStartAfter(t *testing.T) {
	b := testSet()
	b.Spec.StartAfter = []everynodev1alpha1.StartDependency{{Name: "agent"}, {Name: "gone"}}
	a := testSet()
	a.Name, a.UID = "agent", "agent-uid"
	a.Spec.Template.Spec.NodeSelector = map[string]string{"logging": "on", "agent": "yes"}
	a.Spec.Template.Spec.Affinity = nil

	gated := pod(b, "fluentd-slow", "slow", "h2", corev1.PodPending, false)
	placement.WithStartGate(gated)
	objs := []runtime.Object{
		node("slow", map[string]string{"agent": "yes"}),
		node("noagent", nil),
		gated,
		pod(a, "agent-slow", "slow", "a1", corev1.PodRunning, false),
	}
	noAgent := pod(b, "fluentd-noagent", "noagent", "h2", corev1.PodPending, false)
	placement.WithStartGate(noAgent)
	objs = append(objs, noAgent)

	f := fakeFactory{en: everynodefake.NewSimpleClientset(b, a), core: kubefake.NewSimpleClientset(objs...).CoreV1()}
	var out bytes.Buffer
	cmd := NewCommand(f, genericiooptions.IOStreams{Out: &out, ErrOut: &out})
	cmd.SetArgs([]string{"fluentd"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"1 node: pod waits for everynode.io/" + ns + "/agent: its pod on the node is not Ready",
		"waits for everynode.io/" + ns + "/agent: its pod on the node is not Ready",
		"1 node: pod waits for everynode.io/" + ns + "/gone: no such set",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
