package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// The scenarios here check the harness, not everynode: kwok plays the
// kubelet through the Stages in e2e/kwok (see its README.md), and these are
// ordinary pods, bound straight to a kwok node, checked for the container
// statuses a kubelet would write. The images follow the convention of
// e2e/kwok/README.md: a tag that starts with non-existent never pulls, one
// that starts with crash-loop crash-loops, any other image runs.
const (
	neverPullsImage = "registry.example/app:non-existent"
	crashLoopImage  = "registry.example/app:crash-loop"
)

// kubeletNode makes a kwok node for one scenario.
func kubeletNode(t *testing.T) string {
	t.Helper()
	return createNodes(t, "kubelet", 1, map[string]string{scenarioLabel: "kubelet-" + randSuffix()})[0]
}

// createPlainPod binds a pod with one container per image (named app,
// then sidecar-1, ...) to node, bypassing the scheduler.
func createPlainPod(t *testing.T, ns, node, name string, images ...string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{NodeName: node},
	}
	for i, img := range images {
		c := "app"
		if i > 0 {
			c = fmt.Sprintf("sidecar-%d", i)
		}
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c, Image: img})
	}
	out, err := kube.CoreV1().Pods(ns).Create(ctx(t), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	return out
}

func getPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := kube.CoreV1().Pods(ns).Get(ctx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s: %v", name, err)
	}
	return p
}

func podCondition(p *corev1.Pod, typ corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

func containerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// describePod is a pod's status in one line, for progress and failures:
// phase, Ready, and per container its image, state and restartCount.
func describePod(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s Ready=%s", p.Status.Phase, podCondition(p, corev1.PodReady))
	for _, cs := range p.Status.ContainerStatuses {
		state := "no state"
		switch {
		case cs.State.Running != nil:
			state = "running"
		case cs.State.Waiting != nil:
			state = "waiting " + cs.State.Waiting.Reason
		case cs.State.Terminated != nil:
			state = fmt.Sprintf("terminated %d", cs.State.Terminated.ExitCode)
		}
		fmt.Fprintf(&b, "; %s %s %s ready=%t restarts=%d", cs.Name, cs.Image, state, cs.Ready, cs.RestartCount)
		if t := cs.LastTerminationState.Terminated; t != nil {
			fmt.Fprintf(&b, " last exit %d", t.ExitCode)
		}
	}
	return b.String()
}

// watchPod shows see every version of one pod from resourceVersion rv on
// (every status write, in order, which polling could miss) until see says
// done or fails, or timeout passes.
func watchPod(t *testing.T, ns, name, rv string, timeout time.Duration, what string, see func(*corev1.Pod) (done bool, err error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := "no update yet"
	for time.Now().Before(deadline) {
		w, err := kube.CoreV1().Pods(ns).Watch(ctx(t), metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
			ResourceVersion: rv,
		})
		if err != nil {
			t.Fatalf("watch pod %s: %v", name, err)
		}
		timer := time.NewTimer(time.Until(deadline))
	events:
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					break events // the watch ended: watch again from rv
				}
				if ev.Type == watch.Error {
					w.Stop()
					t.Fatalf("watch pod %s: %v", name, ev.Object)
				}
				p, ok := ev.Object.(*corev1.Pod)
				if !ok || ev.Type == watch.Deleted {
					continue
				}
				rv = p.ResourceVersion
				last = describePod(p)
				done, err := see(p)
				if err != nil {
					w.Stop()
					t.Fatalf("while waiting for %s: %v (pod: %s)", what, err, last)
				}
				if done {
					w.Stop()
					timer.Stop()
					return
				}
			case <-timer.C:
				break events
			}
		}
		w.Stop()
		timer.Stop()
	}
	t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, last)
}

