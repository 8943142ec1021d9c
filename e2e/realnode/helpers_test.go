package realnode

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"

	"everynode.io/e2e/cluster"
)

// testDaemonSet runs the test daemon (e2e/cmd/testdaemon) on every node:
// a real container on the real node, with a readiness probe on /healthz
// there (kwok runs no probe and makes its pods Ready at once).
func testDaemonSet(ns, name, tag string) *everynodev1alpha1.DaemonSet {
	labels := map[string]string{"app": name}
	return &everynodev1alpha1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: everynodev1alpha1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: new(int64),
					Containers: []corev1.Container{{
						Name:            "daemon",
						Image:           cluster.TestDaemonImage + ":" + tag,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Env:             []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
						Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
							PeriodSeconds: 1,
						},
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi"),
						}},
					}},
				},
			},
		},
	}
}

func createSet(t *testing.T, ds *everynodev1alpha1.DaemonSet) {
	t.Helper()
	_, err := everynode.EverynodeV1alpha1().DaemonSets(ds.Namespace).Create(bg, ds, metav1.CreateOptions{})
	step(t, err)
}

// updateSet applies change to the newest copy of the set, retrying on
// conflicts with the controller's status writes.
func updateSet(t *testing.T, ns, name string, change func(*everynodev1alpha1.DaemonSet)) {
	t.Helper()
	var err error
	for range 10 {
		var ds *everynodev1alpha1.DaemonSet
		ds, err = everynode.EverynodeV1alpha1().DaemonSets(ns).Get(bg, name, metav1.GetOptions{})
		step(t, err)
		change(ds)
		if _, err = everynode.EverynodeV1alpha1().DaemonSets(ns).Update(bg, ds, metav1.UpdateOptions{}); err == nil {
			return
		}
	}
	t.Fatalf("update DaemonSet %s/%s: %v", ns, name, err)
}

// daemonPods are the set's pods that are bound to a node and not being
// deleted, by node.
func daemonPods(t *testing.T, ns, set string) map[string]corev1.Pod {
	t.Helper()
	list, err := kube.CoreV1().Pods(ns).List(bg, metav1.ListOptions{LabelSelector: "app=" + set})
	step(t, err)
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			if prev, dup := out[p.Spec.NodeName]; dup {
				t.Errorf("two pods of %s on node %s: %s and %s", set, p.Spec.NodeName, prev.Name, p.Name)
			}
			out[p.Spec.NodeName] = p
		}
	}
	return out
}

func nodeNames(t *testing.T) []string {
	t.Helper()
	list, err := kube.CoreV1().Nodes().List(bg, metav1.ListOptions{})
	step(t, err)
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	return names
}

// rolledOut waits until every node runs a Ready pod of the set with the
// image tag.
func rolledOut(t *testing.T, ns, set, tag string) map[string]corev1.Pod {
	t.Helper()
	nodes := nodeNames(t)
	var pods map[string]corev1.Pod
	eventually(t, settle, fmt.Sprintf("%s at %s Ready on all %d nodes", set, tag, len(nodes)), func() (bool, string, error) {
		pods = daemonPods(t, ns, set)
		var waiting []string
		for _, n := range nodes {
			p, ok := pods[n]
			switch {
			case !ok:
				waiting = append(waiting, n+": no pod")
			case p.Spec.Containers[0].Image != cluster.TestDaemonImage+":"+tag:
				waiting = append(waiting, n+": "+p.Spec.Containers[0].Image)
			case podCondition(&p, corev1.PodReady) != corev1.ConditionTrue:
				waiting = append(waiting, n+": not Ready")
			}
		}
		return len(waiting) == 0, strings.Join(waiting, ", "), nil
	})
	return pods
}

// podHTTP gets path from the test daemon's port at its address on the
// harness's bridge.
func podHTTP(p *corev1.Pod, path string) (string, error) {
	body, err := podGet(p, 8080, path)
	return strings.TrimSpace(body), err
}

// everynodePods are the chart's Deployment's pods that are not being
// deleted.
func everynodePods(t *testing.T) []corev1.Pod {
	t.Helper()
	list, err := kube.CoreV1().Pods(harness.Namespace).List(bg, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=controller"})
	step(t, err)
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// leader is the pod that holds everynode's Lease (its holder identity is
// <pod>_<n>).
func leader(t *testing.T) string {
	t.Helper()
	l, err := kube.CoordinationV1().Leases(harness.Namespace).Get(bg, harness.Release, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	pod, _, _ := strings.Cut(*l.Spec.HolderIdentity, "_")
	return pod
}

// admissionLoad sends server-side dry-run creates of an everynode
// DaemonSet, each through the mutating and validating webhooks (the
// chart marks them sideEffects None), at rate per second until stopped,
// and counts the ones that failed.
type admissionLoad struct {
	stop     chan struct{}
	wg       sync.WaitGroup
	sent, ok atomic.Int64
	mu       sync.Mutex
	failures []string
	started  time.Time
	elapsed  time.Duration
}

func startAdmissionLoad(t *testing.T, ns string, rate int) *admissionLoad {
	t.Helper()
	l := &admissionLoad{stop: make(chan struct{}), started: time.Now()}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	work := make(chan int, rate)
	for range 16 {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := range work {
				ds := testDaemonSet(ns, fmt.Sprintf("load-%d", i), "v1")
				_, err := everynode.EverynodeV1alpha1().DaemonSets(ns).Create(bg, ds, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				if err != nil {
					l.mu.Lock()
					l.failures = append(l.failures, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), err))
					l.mu.Unlock()
					continue
				}
				l.ok.Add(1)
			}
		}()
	}
	go func() {
		defer close(work)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-tick.C:
				select {
				case work <- i:
					l.sent.Add(1)
				default: // every worker busy: a missed beat, seen in the rate
				}
			}
		}
	}()
	return l
}

// finish stops the load and checks it: no failed admission, and at least
// the rate the scenario needs (a slower run would prove less than it
// claims; the load aims above it, for a busy machine's missed beats).
func (l *admissionLoad) finish(t *testing.T, rate int) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	l.elapsed = time.Since(l.started)
	got := float64(l.ok.Load()) / l.elapsed.Seconds()
	t.Logf("admission load: %d requests in %.1fs (%.0f/s), %d failed", l.sent.Load(), l.elapsed.Seconds(), got, len(l.failures))
	for i, f := range l.failures {
		if i == 10 {
			t.Errorf("... and %d more", len(l.failures)-10)
			break
		}
		t.Errorf("failed admission: %s", f)
	}
	if got < float64(rate) {
		t.Errorf("the load reached %.0f admissions/s, below the %d/s the scenario needs", got, rate)
	}
}

// duplicateWatch checks, every 200 ms until stopped, that no node has two
// pods of the set that are not being deleted.
func duplicateWatch(t *testing.T, ns, set string) (stop func() int) {
	t.Helper()
	done := make(chan struct{})
	var dups atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			list, err := kube.CoreV1().Pods(ns).List(bg, metav1.ListOptions{LabelSelector: "app=" + set})
			if err != nil {
				continue
			}
			seen := map[string]string{}
			for _, p := range list.Items {
				if p.DeletionTimestamp != nil || p.Spec.NodeName == "" {
					continue
				}
				if other, ok := seen[p.Spec.NodeName]; ok {
					dups.Add(1)
					t.Logf("two pods of %s on %s: %s and %s", set, p.Spec.NodeName, other, p.Name)
				}
				seen[p.Spec.NodeName] = p.Name
			}
		}
	}()
	return func() int { close(done); wg.Wait(); return int(dups.Load()) }
}
