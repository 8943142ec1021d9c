package placement

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

func inPlaceTemplate() *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}, Annotations: map[string]string{"note": "x"}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "setup", Image: "setup:1"}},
			Containers:     []corev1.Container{{Name: "app", Image: "app:1"}, {Name: "log", Image: "log:1"}},
		},
	}
}

func TestImagesOnlyChange(t *testing.T) {
	tests := map[string]struct {
		change func(*corev1.PodTemplateSpec)
		want   bool
	}{
		"nothing":             {change: func(*corev1.PodTemplateSpec) {}},
		"one container image": {change: func(p *corev1.PodTemplateSpec) { p.Spec.Containers[1].Image = "log:2" }, want: true},
		"every image": {change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Image, p.Spec.Containers[1].Image, p.Spec.InitContainers[0].Image = "a", "b", "c"
		}, want: true},
		"init container image": {change: func(p *corev1.PodTemplateSpec) { p.Spec.InitContainers[0].Image = "setup:2" }, want: true},
		"image and env": {change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Image = "app:2"
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A"}}
		}},
		"image and a label":       {change: func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].Image = "app:2"; p.Labels["tier"] = "x" }},
		"image and an annotation": {change: func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].Image = "app:2"; p.Annotations["note"] = "y" }},
		"image and resources": {change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Image = "app:2"
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}},
		"container renamed": {change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Image = "app:2"
			p.Spec.Containers[0].Name = "main"
		}},
		"container added": {change: func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "x", Image: "x"})
		}},
		"containers swapped":            {change: func(p *corev1.PodTemplateSpec) { c := p.Spec.Containers; c[0], c[1] = c[1], c[0] }},
		"restartedAt (rollout restart)": {change: func(p *corev1.PodTemplateSpec) { p.Annotations[everynodev1alpha1.AnnotationRestartedAt] = "now" }},
		"hostNetwork":                   {change: func(p *corev1.PodTemplateSpec) { p.Spec.HostNetwork = true }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			from, to := inPlaceTemplate(), inPlaceTemplate()
			tc.change(to)
			if got := ImagesOnlyChange(from, to); got != tc.want {
				t.Errorf("ImagesOnlyChange = %v, want %v", got, tc.want)
			}
			if !reflect.DeepEqual(from, inPlaceTemplate()) {
				t.Error("from was modified")
			}
		})
	}
}

func TestInPlaceUpdateRoundTrip(t *testing.T) {
	u := InPlaceUpdate{
		Revision: "5f7c9d", Time: time.Unix(1700000000, 0), Restarts: 3,
		Containers: []InPlaceContainer{
			{Name: "app", ImageID: "docker.io/library/app@sha256:abc", ContainerID: "containerd://123"},
			{Name: "log", ImageID: "", ContainerID: ""},
		},
	}
	got, ok := ParseInPlaceUpdate(u.String())
	if !ok || !reflect.DeepEqual(got, u) {
		t.Errorf("round trip of %q: %+v, %v", u.String(), got, ok)
	}
	for _, bad := range []string{"", "v1", "v2 h 1 0", "v1 h x 0", "v1 h 1 0 app", "v1 h 1 0 =a,b", "v1 h 1 0 app=a"} {
		if _, ok := ParseInPlaceUpdate(bad); ok {
			t.Errorf("ParseInPlaceUpdate(%q) accepted", bad)
		}
	}
}

// runningPod is a pod whose containers run the images of its spec, ready.
func runningPod(images ...string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Labels: map[string]string{"controller-revision-hash": "old"}}}
	for i, img := range images {
		name := []string{"app", "log"}[i]
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: name, Image: img})
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: name, Image: img, ImageID: "id-" + img, ContainerID: "c-" + img, Ready: true, Started: ptr.To(true), RestartCount: 1,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Unix(100, 0))}},
		})
	}
	return pod
}

