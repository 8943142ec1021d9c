package realnode

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"

	"everynode.io/e2e/cluster"
	"everynode.io/e2e/images"
)

// Scenario 1: the chart as `helm install` left it (the harness installed
// it, as a user would, on a clean cluster): both replicas Ready through
// their probes, running the image built here in real containers, one of
// them leading; a set rolls to the kwok nodes and the real node.
func TestHelmInstall(t *testing.T) {
	pods := everynodePods(t)
	if len(pods) != 2 {
		t.Fatalf("%d everynode pods, want the chart's 2 replicas", len(pods))
	}
	leaders := 0
	for _, p := range pods {
		c := p.Spec.Containers[0]
		if c.Image != cluster.EverynodeImage+":"+cluster.EverynodeE2ETag || c.ReadinessProbe == nil || c.LivenessProbe == nil {
			t.Errorf("pod %s runs %s with readiness probe %v and liveness probe %v; want the built image and both probes", p.Name, c.Image, c.ReadinessProbe != nil, c.LivenessProbe != nil)
		}
		if p.Spec.NodeName != cluster.RealNodeName || podCondition(&p, corev1.PodReady) != corev1.ConditionTrue {
			t.Errorf("pod %s on %q Ready=%s; want Ready on %s", p.Name, p.Spec.NodeName, podCondition(&p, corev1.PodReady), cluster.RealNodeName)
		}
		if cs := p.Status.ContainerStatuses; len(cs) != 1 || !strings.HasPrefix(cs[0].ContainerID, "containerd://") {
			t.Errorf("pod %s container statuses %+v; want one containerd container", p.Name, cs)
		}
		metrics, err := podMetrics(&p)
		step(t, err)
		if strings.Contains(metrics, "\neverynode_leader 1\n") {
			leaders++
			if leader(t) != p.Name {
				t.Errorf("pod %s says it leads, the Lease names %q", p.Name, leader(t))
			}
		}
	}
	if leaders != 1 {
		t.Errorf("%d replicas lead, want 1", leaders)
	}

	ns := newNamespace(t)
	createSet(t, testDaemonSet(ns, "agent", "v1"))
	got := rolledOut(t, ns, "agent", "v1")
	real := got[cluster.RealNodeName]
	prefix := netip.MustParsePrefix(cluster.RealNodePodCIDR)
	if ip, err := netip.ParseAddr(real.Status.PodIP); err != nil || !prefix.Contains(ip) {
		t.Errorf("the real node's daemon pod has IP %q, want one in %s", real.Status.PodIP, prefix)
	}
	// The daemon-pod marker (issue 54): kube-scheduler ignores it, and the
	// kubelet admits a pod that requests an extended resource its node
	// does not advertise (it drops the request before its fit check).
	marker := corev1.ResourceName(everynodev1alpha1.DefaultDaemonResource)
	if q := real.Spec.Containers[0].Resources.Requests[marker]; q.Value() != 1 {
		t.Errorf("the real node's daemon pod requests %s of %s, want 1 (the marker)", q.String(), marker)
	}
	t.Logf("the set runs on %d nodes; the real node's pod %s at %s", len(got), real.Name, real.Status.PodIP)
}

// podMetrics reads /metrics of an everynode pod on its health port.
func podMetrics(p *corev1.Pod) (string, error) {
	return podGet(p, 8080, "/metrics")
}

