package extender

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

func TestPrioritize(t *testing.T) {
	agent := daemonSet("agent", false)
	noTarget := daemonPod(agent, "agent-x", "", "v1")
	delete(noTarget.Annotations, everynodev1alpha1.AnnotationTargetNode)
	tests := map[string]struct {
		pod   *corev1.Pod
		names []string
		want  extenderv1.HostPriorityList
	}{
		"daemon pod: target scores max, others zero": {
			pod:   daemonPod(agent, "agent-1", "n1", "v1"),
			names: []string{"n0", "n1", "n2"},
			want:  extenderv1.HostPriorityList{{Host: "n0"}, {Host: "n1", Score: extenderv1.MaxExtenderPriority}, {Host: "n2"}},
		},
		"daemon pod: target not a candidate": {
			pod:   daemonPod(agent, "agent-1", "n9", "v1"),
			names: []string{"n0"},
			want:  extenderv1.HostPriorityList{{Host: "n0"}},
		},
		"daemon pod: no target": {
			pod:   noTarget,
			names: []string{"n0"},
			want:  extenderv1.HostPriorityList{{Host: "n0"}},
		},
		"daemon pod: no candidates": {
			pod:   daemonPod(agent, "agent-1", "n1", "v1"),
			names: []string{},
			want:  extenderv1.HostPriorityList{},
		},
		"other pod: empty list": {
			pod:   plainPod(),
			names: []string{"n0", "n1"},
			want:  extenderv1.HostPriorityList{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := prioritize(tc.pod, tc.names)
			if got == nil {
				t.Fatal("prioritize returned nil, want a list")
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("prioritize = %+v, want %+v", got, tc.want)
			}
		})
	}
}
