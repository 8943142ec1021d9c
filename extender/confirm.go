package extender

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	versioned "everynode.io/everynode/client/clientset/versioned"
	"everynode.io/everynode/placement"
)

// A refusal is read again from the API server before it is given.
//
// The caches can trail the API server: by milliseconds between two
// replicas (one's controller saw the node join, or the old pod go, and
// made the pod; the other's extender has yet to see it), by many seconds
// for a replica whose watches back off after a kube-apiserver restart.
// And a refusal costs the pod more than one attempt. kube-scheduler tries
// an unschedulable pod again when an event could help a plugin that
// rejected it; no plugin of its own rejected the target node, and the
// other nodes failed NodeAffinity, so neither a pod's deletion nor a
// node's status wakes it. It waits for the five-minute flush of
// unschedulable pods (podMaxInUnschedulablePodsDuration). The soak's smoke
// saw eight nodes go without a pod of their OnDelete set that long,
// refused for old pods the extender's replica still cached.
//
// Refusals are rare: the controller makes a pod only where its own
// caches say it may go. So a few reads each cost little.

// confirmTimeout bounds the reads that confirm one refusal: kube-scheduler
// gives an extender call 5 s (its httpTimeout), and past that skips an
// ignorable extender, letting the pod through unchecked.
const confirmTimeout = time.Second

// liveReads are the API clients a refusal is confirmed with.
type liveReads struct {
	kube      kubernetes.Interface
	everynode versioned.Interface
}

// ConfirmWith has the filter confirm each refusal with reads through the
// clients (the set, the node and the duplicate pods named). Call it before
// serving.
func (e *Extender) ConfirmWith(kube kubernetes.Interface, everynode versioned.Interface) {
	e.cluster.live = &liveReads{kube: kube, everynode: everynode}
}

// reader reads the API server, under ctx.
func (l *liveReads) reader(ctx context.Context) reader {
	return reader{
		getSet: func(namespace, name string, apps bool) (*everynodev1alpha1.DaemonSet, error) {
			if !apps {
				return l.everynode.EverynodeV1alpha1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
			}
			ds, err := l.kube.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return placement.FromApps(ds), nil
		},
		getNode: func(name string) (*corev1.Node, error) {
			return l.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		},
		active: func(pods []*corev1.Pod) ([]*corev1.Pod, error) {
			var out []*corev1.Pod
			for _, p := range pods {
				live, err := l.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
				switch {
				case apierrors.IsNotFound(err):
				case err != nil:
					return nil, err
				case live.UID == p.UID && placement.IsPodActive(live):
					out = append(out, p)
				}
			}
			return out, nil
		},
	}
}

// confirm returns the reason decide gives with the API server's answers
// in place of the caches': "" when the caches trailed and the node may
// take the pod. A read that fails leaves cached, the caches' reason: a
// wait is better than two pods on a node.
func (c *cluster) confirm(cached string, decide func(reader) (string, error)) string {
	if c.live == nil {
		return cached
	}
	ctx, cancel := context.WithTimeout(context.Background(), confirmTimeout)
	defer cancel()
	reason, err := decide(c.live.reader(ctx))
	switch {
	case err != nil:
		refusalReads[readFailed].Inc()
		return cached
	case reason == "":
		refusalReads[readOverturned].Inc()
	default:
		refusalReads[readConfirmed].Inc()
	}
	return reason
}
