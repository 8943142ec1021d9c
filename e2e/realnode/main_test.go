// Package realnode holds the scenarios of the real node (issue 53): the
// chart installed as a user installs it, everynode's own image in the
// chart's Deployment on a kubelet with containerd, and daemon pods with
// real containers beside kwok's. They run against a cluster made with
// REAL_NODE=1 (`make e2e-real-node`); e2e/cluster/node.go says how the
// node is made and why its network stays on this host.
package realnode

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	versioned "everynode.io/everynode/client/clientset/versioned"

	"everynode.io/e2e/cluster"
)

var (
	kube      kubernetes.Interface
	everynode versioned.Interface
	harness   *cluster.Cluster
	bg        = context.Background()
)

// TestMain connects to the real-node cluster. No cluster, or one without
// a real node, is a failure: `make e2e-real-node` always makes one.
func TestMain(m *testing.M) {
	if err := connect(); err != nil {
		fmt.Fprintf(os.Stderr, "realnode: %v; run the scenarios with `make e2e-real-node`\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func connect() error {
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		return fmt.Errorf("KUBECONFIG is not set")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 200, 400
	kube = kubernetes.NewForConfigOrDie(cfg)
	everynode = versioned.NewForConfigOrDie(cfg)
	wd, _ := os.Getwd()
	if harness, err = cluster.New(filepath.Dir(filepath.Dir(wd)), os.Getenv("CLUSTER_NAME")); err != nil {
		return err
	}
	harness.Log = io.Discard
	s, err := harness.Settings()
	if err != nil {
		return err
	}
	if !s.RealNode {
		return fmt.Errorf("cluster %s has no real node", harness.Name)
	}
	return nil
}

// settle bounds a wait for the cluster to do something; a bound for a
// loaded CI machine, not a performance assertion.
const settle = 3 * time.Minute

// eventually polls cond every half second until it says done, and fails
// the test with its last message after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string, error)) {
	t.Helper()
	deadline, lastLog := time.Now().Add(timeout), time.Now()
	for {
		done, msg, err := cond()
		if err != nil {
			msg = "error: " + err.Error()
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, msg)
		}
		if time.Since(lastLog) > 10*time.Second {
			t.Logf("waiting for %s: %s", what, msg)
			lastLog = time.Now()
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func step(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// newNamespace creates a namespace for one scenario and deletes it after.
func newNamespace(t *testing.T) string {
	t.Helper()
	const letters = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	for i := range b {
		b[i] = letters[rand.IntN(len(letters))]
	}
	name := "real-" + string(b)
	_, err := kube.CoreV1().Namespaces().Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	step(t, err)
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(bg, name, metav1.DeleteOptions{}) })
	return name
}

// kubectl runs the harness's kubectl (with the plugin on PATH) and
// returns its output.
func kubectl(args ...string) (string, error) {
	cmd := exec.Command(harness.Tool("kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+harness.Kubeconfig(),
		"PATH="+filepath.Join(harness.Root, "bin")+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func podCondition(p *corev1.Pod, ct corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == ct {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// kubectlLike runs a tool of the harness and returns its output.
func kubectlLike(tool string, args ...string) (string, error) {
	cmd := exec.Command(tool, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", filepath.Base(tool), strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// podGet gets path from port of a pod at its address on the harness's
// bridge.
func podGet(p *corev1.Pod, port int, path string) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://%s:%d%s", p.Status.PodIP, port, path))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s from %s: %s", path, p.Name, resp.Status)
	}
	return string(b), err
}
