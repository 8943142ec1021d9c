package controller

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	everynodefake "everynode.io/everynode/client/clientset/versioned/fake"
	"everynode.io/everynode/client/informers/externalversions"
)

// runEnv is a controller's surroundings over fake clientsets: nodes a and
// b, the set agent, informers that start on demand, and a fake API server
// that names and numbers the pods it creates.
type runEnv struct {
	t       *testing.T
	ctx     context.Context
	kube    *kubefake.Clientset
	client  *everynodefake.Clientset
	kubeInf informers.SharedInformerFactory
	setInf  externalversions.SharedInformerFactory
}

func newRunEnv(t *testing.T, ctx context.Context) *runEnv {
	kube := kubefake.NewSimpleClientset(newNode("a", nil), newNode("b", nil))
	var seq atomic.Int64
	kube.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		pod := action.(clienttesting.CreateAction).GetObject().(*corev1.Pod)
		n := seq.Add(1)
		pod.Name = fmt.Sprintf("%s%d", pod.GenerateName, n)
		pod.UID = types.UID(fmt.Sprint("pod-", n))
		return false, nil, nil
	})
	client := everynodefake.NewSimpleClientset(newSet("agent"))
	return &runEnv{t: t, ctx: ctx, kube: kube, client: client,
		kubeInf: informers.NewSharedInformerFactory(kube, 0),
		setInf:  externalversions.NewSharedInformerFactory(client, 0)}
}

// newController makes a controller on the environment's informers.
func (e *runEnv) newController() *Controller {
	e.t.Helper()
	c, err := New(e.ctx, Config{
		KubeClient: e.kube, Client: e.client,
		DaemonSets: e.setInf.Everynode().V1alpha1().DaemonSets(),
		Pods:       e.kubeInf.Core().V1().Pods(),
		Nodes:      e.kubeInf.Core().V1().Nodes(),
		Revisions:  e.kubeInf.Apps().V1().ControllerRevisions(),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *runEnv) start() {
	e.kubeInf.Start(e.ctx.Done())
	e.setInf.Start(e.ctx.Done())
}

// TestRun wires the controller to running informers over fake clientsets
// and checks that it follows nodes coming and going. It waits for outcomes
// with a generous bound (a failure, never a timing measurement).
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := newRunEnv(t, ctx)
	kube, client := env.kube, env.client
	c := env.newController()
	env.start()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 2) }()

	waitFor := func(what string, cond func(pods []corev1.Pod) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			return cond(list.Items), nil
		})
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	onNodes := func(pods []corev1.Pod) map[string]int {
		out := map[string]int{}
		for _, p := range pods {
			out[p.Annotations["everynode.io/node-name"]]++
		}
		return out
	}
	waitFor("a pod on a and b", func(pods []corev1.Pod) bool {
		m := onNodes(pods)
		return len(pods) == 2 && m["a"] == 1 && m["b"] == 1
	})
	if _, err := kube.CoreV1().Nodes().Create(ctx, newNode("c", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("a pod on c", func(pods []corev1.Pod) bool { return len(pods) == 3 && onNodes(pods)["c"] == 1 })
	if err := kube.CoreV1().Nodes().Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("a's pod gone", func(pods []corev1.Pod) bool { return len(pods) == 2 && onNodes(pods)["a"] == 0 })
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := client.EverynodeV1alpha1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
		return err == nil && got.Status.DesiredNumberScheduled == 2 && got.Status.CurrentNumberScheduled == 2, err
	})
	if err != nil {
		t.Fatalf("status never showed 2 desired and current: %v", err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run returned %v after cancel, want nil", err)
	}
}

func TestRunErrors(t *testing.T) {
	f := newFixture(t)
	if err := f.c.Run(context.Background(), 0); err == nil {
		t.Error("Run accepted 0 workers")
	}
	f2 := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the informers never start: the caches never sync
	if err := f2.c.Run(ctx, 1); err == nil {
		t.Error("Run returned nil without synced caches")
	}
}

// A replica that loses the Lease stops its controller and, on winning it
// back, runs a new one on the same, still running informers: the old one
// sends nothing after Run returns, the new one picks
// up what changed in between and doubles nothing.
func TestLeadershipTerms(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := newRunEnv(t, ctx)
	kube, newController := env.kube, env.newController
	perNode := func() map[string]int {
		list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, p := range list.Items {
			out[p.Annotations["everynode.io/node-name"]]++
		}
		return out
	}
	waitFor := func(what string, cond func(map[string]int) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return cond(perNode()), nil
		})
		if err != nil {
			t.Fatalf("waiting for %s: %v (pods per node %v)", what, err, perNode())
		}
	}

	first := newController()
	env.start()
	termCtx, endTerm := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- first.Run(termCtx, 2) }()
	waitFor("a pod on a and b", func(m map[string]int) bool { return m["a"] == 1 && m["b"] == 1 })
	endTerm()
	if err := <-done; err != nil {
		t.Fatalf("first term: %v", err)
	}
	if err := first.Run(ctx, 1); err == nil {
		t.Error("a second Run of one controller was accepted")
	}

	// No leader: a new node waits.
	if _, err := kube.CoreV1().Nodes().Create(ctx, newNode("c", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kube.ClearActions()
	time.Sleep(100 * time.Millisecond)
	for _, a := range kube.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("a stopped controller sent %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}

	second := newController()
	go func() { done <- second.Run(ctx, 2) }()
	waitFor("a pod on c", func(m map[string]int) bool { return m["c"] == 1 })
	for node, n := range perNode() {
		if n != 1 {
			t.Errorf("node %s has %d pods after the second term started", node, n)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("second term: %v", err)
	}
}

// A pod the API server has and the cache does not yet show (made by the
// previous leader just before it stopped) is expected by catchUp, so the
// first sync makes no second pod on its node.
func TestCatchUpExpectsUncachedPods(t *testing.T) {
	f := newFixture(t)
	addNodes(f, 2)
	ds := newSet("agent")
	hash := addSetWithRevision(f, ds)
	f.add(newPod(ds, "node-0", hash))
	late := newPod(ds, "node-1", hash)
	if err := f.kube.Tracker().Add(late); err != nil { // the server only
		t.Fatal(err)
	}
	n, err := f.c.catchUp(f.ctx)
	if err != nil || n != 1 {
		t.Fatalf("catchUp = %d, %v; want 1 uncached pod", n, err)
	}
	f.mustSync(ds)
	if got := f.createdNodes(); len(got) != 0 {
		t.Fatalf("created on %v while the previous leader's pod was not cached yet", got)
	}
	f.syncCaches()
	f.mustSync(ds)
	if c, d := f.createdNodes(), f.podDeletes(); len(c) != 0 || len(d) != 0 {
		t.Errorf("created %v, deleted %v once the cache caught up; want nothing", c, d)
	}
}
