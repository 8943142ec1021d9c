package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// kubectlEverynode runs the plugin as a user would (kubectl finds it on
// PATH) and returns its combined output.
func kubectlEverynode(t *testing.T, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx(t), timeout)
	defer cancel()
	cmd := exec.CommandContext(c, filepath.Join(repoRoot, ".e2e", "bin", "kubectl"), append([]string{"everynode"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(repoRoot, "bin")+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustPlugin(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectlEverynode(t, 4*time.Minute, args...)
	if err != nil {
		t.Fatalf("kubectl everynode %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func setImage(t *testing.T, ns, name, img, cause string) {
	t.Helper()
	updateSet(t, ns, name, func(ds *everynodev1alpha1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = img
		if ds.Annotations == nil {
			ds.Annotations = map[string]string{}
		}
		ds.Annotations[everynodev1alpha1.AnnotationChangeCause] = cause
	})
}

// Issue 7's user story: two image updates with change causes, history lists
// three revisions, undo --to-revision 1 brings the first image back on every
// node with rollout status exiting 0; pause stops replacement mid-rollout and
// resume finishes it.
func TestPluginRollout(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "plugin-" + randSuffix()}
	nodes := createNodes(t, "plugin", 3, sel)
	ds := simpleSet(ns, "agent", sel)
	// Slow enough to pause in the middle: each new pod must stay Ready 3 s.
	ds.Spec.MinReadySeconds = 3
	ds.Annotations = map[string]string{everynodev1alpha1.AnnotationChangeCause: "initial"}
	createSet(t, ds)
	mustPlugin(t, "rollout", "status", "agent", "-n", ns, "--timeout=3m")

	setImage(t, ns, "agent", "registry.example/agent:v2", "image v2")
	mustPlugin(t, "rollout", "status", "agent", "-n", ns, "--timeout=3m")
	setImage(t, ns, "agent", "registry.example/agent:v3", "image v3")
	mustPlugin(t, "rollout", "status", "agent", "-n", ns, "--timeout=3m")

	history := mustPlugin(t, "rollout", "history", "agent", "-n", ns)
	for _, want := range []string{"1         initial", "2         image v2", "3         image v3"} {
		if !strings.Contains(strings.Join(strings.Fields(history), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("history lacks %q:\n%s", want, history)
		}
	}

	mustPlugin(t, "rollout", "undo", "agent", "-n", ns, "--to-revision=1")
	mustPlugin(t, "rollout", "status", "agent", "-n", ns, "--timeout=3m")
	eventually(t, settle, "the first image on every node", rolledOut(t, ns, "agent", nodes, "registry.example/agent:v1"))

	t.Log("pause mid-rollout")
	updateSet(t, ns, "agent", func(ds *everynodev1alpha1.DaemonSet) {
		ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	})
	setImage(t, ns, "agent", "registry.example/agent:v4", "image v4")
	eventually(t, settle, "the first new pod", func() (bool, string, error) {
		n := 0
		for _, p := range daemonPods(t, ns, "agent") {
			if p.Spec.Containers[0].Image == "registry.example/agent:v4" {
				n++
			}
		}
		return n >= 1, fmt.Sprintf("%d new pods", n), nil
	})
	mustPlugin(t, "rollout", "pause", "agent", "-n", ns)
	countNew := func() int {
		n := 0
		for _, p := range daemonPods(t, ns, "agent") {
			if p.Spec.Containers[0].Image == "registry.example/agent:v4" {
				n++
			}
		}
		return n
	}
	// A replacement already started may finish; after that nothing moves.
	time.Sleep(4 * time.Second)
	paused := countNew()
	if paused >= len(nodes) {
		t.Fatalf("the rollout finished (%d of %d new) before pause took effect; slow it down", paused, len(nodes))
	}
	never(t, 8*time.Second, "replacement while paused", func() (bool, string, error) {
		n := countNew()
		return n > paused, fmt.Sprintf("%d new pods, was %d", n, paused), nil
	})
	if out, err := kubectlEverynode(t, 20*time.Second, "rollout", "status", "agent", "-n", ns, "--timeout=5s"); err == nil {
		t.Fatalf("rollout status exited 0 on a paused rollout:\n%s", out)
	}

	mustPlugin(t, "rollout", "resume", "agent", "-n", ns)
	mustPlugin(t, "rollout", "status", "agent", "-n", ns, "--timeout=3m")
	eventually(t, settle, "v4 everywhere after resume", rolledOut(t, ns, "agent", nodes, "registry.example/agent:v4"))
}
