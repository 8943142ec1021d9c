package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// The upstream docs' fluentd-elasticsearch DaemonSet, as apps/v1 run by
// kube-controller-manager on 5 nodes, moves to everynode.io with `kubectl
// everynode migrate` and back with --to apps: every pod keeps its UID, no
// pod is created or deleted (a watch on the namespace sees every event),
// and each time the new set reports every pod its own, updated and
// available.
func TestMigrateFluentdAndBack(t *testing.T) {
	ns := newNamespace(t)
	scenario := "migrate-" + randSuffix()
	createNodes(t, scenario, 5, map[string]string{scenarioLabel: scenario})
	raw, err := os.ReadFile(filepath.Join(repoRoot, "examples", "fluentd-elasticsearch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := strings.NewReplacer(
		"apiVersion: everynode.io/v1alpha1", "apiVersion: apps/v1",
		"namespace: kube-system", "namespace: "+ns,
		"    spec:\n      tolerations:", fmt.Sprintf("    spec:\n      nodeSelector: {%q: %q}\n      tolerations:", scenarioLabel, scenario),
	).Replace(string(raw))
	if out, err := kubectl(t, manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	const name = "fluentd-elasticsearch"
	pods := func() map[string]types.UID {
		list, err := kube.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{LabelSelector: "name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]types.UID{}
		for _, p := range list.Items {
			if isRunningReady(&p) && p.DeletionTimestamp == nil {
				out[p.Spec.NodeName] = p.UID
			}
		}
		return out
	}
	var before map[string]types.UID
	eventually(t, time.Minute, "kube-controller-manager's 5 pods", func() (bool, string, error) {
		before = pods()
		return len(before) == 5, fmt.Sprintf("%d running", len(before)), nil
	})

	// Every pod created or deleted from here on.
	var churned []string
	stopWatch := watchPods(t, ns, nil, func(ev watch.EventType, p *corev1.Pod) {
		if ev == watch.Added || ev == watch.Deleted || p.DeletionTimestamp != nil {
			churned = append(churned, fmt.Sprintf("%s %s", ev, p.Name))
		}
	})

	dir := t.TempDir()
	out := mustPlugin(t, "migrate", name, "-n", ns, "--dry-run", "--backup-dir", dir)
	if !strings.Contains(out, "dry run: nothing changed") {
		t.Errorf("--dry-run printed:\n%s", out)
	}
	if _, err := kube.AppsV1().DaemonSets(ns).Get(ctx(t), name, metav1.GetOptions{}); err != nil {
		t.Fatalf("after --dry-run the apps/v1 set is gone: %v", err)
	}
	t.Log(mustPlugin(t, "migrate", name, "-n", ns, "--backup-dir", dir))
	set := getSet(t, ns, name)
	if s := set.Status; s.DesiredNumberScheduled != 5 || s.UpdatedNumberScheduled != 5 || s.NumberAvailable != 5 {
		t.Errorf("everynode set status %+v, want 5 desired, updated and available", s)
	}
	for _, p := range daemonPods(t, ns, name) {
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != set.UID {
			t.Errorf("pod %s is not the everynode set's: owner %+v", p.Name, p.OwnerReferences)
		}
	}
	if after := pods(); !sameUIDs(before, after) {
		t.Errorf("pods after the migration %v, want the same UIDs as before %v", after, before)
	}

	t.Log(mustPlugin(t, "migrate", name, "-n", ns, "--to", "apps", "--backup-dir", dir))
	back, err := kube.AppsV1().DaemonSets(ns).Get(ctx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := back.Status; s.DesiredNumberScheduled != 5 || s.UpdatedNumberScheduled != 5 || s.NumberAvailable != 5 {
		t.Errorf("apps/v1 set status %+v, want 5 desired, updated and available", s)
	}
	if after := pods(); !sameUIDs(before, after) {
		t.Errorf("pods after migrating back %v, want the same UIDs as before %v", after, before)
	}
	// kube-controller-manager would have replaced pods right away had it
	// taken them for another revision; give it a moment to show it.
	time.Sleep(3 * time.Second)
	stopWatch()
	if len(churned) > 0 {
		t.Errorf("pods created or deleted during the migrations: %v", churned)
	}
}

func sameUIDs(a, b map[string]types.UID) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