// Scenario 2: the test daemon on the real node is a real container:
// kubectl logs and exec reach it, its readiness probe passed, it answers
// on its address, and `kubectl everynode explain` says the same.
func TestRealContainer(t *testing.T) {
	ns := newNamespace(t)
	createSet(t, testDaemonSet(ns, "agent", "v1"))
	p := rolledOut(t, ns, "agent", "v1")[cluster.RealNodeName]

	logs, err := kubectl("logs", "-n", ns, p.Name)
	step(t, err)
	if want := `testdaemon v1 on node "` + cluster.RealNodeName + `" serving :8080`; !strings.Contains(logs, want) {
		t.Errorf("kubectl logs %s = %q, want a line with %q", p.Name, logs, want)
	}
	out, err := kubectl("exec", "-n", ns, p.Name, "--", "/testdaemon", "version")
	step(t, err)
	if strings.TrimSpace(out) != "v1" {
		t.Errorf("kubectl exec %s -- /testdaemon version = %q, want v1", p.Name, out)
	}
	if body, err := podHTTP(&p, "/healthz"); err != nil || body != "ok" {
		t.Errorf("GET /healthz of %s = %q, %v", p.Name, body, err)
	}
	cs := p.Status.ContainerStatuses[0]
	if !cs.Ready || cs.Started == nil || !*cs.Started || cs.State.Running == nil {
		t.Errorf("container status %+v: want started, running and Ready (through its probe)", cs)
	}

	out, err = kubectl("everynode", "explain", "agent", "-n", ns, "--node", cluster.RealNodeName, "-o", "json")
	step(t, err)
	var report struct {
		Details []struct {
			Node      string `json:"node"`
			ShouldRun bool   `json:"shouldRun"`
			Pod       string `json:"pod"`
			Phase     string `json:"phase"`
			PodReady  bool   `json:"podReady"`
			Updated   bool   `json:"updated"`
		} `json:"details"`
	}
	step(t, json.Unmarshal([]byte(out), &report))
	if len(report.Details) != 1 {
		t.Fatalf("explain --node %s: %s", cluster.RealNodeName, out)
	}
	d := report.Details[0]
	if d.Node != cluster.RealNodeName || !d.ShouldRun || d.Pod != p.Name || d.Phase != "Running" || !d.PodReady || !d.Updated {
		t.Errorf("explain says %+v; the cluster says pod %s Running, Ready, updated", d, p.Name)
	}
}

// Scenario 3: an image update in place on the real node. The pod keeps
// its UID and IP, its container restarts once into the new image, and
// the in-place readiness gate is closed before the image changes and
// opened after the new container is Ready (from a watch of the pod). A
// change that is not the image recreates the pod.
func TestInPlaceOnRealNode(t *testing.T) {
	ns := newNamespace(t)
	ds := testDaemonSet(ns, "agent", "v1")
	ds.Spec.UpdateStrategy.Type = appsv1.RollingUpdateDaemonSetStrategyType
	ds.Spec.UpdateStrategy.RollingUpdate = &everynodev1alpha1.RollingUpdateDaemonSet{PodUpdatePolicy: everynodev1alpha1.PodUpdateInPlaceIfPossible}
	createSet(t, ds)
	before := rolledOut(t, ns, "agent", "v1")[cluster.RealNodeName]

	w, err := kube.CoreV1().Pods(ns).Watch(bg, metav1.ListOptions{FieldSelector: "metadata.name=" + before.Name, ResourceVersion: before.ResourceVersion})
	step(t, err)
	defer w.Stop()
	updateSet(t, ns, "agent", func(ds *everynodev1alpha1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = cluster.TestDaemonImage + ":v2"
	})
	after := rolledOut(t, ns, "agent", "v2")[cluster.RealNodeName]

	// The gate's story, from every change of the pod.
	gate := corev1.PodConditionType(everynodev1alpha1.ConditionInPlaceUpdateReady)
	var closedBeforePatch, patched, openedAfterReady bool
	var story []string
	deadline := time.After(10 * time.Second)
read:
	for {
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Modified {
				continue
			}
			img := p.Spec.Containers[0].Image
			g := podCondition(p, gate)
			story = append(story, fmt.Sprintf("image %s gate %s ready %s", filepath.Base(img), g, podCondition(p, corev1.PodReady)))
			switch {
			case !patched && img == before.Spec.Containers[0].Image && g == corev1.ConditionFalse:
				closedBeforePatch = true
			case !patched && img != before.Spec.Containers[0].Image:
				patched = true
				if g != corev1.ConditionFalse {
					t.Errorf("the image changed with the gate %s; it must be closed first", g)
				}
			case patched && g == corev1.ConditionTrue:
				cs := p.Status.ContainerStatuses[0]
				openedAfterReady = cs.Ready && strings.HasSuffix(cs.Image, ":v2")
				break read
			}
		case <-deadline:
			break read
		}
	}
	t.Logf("the pod's changes: %s", strings.Join(story, "; "))
	if !closedBeforePatch || !patched || !openedAfterReady {
		t.Errorf("gate closed before the patch %v, image patched %v, gate opened once v2 was Ready %v", closedBeforePatch, patched, openedAfterReady)
	}
	if after.UID != before.UID || after.Status.PodIP != before.Status.PodIP || restarts(&after) != restarts(&before)+1 {
		t.Errorf("pod %s uid %s->%s ip %s->%s restarts %d->%d; want the same pod, one more restart",
			after.Name, before.UID, after.UID, before.Status.PodIP, after.Status.PodIP, restarts(&before), restarts(&after))
	}
	if v, err := podHTTP(&after, "/version"); err != nil || v != "v2" {
		t.Errorf("the running daemon says version %q (%v), want v2", v, err)
	}

	updateSet(t, ns, "agent", func(ds *everynodev1alpha1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Env = append(ds.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "LEVEL", Value: "debug"})
	})
	eventually(t, settle, "the env change to recreate the real node's pod", func() (bool, string, error) {
		p, ok := daemonPods(t, ns, "agent")[cluster.RealNodeName]
		if !ok {
			return false, "no pod", nil
		}
		return p.UID != after.UID && podCondition(&p, corev1.PodReady) == corev1.ConditionTrue && len(p.Spec.Containers[0].Env) == 2,
			fmt.Sprintf("pod %s uid %s", p.Name, p.UID), nil
	})
}