// An image that cannot be pulled keeps its pod Pending and not Ready: the
// container waits in ErrImagePull, then ImagePullBackOff, and stays there.
// An ordinary pod beside it runs as kwok always ran it.
func TestKubeletImageNeverPulls(t *testing.T) {
	ns := newNamespace(t)
	node := kubeletNode(t)
	createPlainPod(t, ns, node, "never-pulls", neverPullsImage)
	createPlainPod(t, ns, node, "ordinary", "registry.example/app:v1")

	eventually(t, time.Minute, "the container in ImagePullBackOff", func() (bool, string, error) {
		p := getPod(t, ns, "never-pulls")
		cs := containerStatus(p, "app")
		return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "ImagePullBackOff", describePod(p), nil
	})
	p := getPod(t, ns, "never-pulls")
	cs := containerStatus(p, "app")
	if p.Status.Phase != corev1.PodPending || podCondition(p, corev1.PodReady) != corev1.ConditionFalse ||
		cs.Ready || (cs.Started != nil && *cs.Started) || cs.RestartCount != 0 || cs.ImageID != "" || cs.Image != neverPullsImage {
		t.Fatalf("want Pending, Ready False, the container not ready, not started, no restarts, no imageID; got %s (started %v, imageID %q)",
			describePod(p), cs.Started, cs.ImageID)
	}
	never(t, 6*time.Second, "the never-pulls pod leaving Pending, turning Ready or its container leaving the pull back-off", func() (bool, string, error) {
		p := getPod(t, ns, "never-pulls")
		cs := containerStatus(p, "app")
		stuck := p.Status.Phase == corev1.PodPending && podCondition(p, corev1.PodReady) == corev1.ConditionFalse &&
			cs != nil && cs.State.Waiting != nil && (cs.State.Waiting.Reason == "ImagePullBackOff" || cs.State.Waiting.Reason == "ErrImagePull")
		return !stuck, describePod(p), nil
	})

	eventually(t, time.Minute, "the ordinary pod Running and Ready", func() (bool, string, error) {
		p := getPod(t, ns, "ordinary")
		cs := containerStatus(p, "app")
		return isRunningReady(p) && cs != nil && cs.Ready && cs.State.Running != nil && cs.RestartCount == 0, describePod(p), nil
	})
}

// A crash-looping image starts, exits with code 1, waits in
// CrashLoopBackOff and starts again, restartCount climbing; the pod stays
// Running and is never Ready. Watched, so every status write is seen.
func TestKubeletCrashLoop(t *testing.T) {
	ns := newNamespace(t)
	node := kubeletNode(t)
	pod := createPlainPod(t, ns, node, "crash-loop", crashLoopImage)

	var restarts int32
	backOffs := 0
	watchPod(t, ns, pod.Name, pod.ResourceVersion, 2*time.Minute, "restartCount past 2", func(p *corev1.Pod) (bool, error) {
		if podCondition(p, corev1.PodReady) == corev1.ConditionTrue {
			return false, fmt.Errorf("the pod is Ready")
		}
		cs := containerStatus(p, "app")
		if cs == nil {
			return false, nil
		}
		if p.Status.Phase != corev1.PodRunning {
			return false, fmt.Errorf("phase %s, want Running", p.Status.Phase)
		}
		if cs.Ready {
			return false, fmt.Errorf("the container is ready")
		}
		if cs.RestartCount < restarts {
			return false, fmt.Errorf("restartCount went down from %d", restarts)
		}
		restarts = cs.RestartCount
		if w := cs.State.Waiting; w != nil {
			if w.Reason != "CrashLoopBackOff" {
				return false, fmt.Errorf("waiting %s, want CrashLoopBackOff", w.Reason)
			}
			backOffs++
		}
		if cs.RestartCount > 0 || cs.State.Waiting != nil {
			if last := cs.LastTerminationState.Terminated; last == nil || last.ExitCode != 1 {
				return false, fmt.Errorf("lastState.terminated %+v, want exit code 1", last)
			}
		}
		return restarts > 2 && backOffs > 0, nil
	})
	t.Logf("restartCount %d after %d back-offs", restarts, backOffs)
}

