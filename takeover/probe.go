// Package takeover decides when everynode may reconcile apps/v1
// DaemonSets: only while no other DaemonSet controller does. Two
// controllers over one set would each create the pods the other has not
// shown yet and undo each other's status.
//
// kube-controller-manager says nowhere which of its controllers run, so
// everynode asks the controller itself: it keeps one apps/v1 DaemonSet of
// its own, the probe, that selects no node and whose status everynode
// never writes. Any DaemonSet controller syncs every set it sees and
// writes observedGeneration when a set's generation moves, so:
//
//   - Check moves the probe's generation and waits Timeout: if anyone
//     observes it, another DaemonSet controller runs, and everynode must
//     not take over;
//   - after a clean Check, any write of the probe's status is such a
//     controller starting later (kube-controller-manager syncs every set
//     when it starts), and everynode stops reconciling apps/v1 at once
//     (Runner).
//
// What it cannot see: another controller whose queue is longer than
// Timeout when Check runs. It is seen when it reaches the probe, and the
// takeover stops then. Without a Lock the two overlap for that long (raise
// --takeover-probe-timeout on clusters where kube-controller-manager
// lags); with one, the other controller's writes are denied meanwhile,
// so they never overlap (lock.go).
package takeover

import (
	"context"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// ProbeName is the name of the probe DaemonSet in everynode's namespace.
const ProbeName = "everynode-takeover-probe"

// roundAnnotation on the probe's pod template holds the round of the last
// Check: changing it is what moves the probe's generation.
const roundAnnotation = "everynode.io/takeover-probe-round"

// noNodeLabel is the probe's nodeSelector: no node carries it, so no
// controller ever makes a pod for the probe.
const noNodeLabel = "everynode.io/takeover-probe-no-node"

// ProbeSet returns the probe DaemonSet of namespace at round.
func ProbeSet(namespace string, round int64) *appsv1.DaemonSet {
	labels := map[string]string{everynodev1alpha1.LabelTakeoverProbe: "true"}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:      ProbeName,
			Namespace: namespace,
			Labels:    labels,
			Annotations: map[string]string{
				"everynode.io/purpose": "everynode --takeover checks with this set that no other DaemonSet controller " +
					"(kube-controller-manager's) runs: everynode never writes its status, so anyone who does is one. It never runs a pod.",
			},
		},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      labels,
					Annotations: map[string]string{roundAnnotation: strconv.FormatInt(round, 10)},
				},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{noNodeLabel: "true"},
					Containers: []corev1.Container{{
						Name:  "probe",
						Image: "registry.k8s.io/pause:3.10",
					}},
				},
			},
		},
	}
}

// Answered reports whether the probe's status changed from old to cur:
// someone other than everynode wrote it.
func Answered(old, cur *appsv1.DaemonSet) bool {
	return !apiequality.Semantic.DeepEqual(old.Status, cur.Status)
}

// Probe runs Checks against the probe in Namespace.
type Probe struct {
	Client    kubernetes.Interface
	Namespace string
	// Timeout is how long another controller gets to observe the probe's
	// new generation.
	Timeout time.Duration
	// Poll is how often the probe is read meanwhile; 0 means 250ms.
	Poll time.Duration
	// Clock is the round's source and times Poll and Timeout; nil means
	// the real clock. Tests step a fake one.
	Clock clock.Clock
}

// ErrOtherController is the error of a Check that found another DaemonSet
// controller.
type ErrOtherController struct {
	Generation int64
	Waited     time.Duration
}

func (e *ErrOtherController) Error() string {
	return fmt.Sprintf("another DaemonSet controller runs: it observed generation %d of the probe DaemonSet within %s "+
		"(kube-controller-manager's, unless it runs with --controllers=*,-daemonset-controller); "+
		"everynode does not reconcile apps/v1 DaemonSets while it does", e.Generation, e.Waited.Round(time.Millisecond))
}

// Check moves the probe to a new generation (creating it first if need
// be) and waits Timeout for anyone to observe it. It returns nil when
// nobody did, *ErrOtherController when someone did, and another error
// when it could not tell.
func (p *Probe) Check(ctx context.Context) error {
	var clk clock.Clock = clock.RealClock{}
	if p.Clock != nil {
		clk = p.Clock
	}
	poll := p.Poll
	if poll == 0 {
		poll = 250 * time.Millisecond
	}
	sets := p.Client.AppsV1().DaemonSets(p.Namespace)
	want := ProbeSet(p.Namespace, clk.Now().UnixNano())
	probe, err := sets.Get(ctx, ProbeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		probe, err = sets.Create(ctx, want, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create the takeover probe DaemonSet %s/%s: %w", p.Namespace, ProbeName, err)
		}
	case err != nil:
		return fmt.Errorf("get the takeover probe DaemonSet %s/%s: %w", p.Namespace, ProbeName, err)
	default:
		// A new round moves the generation; the rest puts back what
		// anyone may have changed.
		probe.Labels = want.Labels
		probe.Spec = want.Spec
		probe, err = sets.Update(ctx, probe, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("update the takeover probe DaemonSet %s/%s: %w", p.Namespace, ProbeName, err)
		}
	}
	gen := probe.Generation
	start := clk.Now()
	// Read every poll, and once more when Timeout is up: a read that
	// comes late still counts, so a slow process cannot miss an answer.
	for waited := time.Duration(0); waited < p.Timeout; {
		t := clk.NewTimer(min(poll, p.Timeout-waited))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("watch the takeover probe DaemonSet %s/%s: %w", p.Namespace, ProbeName, ctx.Err())
		case <-t.C():
		}
		cur, err := sets.Get(ctx, ProbeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("watch the takeover probe DaemonSet %s/%s: %w", p.Namespace, ProbeName, err)
		}
		waited = clk.Since(start)
		if cur.Status.ObservedGeneration >= gen {
			return &ErrOtherController{Generation: gen, Waited: waited}
		}
	}
	return nil
}