// Scenario 4: the leading everynode pod is deleted (kubectl delete pod, a
// graceful stop through the chart's preStop) under a steady admission
// load: the other replica leads, no admission fails, and no node ever has
// two pods of a set.
func TestLeaderDeletedUnderLoad(t *testing.T) {
	const rate, needed = 70, 50
	ns := newNamespace(t)
	createSet(t, testDaemonSet(ns, "agent", "v1"))
	rolledOut(t, ns, "agent", "v1")
	old := leader(t)
	if old == "" {
		t.Fatal("no leader")
	}

	dups := duplicateWatch(t, ns, "agent")
	load := startAdmissionLoad(t, ns, rate)
	time.Sleep(3 * time.Second)
	start := time.Now()
	_, err := kubectl("delete", "pod", "-n", harness.Namespace, old, "--wait=false")
	step(t, err)
	var took time.Duration
	eventually(t, settle, "another replica to lead and the Deployment to be whole again", func() (bool, string, error) {
		now := leader(t)
		if now != old && now != "" && took == 0 {
			took = time.Since(start)
		}
		ready := 0
		for _, p := range everynodePods(t) {
			if podCondition(&p, corev1.PodReady) == corev1.ConditionTrue {
				ready++
			}
		}
		return took > 0 && ready == 2, fmt.Sprintf("leader %q, %d Ready", now, ready), nil
	})
	// A set change after the failover: the new leader acts on it.
	updateSet(t, ns, "agent", func(ds *everynodev1alpha1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = cluster.TestDaemonImage + ":v2"
	})
	rolledOut(t, ns, "agent", "v2")
	// The load runs until the deleted pod has gone through its whole stop
	// (preStop, the shutdown delay, the drain) and a little longer.
	goneAll(t, []string{old})
	time.Sleep(3 * time.Second)
	load.finish(t, needed)
	if n := dups(); n > 0 {
		t.Errorf("%d observations of two pods of the set on one node", n)
	}
	t.Logf("the leader %s was deleted; %s took the Lease after %.1fs", old, leader(t), took.Seconds())
}

