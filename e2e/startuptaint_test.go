package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"

	"everynode.io/e2e/cluster"
)

// The startup-taint readiness gate (issue 31), the mode for clusters whose
// scheduler cannot call the extender. everynode runs with --startup-taint
// (and the chart's RBAC for it) and without the daemon-pod marker (no
// scheduler there could be told to ignore it), and kube-scheduler is
// restarted with no extender in its configuration, as on a managed
// cluster, so only the
// taint can hold the ordinary pod back (the scenario checks the extender
// got no call). A node joins with the taint:
// the gated daemon pod lands there (it tolerates the taint) but crash-loops
// (kwok Stages), so the taint stays and the ordinary pod waits; once the
// daemon's image is fixed and its pod Ready, the controller removes the
// taint and the ordinary pod is scheduled there.
func TestStartupTaintGate(t *testing.T) {
	const key = "everynode.io/agents-not-ready"
	kept, err := harness.Settings()
	step(t, err)
	step(t, harness.Reinstall(bg, func(s *cluster.Settings) {
		s.HelmArgs = append(s.HelmArgs, "--set", "startupTaint="+key, "--set", "scheduler.daemonResource=")
		s.EverynodeArgs = append(s.EverynodeArgs, "--startup-taint="+key, "--daemon-resource=")
	}))
	t.Cleanup(func() {
		step(t, harness.Reinstall(bg, func(s *cluster.Settings) { s.HelmArgs, s.EverynodeArgs = kept.HelmArgs, kept.EverynodeArgs }))
	})
	step(t, harness.RestartScheduler(bg, cluster.WithoutExtender))
	t.Cleanup(func() { step(t, harness.RestartScheduler(bg, cluster.WithExtender)) })
	scraped, err := scrape(t)
	if err != nil {
		t.Fatal(err)
	}

	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "taint-" + randSuffix()}
	ds := simpleSet(ns, "cni", sel)
	ds.Spec.NodeReadinessGate = true
	ds.Spec.Template.Spec.Containers[0].Image = "registry.example/cni:crash-loop"
	createSet(t, ds)

	joined := time.Now()
	node := createNodes(t, "taint", 1, sel, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})[0]
	createOrdinaryPod(t, ns, "web", sel)

	// The daemon lands (it tolerates the taint) but never turns Ready: the
	// taint stays, the ordinary pod waits.
	eventually(t, settle, "the crash-looping daemon pod on the tainted node", func() (bool, string, error) {
		pods := daemonPods(t, ns, "cni")
		return len(pods) == 1 && pods[0].Spec.NodeName == node, fmt.Sprintf("%d pods", len(pods)), nil
	})
	never(t, 10*time.Second, "the ordinary pod bound or the taint removed while the gated daemon is not Ready", func() (bool, string, error) {
		p, err := kube.CoreV1().Pods(ns).Get(ctx(t), "web", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		tainted, err := nodeTainted(t, node, key)
		if err != nil {
			return false, "", err
		}
		return p.Spec.NodeName != "" || !tainted, fmt.Sprintf("web on %q, tainted %v", p.Spec.NodeName, tainted), nil
	})

	fixed := time.Now()
	updateSet(t, ns, "cni", func(ds *everynodev1alpha1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = "registry.example/cni:v1"
	})
	var daemonReady, taintGone, webBound time.Time
	eventually(t, settle, "the daemon Ready, the taint gone, the ordinary pod bound", func() (bool, string, error) {
		now := time.Now()
		if daemonReady.IsZero() {
			if ok, _, _ := podsOnNodes(t, ns, "cni", []string{node}, nil); ok {
				daemonReady = now
			}
		}
		tainted, err := nodeTainted(t, node, key)
		if err != nil {
			return false, "", err
		}
		if !tainted && taintGone.IsZero() {
			taintGone = now
		}
		p, err := kube.CoreV1().Pods(ns).Get(ctx(t), "web", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if p.Spec.NodeName != "" && webBound.IsZero() {
			webBound = now
			if tainted {
				t.Errorf("the ordinary pod was bound to %s while the startup taint was still there", p.Spec.NodeName)
			}
			if daemonReady.IsZero() {
				t.Errorf("the ordinary pod was bound before the gated daemon pod was Ready")
			}
		}
		return !daemonReady.IsZero() && !taintGone.IsZero() && !webBound.IsZero(),
			fmt.Sprintf("daemon ready %v, taint gone %v, web bound %v", !daemonReady.IsZero(), !taintGone.IsZero(), !webBound.IsZero()), nil
	})
	t.Logf("node joined, ordinary pod held %.1fs; after the daemon's fix: daemon Ready %.1fs, taint removed %.1fs, ordinary pod bound %.1fs (polled every 0.5 s)",
		fixed.Sub(joined).Seconds(), daemonReady.Sub(fixed).Seconds(), taintGone.Sub(fixed).Seconds(), webBound.Sub(fixed).Seconds())

	after, err := scrape(t)
	if err != nil {
		t.Fatal(err)
	}
	if calls := counterDelta(scraped, after, "everynode_http_request_duration_seconds_count", labelPrefix("route", "/extender/")); calls != 0 {
		t.Errorf("the extender was called %.0f times: the scheduler was meant to run without it", calls)
	}

	evs, err := kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx(t), metav1.ListOptions{FieldSelector: "involvedObject.name=" + node + ",reason=StartupTaintRemoved"})
	if err != nil || len(evs.Items) == 0 {
		t.Errorf("no StartupTaintRemoved event on node %s (%v)", node, err)
	}
}

// createOrdinaryPod creates a pod no controller owns, scheduled by the
// cluster's scheduler onto a node sel selects.
func createOrdinaryPod(t *testing.T, ns, name string, sel map[string]string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeSelector: sel,
			Containers:   []corev1.Container{{Name: name, Image: "registry.example/" + name + ":v1"}},
		},
	}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx(t), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// nodeTainted reports whether node carries a taint with key.
func nodeTainted(t *testing.T, node, key string) (bool, error) {
	n, err := kube.CoreV1().Nodes().Get(ctx(t), node, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == key {
			return true, nil
		}
	}
	return false, nil
}