func TestInPlacePatchAndDone(t *testing.T) {
	pod := runningPod("app:1", "log:1")
	target := runningPod("app:1", "log:2")
	raw, changes, ok := InPlacePatch(pod, target, "new", time.Unix(200, 0))
	if !ok {
		t.Fatal("no patch")
	}
	if changes != "log: log:1 -> log:2" {
		t.Errorf("changes %q", changes)
	}
	var p struct {
		Metadata struct {
			UID         string            `json:"uid"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			Containers []map[string]string `json:"containers"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	if p.Metadata.UID != "u1" || p.Metadata.Labels["controller-revision-hash"] != "new" ||
		!reflect.DeepEqual(p.Spec.Containers, []map[string]string{{"name": "log", "image": "log:2"}}) {
		t.Errorf("patch %s", raw)
	}
	u, ok := ParseInPlaceUpdate(p.Metadata.Annotations[everynodev1alpha1.AnnotationInPlaceUpdate])
	want := InPlaceUpdate{Revision: "new", Time: time.Unix(200, 0), Restarts: 3, Containers: []InPlaceContainer{{Name: "log", ImageID: "id-log:1", ContainerID: "c-log:1"}}}
	if !ok || !reflect.DeepEqual(u, want) {
		t.Errorf("recorded %+v, want %+v", u, want)
	}

	// The kubelet's steps, as the pod's status shows them.
	pod.Spec.Containers[1].Image = "log:2"
	if done, _ := InPlaceDone(pod, &u); done {
		t.Error("done before the kubelet restarted anything")
	}
	st := &pod.Status.ContainerStatuses[1]
	st.Image, st.ImageID, st.ContainerID, st.Ready, st.Started = "log:2", "", "", false, ptr.To(false)
	if done, _ := InPlaceDone(pod, &u); done {
		t.Error("done while the new container is created")
	}
	st.ImageID, st.ContainerID, st.Started = "id-log:2", "c-log:2", ptr.To(true)
	if done, _ := InPlaceDone(pod, &u); done {
		t.Error("done before the new container is ready")
	}
	st.Ready, st.State.Running.StartedAt = true, metav1.NewTime(time.Unix(250, 0))
	if done, at := InPlaceDone(pod, &u); !done || !at.Equal(time.Unix(250, 0)) {
		t.Errorf("done = %v at %v, want true at 250", done, at)
	}
	// Same digest under a new tag: another container, naming the spec's image.
	st.ImageID = "id-log:1"
	if done, _ := InPlaceDone(pod, &u); !done {
		t.Error("a new container of the same digest is not done")
	}
	st.ContainerID = "c-log:1"
	if done, _ := InPlaceDone(pod, &u); done {
		t.Error("the old container counts as done")
	}

	// Nothing to patch, or containers that do not pair up: recreate.
	if _, _, ok := InPlacePatch(pod, runningPod("app:1", "log:2"), "new", time.Unix(200, 0)); ok {
		t.Error("a patch with no image change")
	}
	if _, _, ok := InPlacePatch(pod, runningPod("app:2"), "new", time.Unix(200, 0)); ok {
		t.Error("a patch across different containers")
	}
}

func TestInPlacePatchInitContainers(t *testing.T) {
	pod := runningPod("app:1")
	always := corev1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "setup:1"}, {Name: "proxy", Image: "proxy:1", RestartPolicy: &always}}
	target := pod.DeepCopy()
	target.Spec.InitContainers[0].Image, target.Spec.InitContainers[1].Image = "setup:2", "proxy:2"
	raw, _, ok := InPlacePatch(pod, target, "new", time.Unix(1, 0))
	if !ok {
		t.Fatal("no patch")
	}
	var p struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			InitContainers []map[string]string `json:"initContainers"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.InitContainers) != 2 {
		t.Errorf("init container images patched: %v", p.Spec.InitContainers)
	}
	u, _ := ParseInPlaceUpdate(p.Metadata.Annotations[everynodev1alpha1.AnnotationInPlaceUpdate])
	// Only the sidecar restarts: a finished init container runs again only
	// with a new sandbox.
	if len(u.Containers) != 1 || u.Containers[0].Name != "proxy" {
		t.Errorf("waits for %+v, want the sidecar alone", u.Containers)
	}
}