// Scenario 5: `helm upgrade` to a new image tag under the same load: the
// Deployment rolls to the new image, no admission fails, and no daemon
// pod is recreated or restarted.
func TestHelmUpgradeUnderLoad(t *testing.T) {
	const rate, needed, next = 70, 50, "e2e-next"
	step(t, harness.ImportImage(bg, images.Everynode(filepath.Join(harness.NodeDir(), "bin", "everynode"), cluster.EverynodeImage+":"+next)))
	ns := newNamespace(t)
	createSet(t, testDaemonSet(ns, "agent", "v1"))
	before := rolledOut(t, ns, "agent", "v1")

	load := startAdmissionLoad(t, ns, rate)
	time.Sleep(3 * time.Second)
	upgrade := func(tag string) {
		t.Helper()
		_, err := helm("upgrade", harness.Release, filepath.Join(harness.Root, "charts", "everynode"), "--reuse-values", "--set", "image.tag="+tag, "--wait", "--timeout", "3m")
		step(t, err)
	}
	var oldPods []string
	for _, p := range everynodePods(t) {
		oldPods = append(oldPods, p.Name)
	}
	start := time.Now()
	upgrade(next)
	eventually(t, settle, "both replicas on the new image", func() (bool, string, error) {
		var on []string
		for _, p := range everynodePods(t) {
			if p.Spec.Containers[0].Image == cluster.EverynodeImage+":"+next && podCondition(&p, corev1.PodReady) == corev1.ConditionTrue {
				on = append(on, p.Name)
			}
		}
		return len(on) == 2 && slices.Contains(on, leader(t)), fmt.Sprintf("%v on %s, leader %q", on, next, leader(t)), nil
	})
	t.Logf("helm upgrade rolled the Deployment in %.1fs", time.Since(start).Seconds())
	goneAll(t, oldPods)
	time.Sleep(3 * time.Second)
	load.finish(t, needed)
	t.Cleanup(func() { upgrade(cluster.EverynodeE2ETag) })

	after := daemonPods(t, ns, "agent")
	for node, b := range before {
		a, ok := after[node]
		if !ok || a.UID != b.UID || restarts(&a) != restarts(&b) {
			t.Errorf("node %s: daemon pod %s (uid %s, restarts %d) became %s (uid %s, restarts %d); an upgrade of everynode must leave it alone",
				node, b.Name, b.UID, restarts(&b), a.Name, a.UID, restarts(&a))
		}
	}
}

func helm(args ...string) (string, error) {
	return kubectlLike(harness.Tool("helm"), append(args, "--namespace", harness.Namespace, "--kubeconfig", harness.Kubeconfig())...)
}

