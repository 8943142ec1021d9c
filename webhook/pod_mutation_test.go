package webhook

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// pinned is the required node affinity every daemon pod must end up with.
func pinned(nodeName string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{nodeName}}},
	}}}
}

func tol(key string, effect corev1.TaintEffect) corev1.Toleration {
	return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
}

var defaultTolerations = []corev1.Toleration{
	tol(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute),
	tol(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute),
	tol(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule),
	tol(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule),
	tol(corev1.TaintNodePIDPressure, corev1.TaintEffectNoSchedule),
	tol(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule),
}

func TestMutatePod(t *testing.T) {
	preferred := []corev1.PreferredSchedulingTerm{{Weight: 10, Preference: corev1.NodeSelectorTerm{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}
	podAffinity := &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}}}
	controlPlane := []corev1.Toleration{
		{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node-role.kubernetes.io/master", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	armNode := node("node-1", map[string]string{"kubernetes.io/arch": "arm64", "pool": "big"})

	tests := map[string]struct {
		change        func(pod *corev1.Pod, ds *everynodev1alpha1.DaemonSet)
		node          *corev1.Node
		schedulerName string
		want          func(pod *corev1.Pod) // edits the expected pod from the input
		wantErr       string
	}{
		"no affinity, template tolerations": {
			want: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: pinned("node-1")}}
				p.Spec.Tolerations = append(append([]corev1.Toleration{}, controlPlane...), defaultTolerations...)
			},
		},
		"required terms replaced, preferred terms and pod anti-affinity kept": {
			change: func(p *corev1.Pod, _ *everynodev1alpha1.DaemonSet) {
				p.Spec.Affinity = &corev1.Affinity{
					NodeAffinity: &corev1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
							{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpExists}}},
							{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-2"}}}},
						}},
						PreferredDuringSchedulingIgnoredDuringExecution: preferred,
					},
					PodAntiAffinity: podAffinity,
				}
			},
			want: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{
					NodeAffinity:    &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: pinned("node-1"), PreferredDuringSchedulingIgnoredDuringExecution: preferred},
					PodAntiAffinity: podAffinity,
				}
				p.Spec.Tolerations = append(append([]corev1.Toleration{}, controlPlane...), defaultTolerations...)
			},
		},
		"no tolerations at all": {
			change: func(p *corev1.Pod, _ *everynodev1alpha1.DaemonSet) { p.Spec.Tolerations = nil },
			want: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: pinned("node-1")}}
				p.Spec.Tolerations = defaultTolerations
			},
		},
		"existing default toleration not duplicated, tolerationSeconds dropped": {
			change: func(p *corev1.Pod, _ *everynodev1alpha1.DaemonSet) {
				p.Spec.Tolerations = []corev1.Toleration{
					{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
					tol(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule),
					{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "logging", Effect: corev1.TaintEffectNoSchedule},
				}
			},
			want: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: pinned("node-1")}}
				p.Spec.Tolerations = []corev1.Toleration{
					defaultTolerations[0], defaultTolerations[2],
					{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "logging", Effect: corev1.TaintEffectNoSchedule},
					defaultTolerations[1], defaultTolerations[3], defaultTolerations[4], defaultTolerations[5],
				}
			},
		},
		"hostNetwork adds network-unavailable": {
			change: func(p *corev1.Pod, _ *everynodev1alpha1.DaemonSet) {
				p.Spec.HostNetwork, p.Spec.Tolerations = true, nil
			},
			want: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: pinned("node-1")}}
				p.Spec.Tolerations = append(append([]corev1.Toleration{}, defaultTolerations...), tol(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule))
			},
		},
		"scheduler name set for the default scheduler": {
			change:        func(p *corev1.Pod, _ *everynodev1alpha1.DaemonSet) { p.Spec.Tolerations = nil },
			schedulerName: "everynode-scheduler",
			want: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: pinned("node-1")}}
				p.Spec.Tolerations = defaultTolerations
				p.Spec.SchedulerName = "everynode-scheduler"
			},
		},
		"scheduler name of the template kept": {
			change: func(p *corev1.Pod, _ *everynodev1alpha1.DaemonSet) {
				p.Spec.Tolerations, p.Spec.SchedulerName = nil, "gpu-scheduler"
			},
			schedulerName: "everynode-scheduler",
			want: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: pinned("node-1")}}
				p.Spec.Tolerations = defaultTolerations
			},
		},
		"matching overrides apply in order, others do not": {
			change: func(p *corev1.Pod, ds *everynodev1alpha1.DaemonSet) {
				p.Spec.Tolerations = nil
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{
					override(`{"kubernetes.io/arch":"arm64"}`, `{"metadata":{"labels":{"arch":"arm"}},"spec":{"containers":[{"name":"fluentd-elasticsearch","image":"fluentd:arm64","resources":{"limits":{"memory":"1Gi"}}}]}}`),
					override(`{"kubernetes.io/arch":"amd64"}`, `{"spec":{"containers":[{"name":"fluentd-elasticsearch","image":"fluentd:amd64"}]}}`),
					override(`{"pool":"big"}`, `{"metadata":{"annotations":{"big":"yes"}},"spec":{"containers":[{"name":"fluentd-elasticsearch","resources":{"limits":{"memory":"2Gi"}}}]}}`),
				}
			},
			node: armNode,
			want: func(p *corev1.Pod) {
				p.Labels["arch"] = "arm"
				p.Annotations["big"] = "yes"
				p.Spec.Containers[0].Image = "fluentd:arm64"
				p.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("2Gi")
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: pinned("node-1")}}
				p.Spec.Tolerations = defaultTolerations
			},
		},
		"overrides cannot unpin, untolerate or unlabel": {
			change: func(p *corev1.Pod, ds *everynodev1alpha1.DaemonSet) {
				p.Spec.Tolerations = nil
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"pool":"big"}`,
					`{"metadata":{"labels":{"everynode.io/daemon-pod":null},"annotations":{"everynode.io/node-name":"node-9"}},"spec":{"tolerations":[],"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":["node-9"]}]}]}}}}}`)}
			},
			node: armNode,
			want: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: pinned("node-1")}}
				p.Spec.Tolerations = defaultTolerations
			},
		},
		"overrides need the node": {
			change: func(_ *corev1.Pod, ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"pool":"big"}`, `{"spec":{}}`)}
			},
			wantErr: `node "node-1" is needed to apply the set's nodeOverrides`,
		},
		"an override that does not apply is an error": {
			change: func(_ *corev1.Pod, ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"pool":"big"}`, `{"spec":{"containers":7}}`)}
			},
			node:    armNode,
			wantErr: "spec.nodeOverrides[0].patch",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ds := validSet(t)
			pod := daemonPod(t, ds, "node-1")
			if tc.change != nil {
				tc.change(pod, ds)
			}
			want := pod.DeepCopy()
			got := pod.DeepCopy()
			err := mutatePod(got, "node-1", ds, tc.node, tc.schedulerName)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.want(want)
			if !equality.Semantic.DeepEqual(want, got) {
				t.Fatalf("mutated pod (-want +got):\n%s", diff.Diff(want, got))
			}
			// The API server may reinvoke the webhook: same pod again.
			again := got.DeepCopy()
			if err := mutatePod(again, "node-1", ds, tc.node, tc.schedulerName); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got, again) {
				t.Errorf("not idempotent (-once +twice):\n%s", diff.Diff(got, again))
			}
			if n, ok := placement.TargetNode(got); !ok || n != "node-1" {
				t.Errorf("placement.TargetNode = %q, %v", n, ok)
			}
		})
	}
}

func TestPodTarget(t *testing.T) {
	tests := map[string]struct {
		annotation, nodeName string
		want                 string
		wantErr              bool
	}{
		"annotated":                 {annotation: "node-1", want: "node-1"},
		"no annotation":             {wantErr: true},
		"bound to the same node":    {annotation: "node-1", nodeName: "node-1", want: "node-1"},
		"bound to another node":     {annotation: "node-1", nodeName: "node-2", wantErr: true},
		"bound but never annotated": {nodeName: "node-2", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{NodeName: tc.nodeName}}
			if tc.annotation != "" {
				pod.Annotations = map[string]string{everynodev1alpha1.AnnotationTargetNode: tc.annotation}
			}
			got, err := podTarget(pod)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("podTarget = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// The contract that lets the chart skip /mutate/pod for the controller's
// own creates (AnnotationMadeWhole): the webhook adds nothing to a pod
// placement.NewPodFor made, with or without overrides, tolerations of the
// template's own, a scheduler name, a scheduler the template chose.
func TestMutatePodAddsNothingToTheControllersPod(t *testing.T) {
	big := node("node-1", map[string]string{"pool": "big"})
	tests := map[string]struct {
		change        func(ds *everynodev1alpha1.DaemonSet)
		schedulerName string
	}{
		"plain":          {},
		"scheduler name": {schedulerName: "everynode-scheduler"},
		"template's own scheduler": {
			change:        func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.SchedulerName = "mine" },
			schedulerName: "everynode-scheduler",
		},
		"override": {change: func(ds *everynodev1alpha1.DaemonSet) {
			ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"pool":"big"}`,
				`{"spec":{"containers":[{"name":"`+ds.Spec.Template.Spec.Containers[0].Name+`","image":"agent:big"}]}}`)}
		}},
		"host network, template tolerations": {change: func(ds *everynodev1alpha1.DaemonSet) {
			ds.Spec.Template.Spec.HostNetwork = true
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "x", Operator: corev1.TolerationOpExists}}
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ds := validSet(t)
			if tc.change != nil {
				tc.change(ds)
			}
			made, err := placement.NewPodFor(ds, big, big.Name, "h1", tc.schedulerName)
			if err != nil {
				t.Fatal(err)
			}
			if made.Annotations[everynodev1alpha1.AnnotationMadeWhole] != everynodev1alpha1.AnnotationMadeWholeValue {
				t.Fatalf("the controller's pod is not marked made whole: %v", made.Annotations)
			}
			mutated := made.DeepCopy()
			if err := mutatePod(mutated, big.Name, ds, big, tc.schedulerName); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(made, mutated) {
				t.Errorf("the webhook changes the controller's pod (-made +webhook):\n%s", diff.Diff(made, mutated))
			}
		})
	}
}
