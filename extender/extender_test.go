package extender

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	everynodefake "everynode.io/everynode/client/clientset/versioned/fake"
	everynodeinformers "everynode.io/everynode/client/informers/externalversions"
)

// TestNewWithInformers wires the extender to real (fake-client) informers:
// the initial lists must build the gate before HasSynced says yes, and a
// daemon pod turning Ready must open its node.
func TestNewWithInformers(t *testing.T) {
	if _, err := New(nil, nil, nil); err == nil {
		t.Error("New(nil, nil, nil) succeeded")
	}

	cni := daemonSet("cni", true)
	pending := daemonPod(cni, "cni-0", "n0", "v1")
	kube := kubefake.NewClientset(node("n0", nil), node("n1", nil), pending, daemonPod(cni, "cni-1", "n1", "v1", ready))
	everynode := everynodefake.NewSimpleClientset(cni)
	kubeFactory := informers.NewSharedInformerFactory(kube, 0)
	setFactory := everynodeinformers.NewSharedInformerFactory(everynode, 0)

	ext, err := New(setFactory.Everynode().V1alpha1().DaemonSets(), kubeFactory.Core().V1().Nodes(), kubeFactory.Core().V1().Pods())
	if err != nil {
		t.Fatal(err)
	}
	if ext.HasSynced() {
		t.Fatal("HasSynced before the informers started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	kubeFactory.Start(ctx.Done())
	setFactory.Start(ctx.Done())
	defer func() { // stop, then wait for the informers' goroutines
		cancel()
		kubeFactory.Shutdown()
		setFactory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), ext.HasSynced) {
		t.Fatal("caches never synced")
	}

	filter := func() []string {
		res := ext.filter(&extenderv1.ExtenderArgs{Pod: plainPod(), NodeNames: &[]string{"n0", "n1"}})
		return *res.NodeNames
	}
	if got := filter(); !slices.Equal(got, []string{"n1"}) {
		t.Fatalf("after sync, passed = %q, want [n1]", got)
	}

	readyPod := pending.DeepCopy()
	ready(readyPod)
	if _, err := kube.CoreV1().Pods(testNS).UpdateStatus(ctx, readyPod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The informer delivers the update asynchronously: wait for the
	// state, not for a duration. The timeout only bounds a broken test.
	err = wait.PollUntilContextTimeout(ctx, time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(filter()) == 2, nil
	})
	if err != nil {
		t.Fatalf("node n0 never opened after its daemon became Ready: passed = %q", filter())
	}
}
