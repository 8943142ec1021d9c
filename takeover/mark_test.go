package takeover

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

func ownedPod(name, apiVersion, kind string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: "ns", Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "owner", UID: "u", Controller: ptr.To(true)}},
	}}
}

// The pods kube-controller-manager made for apps/v1 DaemonSets get the
// daemon-pod label, once; StatefulSet pods (which also carry the hash
// label) and pods already marked are left alone.
func TestMarkPods(t *testing.T) {
	hash := map[string]string{appsv1.DefaultDaemonSetUniqueLabelKey: "abc"}
	marked := map[string]string{appsv1.DefaultDaemonSetUniqueLabelKey: "abc", everynodev1alpha1.LabelDaemonPod: "true"}
	kube := kubefake.NewClientset(
		ownedPod("kcm-made", "apps/v1", "DaemonSet", hash),
		ownedPod("statefulset", "apps/v1", "StatefulSet", hash),
		ownedPod("everynode-made", "apps/v1", "DaemonSet", marked),
	)
	// The fake API server ignores label selectors, so this also holds
	// MarkPods to its own checks of the owner and the label.
	n, err := MarkPods(context.Background(), kube)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("marked %d pods, want 1", n)
	}
	for name, want := range map[string]bool{"kcm-made": true, "statefulset": false, "everynode-made": true} {
		pod, err := kube.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := placement.IsDaemonPod(pod); got != want {
			t.Errorf("%s: daemon-pod label %v, want %v", name, got, want)
		}
	}
	var patches int
	for _, a := range kube.Actions() {
		if _, ok := a.(clienttesting.PatchAction); ok {
			patches++
		}
	}
	if patches != 1 {
		t.Errorf("%d patches, want 1 (one per unmarked pod of a DaemonSet)", patches)
	}
	// Again: nothing left to mark.
	if n, err := MarkPods(context.Background(), kube); err != nil || n != 0 {
		t.Errorf("second MarkPods = %d, %v; want 0, nil", n, err)
	}
}