// Patching the image of one container of a running pod restarts that
// container with the new image (a kubelet stops it, the pod is not Ready
// for a moment, then it runs the new image): new image and imageID,
// restartCount 1, ready and started again. The other container is left
// alone.
func TestKubeletImageChangeRestartsContainer(t *testing.T) {
	ns := newNamespace(t)
	node := kubeletNode(t)
	const v1, v2 = "registry.example/app:v1", "registry.example/app:v2"
	createPlainPod(t, ns, node, "in-place", v1, "registry.example/sidecar:v1")
	eventually(t, time.Minute, "the pod Running and Ready", func() (bool, string, error) {
		p := getPod(t, ns, "in-place")
		return isRunningReady(p) && len(p.Status.ContainerStatuses) == 2, describePod(p), nil
	})
	before := getPod(t, ns, "in-place")
	oldApp, oldSidecar := *containerStatus(before, "app"), *containerStatus(before, "sidecar-1")

	patch := fmt.Sprintf(`{"spec":{"containers":[{"name":"app","image":%q}]}}`, v2)
	patched, err := kube.CoreV1().Pods(ns).Patch(ctx(t), "in-place", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch the image: %v", err)
	}

	sawStopped := false
	watchPod(t, ns, "in-place", patched.ResourceVersion, 2*time.Minute, "the container restarted with "+v2, func(p *corev1.Pod) (bool, error) {
		cs := containerStatus(p, "app")
		if cs == nil {
			return false, fmt.Errorf("no status for container app")
		}
		if side := containerStatus(p, "sidecar-1"); side == nil || side.RestartCount != 0 || side.State.Running == nil ||
			!side.State.Running.StartedAt.Equal(&oldSidecar.State.Running.StartedAt) {
			return false, fmt.Errorf("the sidecar changed: %+v", side)
		}
		if cs.State.Waiting != nil && cs.State.Waiting.Reason == "ContainerCreating" && !cs.Ready &&
			podCondition(p, corev1.PodReady) == corev1.ConditionFalse {
			sawStopped = true
		}
		return cs.Image == v2 && cs.State.Running != nil && cs.Ready && podCondition(p, corev1.PodReady) == corev1.ConditionTrue, nil
	})

	p := getPod(t, ns, "in-place")
	cs := containerStatus(p, "app")
	sum := sha256.Sum256([]byte(v2))
	wantID := "sha256:" + hex.EncodeToString(sum[:])
	switch {
	case !sawStopped:
		t.Errorf("never saw the container stopped (waiting ContainerCreating) and the pod not Ready in between")
	case cs.ImageID == oldApp.ImageID || cs.ImageID != wantID:
		t.Errorf("imageID %q (was %q), want %q", cs.ImageID, oldApp.ImageID, wantID)
	case cs.RestartCount != 1:
		t.Errorf("restartCount %d, want 1", cs.RestartCount)
	case cs.Started == nil || !*cs.Started:
		t.Errorf("the container is not started")
	case cs.LastTerminationState.Terminated == nil:
		t.Errorf("no lastState.terminated for the old container")
	case p.Status.Phase != corev1.PodRunning:
		t.Errorf("phase %s, want Running", p.Status.Phase)
	}
	t.Logf("after the patch: %s", describePod(p))
}

// A pod's readiness gates hold its Ready condition, as a kubelet holds it:
// a new pod with a gate whose condition nobody wrote is Running with its
// containers ready and the pod not Ready; writing the gate's condition True
// makes the pod Ready, and False takes Ready away again.
func TestKubeletReadinessGate(t *testing.T) {
	ns := newNamespace(t)
	node := kubeletNode(t)
	const gate = "example.com/gate"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gated", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:       node,
			Containers:     []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: gate}},
		},
	}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx(t), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the pod Running, its containers ready, not Ready", func() (bool, string, error) {
		p := getPod(t, ns, "gated")
		return p.Status.Phase == corev1.PodRunning && podCondition(p, corev1.ContainersReady) == corev1.ConditionTrue &&
			podCondition(p, corev1.PodReady) == corev1.ConditionFalse, describePod(p), nil
	})
	// Nothing else happens on its own.
	time.Sleep(2 * time.Second)
	if p := getPod(t, ns, "gated"); podCondition(p, corev1.PodReady) != corev1.ConditionFalse || podCondition(p, gate) != "" {
		t.Fatalf("the gate opened by itself: %s, gate %q", describePod(p), podCondition(p, gate))
	}
	for _, status := range []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionTrue} {
		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":%q}]}}`, gate, status)
		if _, err := kube.CoreV1().Pods(ns).Patch(ctx(t), "gated", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatalf("write the gate's condition: %v", err)
		}
		eventually(t, time.Minute, "Ready "+string(status), func() (bool, string, error) {
			p := getPod(t, ns, "gated")
			return podCondition(p, corev1.PodReady) == status && podCondition(p, corev1.ContainersReady) == corev1.ConditionTrue, describePod(p), nil
		})
	}
}

