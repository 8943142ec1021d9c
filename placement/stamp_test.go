package placement_test

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

func stampSet(name string) *everynodev1alpha1.DaemonSet {
	labels := map[string]string{"app": name}
	return &everynodev1alpha1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-set-" + name)},
		Spec: everynodev1alpha1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}},
			},
		},
	}
}

// TestNewPod checks the pod contract with the webhook (shared/DESIGN.md).
func TestNewPod(t *testing.T) {
	ds := stampSet("agent")
	ds.Spec.Template.Annotations = map[string]string{"a": "b"}
	ds.Spec.Template.Spec.SchedulerName = "custom"
	ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
	orig := ds.DeepCopy()
	pod := placement.NewPod(ds, "node-7", "abc")

	if pod.GenerateName != "agent-" || pod.Name != "" || pod.Namespace != "ns" {
		t.Errorf("name %q generateName %q namespace %q", pod.Name, pod.GenerateName, pod.Namespace)
	}
	wantLabels := map[string]string{"app": "agent", "controller-revision-hash": "abc", "everynode.io/daemon-pod": "true"}
	if !reflect.DeepEqual(pod.Labels, wantLabels) {
		t.Errorf("labels = %v, want %v", pod.Labels, wantLabels)
	}
	if want := map[string]string{"a": "b", "everynode.io/node-name": "node-7"}; !reflect.DeepEqual(pod.Annotations, want) {
		t.Errorf("annotations = %v, want %v", pod.Annotations, want)
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.APIVersion != "everynode.io/v1alpha1" || ref.Kind != "DaemonSet" || ref.Name != "agent" ||
		ref.UID != ds.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("controller ref = %+v", ref)
	}
	// Pinned by affinity, never by nodeName: the scheduler must still see it.
	if pod.Spec.NodeName != "" {
		t.Errorf("nodeName %q: the scheduler binds daemon pods", pod.Spec.NodeName)
	}
	if want := placement.PinToNode(nil, "node-7"); !reflect.DeepEqual(pod.Spec.Affinity, want) {
		t.Errorf("affinity %v, want %v", pod.Spec.Affinity, want)
	}
	wantTolerations := append([]corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}, placement.DaemonTolerations(false)...)
	if pod.Spec.SchedulerName != "custom" || !reflect.DeepEqual(pod.Spec.Tolerations, wantTolerations) {
		t.Errorf("schedulerName %q tolerations %v, want the template's plus the daemon defaults", pod.Spec.SchedulerName, pod.Spec.Tolerations)
	}
	if !reflect.DeepEqual(ds, orig) {
		t.Error("NewPod changed the set")
	}
}

// Stamp is what the pod webhook applies after a set's node overrides: it
// must restore whatever an override took away and change nothing the
// second time.
func TestStampRestoresAndIsIdempotent(t *testing.T) {
	pod := placement.NewPod(stampSet("agent"), "node-1", "abc")
	want := pod.DeepCopy()

	// What a careless override could do.
	delete(pod.Labels, everynodev1alpha1.LabelDaemonPod)
	delete(pod.Annotations, everynodev1alpha1.AnnotationTargetNode)
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpExists}}}},
	}}}
	pod.Spec.Tolerations = nil

	placement.Stamp(pod, "node-1")
	if !reflect.DeepEqual(pod, want) {
		t.Fatalf("Stamp did not restore the stamp:\ngot  %+v\nwant %+v", pod, want)
	}
	placement.Stamp(pod, "node-1")
	if !reflect.DeepEqual(pod, want) {
		t.Fatalf("a second Stamp changed the pod:\ngot  %+v\nwant %+v", pod, want)
	}
}

func TestNewPodFor(t *testing.T) {
	big := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"pool": "big"}}}
	small := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}
	withOverride := func(patch string) *everynodev1alpha1.DaemonSet {
		ds := stampSet("agent")
		ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "big"}},
			Patch:        runtime.RawExtension{Raw: []byte(patch)},
		}}
		return ds
	}
	image := `{"spec":{"containers":[{"name":"agent","image":"agent:big"}]}}`
	cases := map[string]struct {
		ds        *everynodev1alpha1.DaemonSet
		node      *corev1.Node
		wantImage string
		wantErr   string
	}{
		"no overrides, no node needed":     {ds: stampSet("agent"), wantImage: stampSet("agent").Spec.Template.Spec.Containers[0].Image},
		"a matching node gets it":          {ds: withOverride(image), node: big, wantImage: "agent:big"},
		"another node does not":            {ds: withOverride(image), node: small, wantImage: stampSet("agent").Spec.Template.Spec.Containers[0].Image},
		"the node is needed":               {ds: withOverride(image), wantErr: "is needed to apply"},
		"a toleration added is refused":    {ds: withOverride(`{"spec":{"tolerations":[{"key":"x","operator":"Exists"}]}}`), node: big, wantErr: "change tolerations"},
		"a node selector added is refused": {ds: withOverride(`{"spec":{"nodeSelector":{"x":"y"}}}`), node: big, wantErr: "change nodeSelector"},
		"an override that drops the pin":   {ds: withOverride(`{"spec":{"affinity":null,"containers":[{"name":"agent","image":"agent:big"}]}}`), node: big, wantImage: "agent:big"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			nodeName := "n1"
			if tc.node != nil {
				nodeName = tc.node.Name
			}
			pod, err := placement.NewPodFor(tc.ds, tc.node, nodeName, "h1", "")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := pod.Spec.Containers[0].Image; got != tc.wantImage {
				t.Errorf("image %s, want %s", got, tc.wantImage)
			}
			// Whatever the override, the pod is its node's.
			stamped := pod.DeepCopy()
			placement.Stamp(stamped, nodeName)
			if !reflect.DeepEqual(stamped, pod) {
				t.Errorf("the pod is not stamped for %s: %+v", nodeName, pod.Spec.Affinity)
			}
		})
	}
}