// goneAll waits until the everynode pods named are deleted for good.
func goneAll(t *testing.T, pods []string) {
	t.Helper()
	eventually(t, settle, fmt.Sprintf("everynode pods %v gone", pods), func() (bool, string, error) {
		var left []string
		list, err := kube.CoreV1().Pods(harness.Namespace).List(bg, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		for _, p := range list.Items {
			if slices.Contains(pods, p.Name) {
				left = append(left, p.Name)
			}
		}
		return len(left) == 0, fmt.Sprintf("%v still there", left), nil
	})
}

// The chart's cert-manager mode on the real node (and back): helm upgrade
// with certManager.enabled rolls the Deployment onto cert-manager's
// certificate, which both replicas then serve; the webhooks (admissions
// through the Service) and the extender (kube-scheduler, given
// cert-manager's CA) work with it.
func TestCertManagerMode(t *testing.T) {
	step(t, harness.SetCertMode(bg, cluster.CertManager))
	t.Cleanup(func() { step(t, harness.SetCertMode(bg, cluster.CertSelfSigned)) })
	secret, err := kube.CoreV1().Secrets(harness.Namespace).Get(bg, harness.Release+"-tls", metav1.GetOptions{})
	step(t, err)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(secret.Data["ca.crt"]) {
		t.Fatalf("the Secret %s-tls has no CA", harness.Release)
	}
	serverName := fmt.Sprintf("%s.%s.svc", harness.Release, harness.Namespace)
	eventually(t, settle, "both replicas serving cert-manager's certificate", func() (bool, string, error) {
		var serving []string
		for _, p := range everynodePods(t) {
			conn, err := tls.Dial("tcp", p.Status.PodIP+":8443", &tls.Config{RootCAs: pool, ServerName: serverName})
			if err != nil {
				continue
			}
			conn.Close()
			if podCondition(&p, corev1.PodReady) == corev1.ConditionTrue {
				serving = append(serving, p.Name)
			}
		}
		return len(serving) == 2, fmt.Sprintf("%v verified with cert-manager's CA", serving), nil
	})

	ns := newNamespace(t)
	load := startAdmissionLoad(t, ns, 20)
	before := extenderCalls(t)
	createSet(t, testDaemonSet(ns, "agent", "v1"))
	rolledOut(t, ns, "agent", "v1")
	load.finish(t, 15)
	if calls := extenderCalls(t) - before; calls < 3 {
		t.Errorf("the extender answered %.0f filter calls for the set's 3 pods; kube-scheduler should reach it with cert-manager's CA", calls)
	}
}

// extenderCalls sums everynode_extender_requests_total of the filter verb
// answered 200, over both replicas.
func extenderCalls(t *testing.T) float64 {
	t.Helper()
	var sum float64
	for _, p := range everynodePods(t) {
		body, err := podMetrics(&p)
		step(t, err)
		for _, line := range strings.Split(body, "\n") {
			if rest, ok := strings.CutPrefix(line, `everynode_extender_requests_total{code="200",verb="filter"} `); ok {
				var v float64
				fmt.Sscan(rest, &v)
				sum += v
			}
		}
	}
	return sum
}

// The chart's second kube-scheduler (scheduler.enabled), for clusters
// whose own scheduler cannot be given the extender: kube-scheduler built
// here, as a pod on the real node, reaching everynode's extender by the
// Service's DNS name through the cluster DNS. Daemon pods name it, it
// schedules them (on kwok and real nodes alike), and the extender answers
// it.
func TestSecondScheduler(t *testing.T) {
	chart := filepath.Join(harness.Root, "charts", "everynode")
	var oldPods []string
	for _, p := range everynodePods(t) {
		oldPods = append(oldPods, p.Name)
	}
	_, err := helm("upgrade", harness.Release, chart, "--reuse-values", "--set", "scheduler.enabled=true", "--wait", "--timeout", "3m")
	step(t, err)
	t.Cleanup(func() {
		_, err := helm("upgrade", harness.Release, chart, "--reuse-values", "--set", "scheduler.enabled=false", "--wait", "--timeout", "3m")
		step(t, err)
	})
	const name = "everynode-scheduler"
	eventually(t, settle, "everynode's replicas to name the second scheduler", func() (bool, string, error) {
		return rolledWith(t, "--scheduler-name="+name)
	})
	// The new scheduler starts while the Deployment rolls and may first
	// connect to a replica about to go, whose counts this test cannot
	// read once it has gone: the calls are counted after the old
	// replicas have gone (their stop closes its connections).
	goneAll(t, oldPods)
	before := extenderCalls(t)

	ns := newNamespace(t)
	createSet(t, testDaemonSet(ns, "agent", "v1"))
	pods := rolledOut(t, ns, "agent", "v1")
	for node, p := range pods {
		if p.Spec.SchedulerName != name {
			t.Errorf("the pod on %s names scheduler %q, want %q", node, p.Spec.SchedulerName, name)
		}
	}
	evs, err := kube.CoreV1().Events(ns).List(bg, metav1.ListOptions{FieldSelector: "reason=Scheduled"})
	step(t, err)
	by := map[string]int{}
	for _, e := range evs.Items {
		by[e.ReportingController+e.Source.Component]++
	}
	if by[name] != len(pods) {
		t.Errorf("Scheduled events by reporter: %v; want all %d by %s", by, len(pods), name)
	}
	if calls := extenderCalls(t) - before; calls < float64(len(pods)) {
		t.Errorf("the extender answered %.0f filter calls for %d pods; the second scheduler should call it by the Service's name", calls, len(pods))
	}
}

// Scenario 6: the startup-taint readiness gate on the real node. everynode
// runs with the chart's startupTaint; a gated set's pod starts on the real
// node, whose container turns Ready only after its probe's initial delay,
// and the node gets the startup taint meanwhile (as a node that registers
// with it). The taint stays while the real container is not Ready, and
// goes once it is.
func TestStartupTaintOnRealNode(t *testing.T) {
	const key = "everynode.io/agents-not-ready"
	chart := filepath.Join(harness.Root, "charts", "everynode")
	_, err := helm("upgrade", harness.Release, chart, "--reuse-values", "--set", "startupTaint="+key, "--wait", "--timeout", "3m")
	step(t, err)
	t.Cleanup(func() {
		_, err := helm("upgrade", harness.Release, chart, "--reuse-values", "--set", "startupTaint=", "--wait", "--timeout", "3m")
		step(t, err)
	})
	eventually(t, settle, "both replicas with --startup-taint and a leader", func() (bool, string, error) {
		return rolledWith(t, "--startup-taint="+key)
	})

	ns := newNamespace(t)
	ds := testDaemonSet(ns, "cni", "v1")
	ds.Spec.NodeReadinessGate = true
	ds.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: cluster.RealNodeName}
	ds.Spec.Template.Spec.Containers[0].ReadinessProbe.InitialDelaySeconds = 8
	createSet(t, ds)
	var pod corev1.Pod
	eventually(t, settle, "the gated daemon's container running on the real node", func() (bool, string, error) {
		p, ok := daemonPods(t, ns, "cni")[cluster.RealNodeName]
		pod = p
		return ok && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil, "", nil
	})
	taint := corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule}
	setTaint(t, &taint)
	t.Cleanup(func() { setTaint(t, nil) })
	tainted := time.Now()

	var readyAt, goneAt time.Time
	eventually(t, settle, "the daemon Ready and the taint gone", func() (bool, string, error) {
		p, err := kube.CoreV1().Pods(ns).Get(bg, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		n, err := kube.CoreV1().Nodes().Get(bg, cluster.RealNodeName, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		has := slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == key })
		ready := len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
		if ready && readyAt.IsZero() {
			readyAt = time.Now()
		}
		if !has && goneAt.IsZero() {
			goneAt = time.Now()
			if !ready {
				t.Errorf("the startup taint was removed while the gated daemon's container was not Ready")
			}
		}
		return !readyAt.IsZero() && !goneAt.IsZero(), fmt.Sprintf("ready %v, tainted %v", ready, has), nil
	})
	t.Logf("tainted; the container Ready after %.1fs, the taint removed after %.1fs (polled every 0.5 s)",
		readyAt.Sub(tainted).Seconds(), goneAt.Sub(tainted).Seconds())
	if readyAt.Sub(tainted) < 2*time.Second {
		t.Errorf("the container was Ready %.1fs after the taint: the scenario needs it not Ready for a while to show anything", readyAt.Sub(tainted).Seconds())
	}
	// Events are sent after the write they tell of, from a queue.
	eventually(t, 30*time.Second, "a StartupTaintRemoved event on the real node", func() (bool, string, error) {
		evs, err := kube.CoreV1().Events(metav1.NamespaceDefault).List(bg, metav1.ListOptions{FieldSelector: "involvedObject.name=" + cluster.RealNodeName + ",reason=StartupTaintRemoved"})
		return err == nil && len(evs.Items) > 0, "none yet", err
	})
}

