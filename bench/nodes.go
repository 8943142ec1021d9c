package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
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

// joinNodes creates n kwok nodes at once, shaped like an existing one
// (labels, capacity), untainted and already Ready; kwok (run with
// --manage-all-nodes) keeps them so. It returns, per node, when its create
// call was made and when the untaint patch returned (no daemon pod can be
// placed before that, in either system).
func joinNodes(ctx context.Context, cs kubernetes.Interface, prefix string, n int) (map[string]nodeTimes, error) {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || len(list.Items) == 0 {
		return nil, fmt.Errorf("need a node to copy: %v", err)
	}
	tmpl := list.Items[0]
	created := map[string]nodeTimes{}
	var mu sync.Mutex
	err = parallel(ctx, n, n, func(i int) error {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
			Status: corev1.NodeStatus{
				Capacity: tmpl.Status.Capacity, Allocatable: tmpl.Status.Allocatable,
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
					LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
			},
		}
		for k, v := range tmpl.Labels {
			node.Labels[k] = v
		}
		node.Labels["kubernetes.io/hostname"] = name
		node.Labels["bench.everynode.io/joined"] = "true"
		at := time.Now()
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", name, err)
		}
		// The TaintNodesByCondition admission plugin gives every new node the
		// not-ready:NoSchedule taint; the node lifecycle controller (not run
		// here) would lift it once the node is Ready, which it already is.
		if _, err := cs.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("untainting node %s: %w", name, err)
		}
		untainted := time.Now()
		mu.Lock()
		created[name] = nodeTimes{created: at, untainted: untainted}
		mu.Unlock()
		return nil
	})
	return created, err
}

// nodeTimes is when a joining node was created and when its taint was lifted.
type nodeTimes struct{ created, untainted time.Time }

// deleteJoinedNodes removes the nodes joinNodes made, so the next run starts
// with N nodes again.
func deleteJoinedNodes(ctx context.Context, cs kubernetes.Interface) error {
	err := cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "bench.everynode.io/joined=true"})
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
