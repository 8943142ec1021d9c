package index

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

func pod(labels, annotations map[string]string, nodeName string, owner *metav1.OwnerReference) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: labels, Annotations: annotations},
		Spec:       corev1.PodSpec{NodeName: nodeName},
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return p
}

func TestPodIndexes(t *testing.T) {
	daemon := map[string]string{everynodev1alpha1.LabelDaemonPod: everynodev1alpha1.LabelDaemonPodValue}
	target := map[string]string{everynodev1alpha1.AnnotationTargetNode: "n1"}
	set := &metav1.OwnerReference{APIVersion: "everynode.io/v1alpha1", Kind: "DaemonSet", Name: "agent", UID: "u1", Controller: new(true)}
	appsSet := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", Controller: new(true)}
	tests := map[string]struct {
		pod               *corev1.Pod
		wantNode, wantSet []string
	}{
		"daemon pod by annotation":      {pod(daemon, target, "", set), []string{"n1"}, []string{"u1"}},
		"bound daemon pod":              {pod(daemon, nil, "n2", set), []string{"n2"}, []string{"u1"}},
		"not a daemon pod":              {pod(nil, target, "n1", set), nil, nil},
		"apps/v1 owner is not a set":    {pod(daemon, target, "", appsSet), []string{"n1"}, nil},
		"daemon pod without an owner":   {pod(daemon, target, "", nil), []string{"n1"}, nil},
		"daemon pod that names no node": {pod(daemon, nil, "", set), nil, []string{"u1"}},
		"owner without a UID":           {pod(daemon, nil, "n2", &metav1.OwnerReference{APIVersion: "everynode.io/v1alpha1", Kind: "DaemonSet", Name: "agent", Controller: new(true)}), []string{"n2"}, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			gotNode, _ := podsByNode(tc.pod)
			gotSet, _ := podsBySetUID(tc.pod)
			if !slices.Equal(gotNode, tc.wantNode) || !slices.Equal(gotSet, tc.wantSet) {
				t.Fatalf("byNode %v bySet %v, want %v %v", gotNode, gotSet, tc.wantNode, tc.wantSet)
			}
		})
	}
}

func TestAddPodIndexersIsIdempotent(t *testing.T) {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Pod{}, 0, cache.Indexers{})
	for range 2 {
		if err := AddPodIndexers(inf); err != nil {
			t.Fatalf("AddPodIndexers: %v", err)
		}
	}
	if n := len(inf.GetIndexer().GetIndexers()); n != 2 {
		t.Fatalf("%d indexers, want 2", n)
	}
}
