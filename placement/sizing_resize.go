package placement

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
)

// Resizing a running pod to its node's size (spec.nodeSizing; the rule
// (ResizeSupported), the patch, and where the kubelet stands with it.

// Need is what it takes to move a pod to its node's size.
type Need int

const (
	// NeedNothing: the pod has the size.
	NeedNothing Need = iota
	// NeedResize: only cpu or memory differ; pods/resize can do it.
	NeedResize
	// NeedRecreate: an extended resource differs, which no resize may
	// change.
	NeedRecreate
)

// ResizeNeed compares the sized resources of pod's spec with size. A
// sized container the pod does not have is not judged: the pod is of
// another template, which the rollout replaces.
func ResizeNeed(pod *corev1.Pod, size NodeSize) Need {
	need := NeedNothing
	for _, cs := range size.Containers {
		c := podContainer(&pod.Spec, cs.Name)
		if c == nil {
			continue
		}
		for _, pair := range [2]struct{ want, have corev1.ResourceList }{{cs.Requests, c.Resources.Requests}, {cs.Limits, c.Resources.Limits}} {
			for name, want := range pair.want {
				if have, ok := pair.have[name]; ok && have.Cmp(want) == 0 {
					continue
				}
				if !IsResizable(name) {
					return NeedRecreate
				}
				need = NeedResize
			}
		}
	}
	return need
}

// ResizeSupported mirrors kube-apiserver's check before it takes a
// resize (isPodResizeRequestSupported): a pod whose running containers'
// statuses report no resources runs under a kubelet that cannot resize,
// and the API refuses the resize ("Pod running on node without support
// for resize"). Every kubelet that resizes reports them from its first
// status on. A pod with no running container may be resized.
func ResizeSupported(pod *corev1.Pod) bool {
	for i := range pod.Status.ContainerStatuses {
		if st := &pod.Status.ContainerStatuses[i]; st.State.Running != nil {
			return st.Resources != nil
		}
	}
	return true
}

// ResizePatch is the strategic merge patch for the pods/resize
// subresource that gives pod's containers their sizes: only the cpu and
// memory the rule sizes, containers (and sidecars, in initContainers)
// merged by name.
func ResizePatch(pod *corev1.Pod, size NodeSize) []byte {
	type resources struct {
		Requests corev1.ResourceList `json:"requests,omitempty"`
		Limits   corev1.ResourceList `json:"limits,omitempty"`
	}
	type container struct {
		Name      string    `json:"name"`
		Resources resources `json:"resources"`
	}
	resizable := func(in corev1.ResourceList) corev1.ResourceList {
		var out corev1.ResourceList
		for name, q := range in {
			if IsResizable(name) {
				if out == nil {
					out = corev1.ResourceList{}
				}
				out[name] = q
			}
		}
		return out
	}
	var containers, sidecars []container
	for _, cs := range size.Containers {
		r := resources{Requests: resizable(cs.Requests), Limits: resizable(cs.Limits)}
		if r.Requests == nil && r.Limits == nil {
			continue
		}
		if isContainer(&pod.Spec, cs.Name) {
			containers = append(containers, container{Name: cs.Name, Resources: r})
		} else if podContainer(&pod.Spec, cs.Name) != nil {
			sidecars = append(sidecars, container{Name: cs.Name, Resources: r})
		}
	}
	spec := map[string]any{}
	if len(containers) > 0 {
		spec["containers"] = containers
	}
	if len(sidecars) > 0 {
		spec["initContainers"] = sidecars
	}
	b, _ := json.Marshal(map[string]any{"spec": spec})
	return b
}

func isContainer(spec *corev1.PodSpec, name string) bool {
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return true
		}
	}
	return false
}

// ResizeState is where a pod's last resize stands, from its status as its
// kubelet reports it.
type ResizeState int

const (
	// ResizeDone: every container runs the resources its spec asks (or
	// the kubelet does not report them, as before resize existed).
	ResizeDone ResizeState = iota
	// ResizeInFlight: asked and not yet actuated, or in progress.
	ResizeInFlight
	// ResizeInfeasible: the kubelet will never do it (PodResizePending,
	// reason Infeasible): only a new pod can have that size.
	ResizeInfeasible
)

// ResizeStateOf reads pod's resize conditions and, for the containers
// size sizes, whether their status resources match their spec.
func ResizeStateOf(pod *corev1.Pod, size NodeSize) (ResizeState, string) {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case corev1.PodResizePending:
			if c.Reason == corev1.PodReasonInfeasible {
				return ResizeInfeasible, c.Message
			}
			return ResizeInFlight, c.Message
		case corev1.PodResizeInProgress:
			return ResizeInFlight, c.Message
		}
	}
	for _, cs := range size.Containers {
		c := podContainer(&pod.Spec, cs.Name)
		if c == nil {
			continue
		}
		st, _ := containerStatus(pod, cs.Name)
		if st == nil || st.Resources == nil {
			continue
		}
		for _, pair := range [2]struct{ spec, status corev1.ResourceList }{{c.Resources.Requests, st.Resources.Requests}, {c.Resources.Limits, st.Resources.Limits}} {
			for name, want := range pair.spec {
				if !IsResizable(name) {
					continue
				}
				if have, ok := pair.status[name]; !ok || have.Cmp(want) != 0 {
					return ResizeInFlight, ""
				}
			}
		}
	}
	return ResizeDone, ""
}