// setTaint puts taint on the real node, or removes every taint of ours
// when nil.
func setTaint(t *testing.T, taint *corev1.Taint) {
	t.Helper()
	for range 10 {
		n, err := kube.CoreV1().Nodes().Get(bg, cluster.RealNodeName, metav1.GetOptions{})
		step(t, err)
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(x corev1.Taint) bool { return strings.HasPrefix(x.Key, "everynode.io/") })
		if taint != nil {
			n.Spec.Taints = append(n.Spec.Taints, *taint)
		}
		if _, err = kube.CoreV1().Nodes().Update(bg, n, metav1.UpdateOptions{}); err == nil {
			return
		}
	}
	t.Fatal("could not update the real node's taints")
}

// rolledWith reports whether both replicas run with flag, Ready, and one
// of them leads: until the old leader has stopped, it still makes the
// daemon pods, without the flag.
func rolledWith(t *testing.T, flag string) (bool, string, error) {
	t.Helper()
	var with []string
	for _, p := range everynodePods(t) {
		if podCondition(&p, corev1.PodReady) == corev1.ConditionTrue && slices.Contains(p.Spec.Containers[0].Args, flag) {
			with = append(with, p.Name)
		}
	}
	l := leader(t)
	return len(with) == 2 && slices.Contains(with, l), fmt.Sprintf("%v Ready with %s, leader %q", with, flag, l), nil
}
