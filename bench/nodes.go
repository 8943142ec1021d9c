package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// untaintNodes removes the node.kubernetes.io/not-ready:NoSchedule taint that
// kwokctl's node template starts with: the node lifecycle controller that
// would lift it is not run (kube-controller-manager runs only what the
// comparison needs), and a node left tainted would run no daemon pod at all.
func untaintNodes(ctx context.Context, cs kubernetes.Interface) (int, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0, fmt.Errorf("listing nodes: %w", err)
	}
	var todo []string
	for _, n := range nodes.Items {
		if len(n.Spec.Taints) > 0 {
			todo = append(todo, n.Name)
		}
	}
	err = parallel(ctx, 16, len(todo), func(i int) error {
		_, err := cs.CoreV1().Nodes().Patch(ctx, todo[i], types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("untainting nodes: %w", err)
	}
	return len(nodes.Items), nil
}

// joinedLabel marks the nodes joinNodes makes, for the watch that sees them
// turn Ready and for deleteJoinedNodes.
const joinedLabel = "bench.everynode.io/joined"

// joinNodes creates n kwok nodes at once, shaped like an existing one
// (labels, capacity), and lifts each one's not-ready taint once kwok has
// reported it Ready, as the node lifecycle controller would. Lifting it
// earlier (the first version did, right after the create) let a fast
// controller place a pod on a node kwok had not taken on yet: kwok skips
// such a pod and finds it only when it lists the node's pods, one node at a
// time, which at 5,000 nodes made the fastest system's join the slowest. A
// real kubelet reports Ready only once it runs. It returns, per node, when
// its create call was made, when it was seen Ready and when the untaint
// patch returned (no daemon pod can be placed before that, in either
// system).
func joinNodes(ctx context.Context, cs kubernetes.Interface, prefix string, n int, labels map[string]string, timeout time.Duration) (map[string]nodeTimes, error) {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || len(list.Items) == 0 {
		return nil, fmt.Errorf("need a node to copy: %v", err)
	}
	tmpl := list.Items[0]
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	// Watch from the list's version, so no Ready is missed however fast
	// kwok is, and resume from the last event if the API server ends the
	// watch: in one 1,000-node run it ended (HTTP 200, after 0.2 s) before
	// any joining node was Ready, and the run failed.
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = joinedLabel + "=true"
			return cs.CoreV1().Nodes().Watch(ctx, opts)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watching joined nodes: %w", err)
	}
	defer w.Stop()
	ready := newReadyWaiter(names)
	go ready.run(w.ResultChan())

	created := map[string]nodeTimes{}
	var mu sync.Mutex
	err = parallel(ctx, n, n, func(i int) error {
		name := names[i]
		// No Ready condition: kwok's node-initialize stage sets it when it
		// takes the node on.
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
			Status:     corev1.NodeStatus{Capacity: tmpl.Status.Capacity, Allocatable: tmpl.Status.Allocatable},
		}
		for k, v := range tmpl.Labels {
			node.Labels[k] = v
		}
		for k, v := range labels {
			node.Labels[k] = v
		}
		node.Labels["kubernetes.io/hostname"] = name
		node.Labels[joinedLabel] = "true"
		at := time.Now()
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", name, err)
		}
		readyAt, err := ready.wait(ctx, name, timeout)
		if err != nil {
			return err
		}
		// The TaintNodesByCondition admission plugin gave the new node the
		// not-ready:NoSchedule taint; the node lifecycle controller (not run
		// here) lifts it once the node is Ready.
		if _, err := cs.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("untainting node %s: %w", name, err)
		}
		untainted := time.Now()
		mu.Lock()
		created[name] = nodeTimes{created: at, ready: readyAt, untainted: untainted}
		mu.Unlock()
		return nil
	})
	return created, err
}

// nodeTimes is when a joining node was created, seen Ready, and untainted.
type nodeTimes struct{ created, ready, untainted time.Time }

// readyWaiter tells, from one watch of the joining nodes, when each was
// first seen Ready.
type readyWaiter struct {
	mu    sync.Mutex
	nodes map[string]*readySignal
	// done is closed when the watch ends; a node not Ready by then is
	// waited for no longer (its caller says so).
	done chan struct{}
}

// readySignal is one joining node: ch is closed, and at set, when it is
// first seen Ready.
type readySignal struct {
	ch chan struct{}
	at time.Time
}

func newReadyWaiter(names []string) *readyWaiter {
	r := &readyWaiter{nodes: map[string]*readySignal{}, done: make(chan struct{})}
	for _, n := range names {
		r.nodes[n] = &readySignal{ch: make(chan struct{})}
	}
	return r
}

// run reads the watch until it ends.
func (r *readyWaiter) run(events <-chan watch.Event) {
	defer close(r.done)
	for ev := range events {
		node, ok := ev.Object.(*corev1.Node)
		if !ok || !nodeReady(node) {
			continue
		}
		r.mu.Lock()
		if sig, ok := r.nodes[node.Name]; ok && sig.at.IsZero() {
			sig.at = time.Now()
			close(sig.ch)
		}
		r.mu.Unlock()
	}
}

// wait returns when name was seen Ready, or an error once timeout has
// passed or the watch has ended first.
func (r *readyWaiter) wait(ctx context.Context, name string, timeout time.Duration) (time.Time, error) {
	r.mu.Lock()
	sig, ok := r.nodes[name]
	r.mu.Unlock()
	if !ok {
		return time.Time{}, fmt.Errorf("node %s is not one of the joining nodes", name)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-sig.ch:
	case <-r.done:
		// The watch may have delivered the Ready just before it ended.
		select {
		case <-sig.ch:
		default:
			return time.Time{}, fmt.Errorf("node %s: the watch of joining nodes ended before kwok reported it Ready", name)
		}
	case <-timer.C:
		return time.Time{}, fmt.Errorf("node %s not Ready %s after its creation: is kwok running?", name, timeout)
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return sig.at, nil
}

// nodeReady reports whether the node's Ready condition is True (the
// controller has the same few lines, unexported, in another module).
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// deleteJoinedNodes removes the nodes joinNodes made, so the next run starts
// with N nodes again.
func deleteJoinedNodes(ctx context.Context, cs kubernetes.Interface) error {
	err := cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: joinedLabel + "=true"})
	if err != nil {
		return fmt.Errorf("deleting joined nodes: %w", err)
	}
	return nil
}

// parallel runs f(0..n-1) on at most width goroutines and returns the first
// error.
func parallel(ctx context.Context, width, n int, f func(i int) error) error {
	if width < 1 {
		width = 1
	}
	sem := make(chan struct{}, width)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			errs <- f(i)
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}