// A resize (pods/resize) of a running container is actuated as a kubelet
// does it: the container keeps running (same container ID, no restart),
// and its status reports the new cpu and memory; a container whose image
// tag starts with resize-infeasible refuses it (PodResizePending
// Infeasible). A new pod's status reports its resources, as a kubelet's
// does: kube-apiserver refuses to resize a pod without them.
func TestKubeletResize(t *testing.T) {
	ns := newNamespace(t)
	node := kubeletNode(t)
	for _, tc := range []struct {
		name, image string
		refuse      bool
	}{
		{"resized", "registry.example/app:v1", false},
		{"refused", "registry.example/app:resize-infeasible", true},
	} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: ns},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: tc.image, Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
			}}}},
		}
		if _, err := kube.CoreV1().Pods(ns).Create(ctx(t), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The kubelet reports a running container's resources (without
		// them kube-apiserver refuses a resize).
		eventually(t, 30*time.Second, tc.name+" Running and Ready, its resources reported", func() (bool, string, error) {
			p := getPod(t, ns, tc.name)
			st := containerStatus(p, "app")
			if !isRunningReady(p) || st == nil || st.Resources == nil {
				return false, describePod(p), nil
			}
			cpu, mem := st.Resources.Requests[corev1.ResourceCPU], st.Resources.Limits[corev1.ResourceMemory]
			return cpu.String() == "100m" && mem.String() == "128Mi", fmt.Sprintf("status cpu %s, memory limit %s", cpu.String(), mem.String()), nil
		})
		before := getPod(t, ns, tc.name)
		patch := []byte(`{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"250m"},"limits":{"memory":"256Mi"}}}]}}`)
		if _, err := kube.CoreV1().Pods(ns).Patch(ctx(t), tc.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize"); err != nil {
			t.Fatalf("%s: resize: %v", tc.name, err)
		}
		eventually(t, 30*time.Second, tc.name+" resize answered", func() (bool, string, error) {
			p := getPod(t, ns, tc.name)
			if tc.refuse {
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodResizePending && c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonInfeasible {
						return true, "", nil
					}
				}
				return false, describePod(p), nil
			}
			st := containerStatus(p, "app")
			if st == nil || st.Resources == nil {
				return false, "no resources in the status yet", nil
			}
			cpu, mem := st.Resources.Requests[corev1.ResourceCPU], st.Resources.Limits[corev1.ResourceMemory]
			return cpu.String() == "250m" && mem.String() == "256Mi", fmt.Sprintf("status cpu %s, memory limit %s", cpu.String(), mem.String()), nil
		})
		after := getPod(t, ns, tc.name)
		b, a := containerStatus(before, "app"), containerStatus(after, "app")
		if a.ContainerID != b.ContainerID || a.RestartCount != b.RestartCount || !isRunningReady(after) {
			t.Errorf("%s: container %s (restarts %d) became %s (restarts %d), ready %v: a resize restarts nothing", tc.name, b.ContainerID, b.RestartCount, a.ContainerID, a.RestartCount, isRunningReady(after))
		}
		if cpu := a.Resources.Requests[corev1.ResourceCPU]; tc.refuse && cpu.String() != "100m" {
			t.Errorf("%s: a refused resize reports cpu %s, want the old 100m", tc.name, cpu.String())
		}
	}
}
