package e2e

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
	"everynode.io/everynode/takeover"
)

// kube-controller-manager's DaemonSet controller runs in this cluster (the
// e2e cluster runs it with every controller), so the takeover probe must
// find it: this is what keeps `everynode serve --takeover` from running a
// second controller over the same apps/v1 sets. (The other half, no
// answer with --controllers=*,-daemonset-controller, is `make
// conformance`'s: everynode takes over there only after the probe found
// nobody.)
func TestTakeoverProbeFindsKubeControllerManager(t *testing.T) {
	ns := newNamespace(t)
	p := &takeover.Probe{Client: kube, Namespace: ns, Timeout: 20 * time.Second}
	// Twice: once for a new probe, once for a probe moved to a new
	// generation, which is what every later check does.
	for round := 1; round <= 2; round++ {
		start := time.Now()
		err := p.Check(ctx(t))
		var other *takeover.ErrOtherController
		if !errors.As(err, &other) {
			t.Fatalf("round %d: Check = %v after %s; want kube-controller-manager's DaemonSet controller found", round, err, time.Since(start).Round(time.Millisecond))
		}
		t.Logf("round %d: %v", round, err)
	}
}

// Taking over an apps/v1 DaemonSet that kube-controller-manager runs:
// its pods go on (same UIDs, none created or deleted), the set's status
// becomes everynode's to write, and stock kubectl rollout works against
// everynode: an image update rolls, `rollout undo` goes back through the
// revision kube-controller-manager wrote, and `rollout history` lists
// them. Then the lock: kube-controller-manager's DaemonSet controller may
// not write while everynode holds the takeover (lockWrites), and when it
// comes back it gets the sets handed over.
func TestTakeoverOfARunningDaemonSet(t *testing.T) {
	ns := newNamespace(t)
	scenario := "takeover-" + randSuffix()
	createNodes(t, scenario, 3, map[string]string{scenarioLabel: scenario})
	manifest := fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: fluentd, namespace: %s}
spec:
  selector: {matchLabels: {app: fluentd}}
  template:
    metadata: {labels: {app: fluentd}}
    spec:
      nodeSelector: {%q: %q}
      containers: [{name: fluentd, image: "quay.io/fluentd_elasticsearch/fluentd:v5.0.1"}]
