package placement_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"everynode.io/everynode/placement"
)

func TestControllerRef(t *testing.T) {
	everynodeRef := metav1.OwnerReference{APIVersion: "everynode.io/v1alpha1", Kind: "DaemonSet", Name: "agent", UID: "u1", Controller: ptr.To(true)}
	tests := map[string]struct {
		refs []metav1.OwnerReference
		want string // name of the returned reference, "" for nil
	}{
		"no owner": {},
		"everynode controller": {
			refs: []metav1.OwnerReference{everynodeRef},
			want: "agent",
		},
		"everynode owner that is not the controller": {
			refs: []metav1.OwnerReference{{APIVersion: "everynode.io/v1alpha1", Kind: "DaemonSet", Name: "agent"}},
		},
		"apps/v1 DaemonSet controller": {
			refs: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "kube-proxy", Controller: ptr.To(true)}},
		},
		"other everynode kind": {
			refs: []metav1.OwnerReference{{APIVersion: "everynode.io/v1alpha1", Kind: "Other", Name: "x", Controller: ptr.To(true)}},
		},
		"controller after a plain owner": {
			refs: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "cm"}, everynodeRef},
			want: "agent",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", OwnerReferences: tc.refs}}
			got := placement.ControllerRef(pod)
			gotName := ""
			if got != nil {
				gotName = got.Name
			}
			if gotName != tc.want {
				t.Fatalf("ControllerRef() = %q, want %q", gotName, tc.want)
			}
		})
	}
}