`, ns, scenarioLabel, scenario)
	if out, err := kubectl(t, manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	before := runningAppsPods(t, ns, 3, "kube-controller-manager's pods")

	step(t, harness.SetTakeover(bg, true))
	t.Cleanup(func() { step(t, harness.SetTakeover(bg, false)) })

	// everynode marks the pods it found and counts them: no second pod.
	eventually(t, time.Minute, "everynode to take the set over", func() (bool, string, error) {
		pods := appsPods(t, ns)
		marked := 0
		for _, p := range pods {
			if placement.IsDaemonPod(&p) {
				marked++
			}
		}
		return marked == 3 && len(pods) == 3, fmt.Sprintf("%d pods, %d marked", len(pods), marked), nil
	})
	never(t, 10*time.Second, "a pod created or deleted after the takeover", func() (bool, string, error) {
		pods := appsPods(t, ns)
		if len(pods) != 3 {
			return true, fmt.Sprintf("%d pods", len(pods)), nil
		}
		for _, p := range pods {
			if before[p.Spec.NodeName] != p.UID {
				return true, fmt.Sprintf("pod %s on %s is new", p.Name, p.Spec.NodeName), nil
			}
		}
		return false, "", nil
	})

	if out, err := kubectl(t, "", "-n", ns, "set", "image", "ds/fluentd", "fluentd=quay.io/fluentd_elasticsearch/fluentd:v5.0.2"); err != nil {
		t.Fatalf("kubectl set image: %v\n%s", err, out)
	}
	rolloutStatus(t, ns)
	runningAppsPods(t, ns, 3, "the updated pods")
	for _, p := range appsPods(t, ns) {
		if p.Spec.Containers[0].Image != "quay.io/fluentd_elasticsearch/fluentd:v5.0.2" || p.Annotations[everynodev1alpha1.AnnotationMadeWhole] == "" {
			t.Errorf("pod %s: image %s, made-whole %q; want v5.0.2 made by everynode", p.Name, p.Spec.Containers[0].Image, p.Annotations[everynodev1alpha1.AnnotationMadeWhole])
		}
	}

	if out, err := kubectl(t, "", "-n", ns, "rollout", "undo", "ds/fluentd"); err != nil {
		t.Fatalf("kubectl rollout undo: %v\n%s", err, out)
	}
	rolloutStatus(t, ns)
	runningAppsPods(t, ns, 3, "the pods rolled back")
	for _, p := range appsPods(t, ns) {
		if p.Spec.Containers[0].Image != "quay.io/fluentd_elasticsearch/fluentd:v5.0.1" {
			t.Errorf("pod %s runs %s after rollout undo, want v5.0.1", p.Name, p.Spec.Containers[0].Image)
		}
	}
	out, err := kubectl(t, "", "-n", ns, "rollout", "history", "ds/fluentd")
	if revs := historyRevisions(out); err != nil || !slices.Equal(revs, []string{"2", "3"}) {
		t.Errorf("kubectl rollout history: %v, revisions %v\n%s\nwant revisions 2 and 3 (1 became 3 with the undo)", err, revs, out)
	}

	// While everynode holds the takeover, kube-controller-manager's
	// DaemonSet controller cannot write: the lock denies its identity
	// every write of the sets, their revisions and pods, and lets it
	// answer the probe. Then the takeover ends, the chart's policy goes,
	// and the binding with it: the same writes pass.
	lockWrites(t, ns, true)

	// kube-controller-manager's DaemonSet controller comes back, under its
	// own ServiceAccount (the identity locked out). The lock lets it answer
	// the probe and nothing else; everynode stops, unbinds the lock and
	// hands it the sets, which it then rolls.
	step(t, harness.RestartKCM("--controllers=*", "--use-service-account-credentials=true"))
	eventually(t, time.Minute, "everynode to hand the sets over and unbind its lock", func() (bool, string, error) {
		_, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx(t), lockName, metav1.GetOptions{})
		series, scrapeErr := scrape(t)
		if scrapeErr != nil {
			return false, "", scrapeErr
		}
		active := series.series("everynode_takeover_active", nil)
		return apierrors.IsNotFound(err) && len(active) == 1 && active[0].Value == 0, fmt.Sprintf("binding: %v; %v", err, active), nil
	})
	lockWrites(t, ns, false)
	if out, err := kubectl(t, "", "-n", ns, "set", "image", "ds/fluentd", "fluentd=quay.io/fluentd_elasticsearch/fluentd:v5.0.3"); err != nil {
		t.Fatalf("kubectl set image: %v\n%s", err, out)
	}
	rolloutStatus(t, ns)
	runningAppsPods(t, ns, 3, "kube-controller-manager's updated pods")
	for _, p := range appsPods(t, ns) {
		if p.Spec.Containers[0].Image != "quay.io/fluentd_elasticsearch/fluentd:v5.0.3" || p.Annotations[everynodev1alpha1.AnnotationMadeWhole] != "" {
			t.Errorf("pod %s: image %s, made-whole %q; want v5.0.3 made by kube-controller-manager", p.Name, p.Spec.Containers[0].Image, p.Annotations[everynodev1alpha1.AnnotationMadeWhole])
		}
	}
}

// lockName is the takeover lock's policy and binding in the e2e cluster
// (the chart's, release everynode).
const lockName = "everynode-takeover-lock"

// dsControllerUser is kube-controller-manager's DaemonSet controller with
// --use-service-account-credentials: the identity the chart locks out.
const dsControllerUser = "system:serviceaccount:kube-system:daemon-set-controller"

// lockWrites sends, as kube-controller-manager's DaemonSet controller
// (impersonated; RBAC's bootstrap role gives it every one of these
// writes), a dry run of each write it makes: a pod, a pod's deletion, the
// set's status, a ControllerRevision, and the probe's status. With locked,
// all but the probe's must be denied by the lock (polled: a new binding
// takes effect when kube-apiserver's policy cache sees it); without, all
// must pass.
func lockWrites(t *testing.T, ns string, locked bool) {
	t.Helper()
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: dsControllerUser, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}
	as := kubernetes.NewForConfigOrDie(cfg)
	dry := []string{metav1.DryRunAll}
	ds, err := kube.AppsV1().DaemonSets(ns).Get(ctx(t), "fluentd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))
	existing := appsPods(t, ns)[0]
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "fluentd-", Namespace: ns, Labels: ds.Spec.Template.Labels, OwnerReferences: []metav1.OwnerReference{*owner}},
		Spec:       ds.Spec.Template.Spec,
	}
	rev := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "fluentd-lock-check", Namespace: ns, OwnerReferences: []metav1.OwnerReference{*owner}},
		Data:       runtime.RawExtension{Raw: []byte(`{}`)},
		Revision:   99,
	}
	probe, err := kube.AppsV1().DaemonSets(releaseNamespace).Get(ctx(t), takeover.ProbeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writes := []struct {
		what  string
		probe bool
		do    func() error
	}{
		{"create a pod of the set", false, func() error {
			_, err := as.CoreV1().Pods(ns).Create(ctx(t), pod, metav1.CreateOptions{DryRun: dry})
			return err
		}},
		{"delete a pod of the set", false, func() error {
			return as.CoreV1().Pods(ns).Delete(ctx(t), existing.Name, metav1.DeleteOptions{DryRun: dry})
		}},
		{"write the set's status", false, func() error {
			_, err := as.AppsV1().DaemonSets(ns).UpdateStatus(ctx(t), ds, metav1.UpdateOptions{DryRun: dry})
			return err
		}},
		{"create a revision of the set", false, func() error {
			_, err := as.AppsV1().ControllerRevisions(ns).Create(ctx(t), rev, metav1.CreateOptions{DryRun: dry})
			return err
		}},
		{"write the probe's status", true, func() error {
			_, err := as.AppsV1().DaemonSets(releaseNamespace).UpdateStatus(ctx(t), probe, metav1.UpdateOptions{DryRun: dry})
			return err
		}},
	}
	for _, w := range writes {
		wantDenied := locked && !w.probe
		eventually(t, 30*time.Second, fmt.Sprintf("%s as %s: denied %v", w.what, dsControllerUser, wantDenied), func() (bool, string, error) {
			err := w.do()
			denied := apierrors.IsForbidden(err) && strings.Contains(err.Error(), "everynode holds the takeover")
			if err != nil && !denied {
				return false, "", fmt.Errorf("%s: %w", w.what, err)
			}
			return denied == wantDenied, fmt.Sprintf("err %v", err), nil
		})
	}
}

// historyRevisions returns the REVISION column of `kubectl rollout
// history`: the first field of each line that is a number.
func historyRevisions(out string) []string {
	var revs []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			if _, err := strconv.Atoi(f[0]); err == nil {
				revs = append(revs, f[0])
			}
		}
	}
	return revs
}

// appsPods lists the live pods of the DaemonSet fluentd in ns.
func appsPods(t *testing.T, ns string) []corev1.Pod {
	t.Helper()
	list, err := kube.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{LabelSelector: "app=fluentd"})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// runningAppsPods waits for want running, ready pods of fluentd, one per
// node, and returns their UIDs by node.
func runningAppsPods(t *testing.T, ns string, want int, what string) map[string]types.UID {
	t.Helper()
	byNode := map[string]types.UID{}
	eventually(t, time.Minute, what, func() (bool, string, error) {
		byNode = map[string]types.UID{}
		pods := appsPods(t, ns)
		for _, p := range pods {
			if isRunningReady(&p) {
				byNode[p.Spec.NodeName] = p.UID
			}
		}
		return len(pods) == want && len(byNode) == want, fmt.Sprintf("%d pods, %d running and ready on distinct nodes", len(pods), len(byNode)), nil
	})
	return byNode
}

func rolloutStatus(t *testing.T, ns string) {
	t.Helper()
	if out, err := kubectl(t, "", "-n", ns, "rollout", "status", "ds/fluentd", "--timeout=90s"); err != nil {
		t.Fatalf("kubectl rollout status: %v\n%s", err, out)
	}
}
