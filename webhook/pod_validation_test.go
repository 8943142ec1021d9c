package webhook

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

func TestValidatePodCreate(t *testing.T) {
	lookupErr := errors.New("cache exploded")
	tests := map[string]struct {
		change    func(pod *corev1.Pod)
		user      string
		lookupErr error
		noSet     bool
		want      string // substring of the denial; empty: admitted
		wantErr   bool
	}{
		"controller's pod":         {user: testController},
		"not a daemon pod":         {user: "alice", change: func(p *corev1.Pod) { delete(p.Labels, everynodev1alpha1.LabelDaemonPod) }},
		"label with another value": {user: "alice", change: func(p *corev1.Pod) { p.Labels[everynodev1alpha1.LabelDaemonPod] = "false" }},
		"someone else": {
			user: "alice",
			want: `only "system:serviceaccount:everynode-system:everynode" may create such pods, not "alice"`,
		},
		"the built-in DaemonSet controller": {
			user: "system:serviceaccount:kube-system:daemon-set-controller",
			want: "not \"system:serviceaccount:kube-system:daemon-set-controller\"",
		},
		"no owner": {
			user: testController, change: func(p *corev1.Pod) { p.OwnerReferences = nil },
			want: "has no controller owner reference to an everynode.io/v1alpha1 DaemonSet",
		},
		"owner is not the controller": {
			user: testController, change: func(p *corev1.Pod) { p.OwnerReferences[0].Controller = nil },
			want: "has no controller owner reference",
		},
		"owner is an apps/v1 DaemonSet": {
			user: testController, change: func(p *corev1.Pod) { p.OwnerReferences[0].APIVersion = "apps/v1" },
			want: "has no controller owner reference",
		},
		"owner is another kind": {
			user: testController, change: func(p *corev1.Pod) { p.OwnerReferences[0].Kind = "ReplicaSet" },
			want: "has no controller owner reference",
		},
		"set does not exist": {
			user: testController, noSet: true,
			want: "pod's owner, everynode DaemonSet logging/fluentd-elasticsearch, does not exist",
		},
		"set was recreated": {
			user: testController, change: func(p *corev1.Pod) { p.OwnerReferences[0].UID = types.UID("old-uid") },
			want: "it was deleted and created again",
		},
		"owner reference without a uid": {
			user: testController, change: func(p *corev1.Pod) { p.OwnerReferences[0].UID = "" },
			want: "has no uid; the API server refuses such a reference",
		},
		"lookup fails": {user: testController, lookupErr: lookupErr, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ds := validSet(t)
			pod := daemonPod(t, ds, "node-1")
			if tc.change != nil {
				tc.change(pod)
			}
			lookup := func(namespace, name string) (*everynodev1alpha1.DaemonSet, error) {
				switch {
				case tc.lookupErr != nil:
					return nil, tc.lookupErr
				case tc.noSet || namespace != ds.Namespace || name != ds.Name:
					return nil, apierrors.NewNotFound(everynodev1alpha1.Resource("daemonsets"), name)
				}
				return ds, nil
			}
			denial, err := validatePodCreate(pod, tc.user, testController, lookup)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.want == "" && denial != "" {
				t.Errorf("denied: %s", denial)
			}
			if tc.want != "" && !strings.Contains(denial, tc.want) {
				t.Errorf("denial = %q, want it to contain %q", denial, tc.want)
			}
		})
	}
}

func TestValidatePodUpdate(t *testing.T) {
	labelled := func(v string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "x"}}}
		if v != "" {
			p.Labels[everynodev1alpha1.LabelDaemonPod] = v
		}
		return p
	}
	tests := map[string]struct {
		old, new *corev1.Pod
		denied   bool
	}{
		"unrelated pod":              {old: labelled(""), new: labelled("")},
		"daemon pod stays one":       {old: labelled("true"), new: labelled("true")},
		"label removed (orphaning)":  {old: labelled("true"), new: labelled("")},
		"label added":                {old: labelled(""), new: labelled("true"), denied: true},
		"label value turned to true": {old: labelled("false"), new: labelled("true"), denied: true},
		"daemon pod status change": {old: labelled("true"), new: func() *corev1.Pod {
			p := labelled("true")
			p.Status.Phase = corev1.PodRunning
			p.OwnerReferences = []metav1.OwnerReference{{Name: "x", Controller: ptr.To(true)}}
			return p
		}()},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			denial := validatePodUpdate(tc.new, tc.old)
			if (denial != "") != tc.denied {
				t.Errorf("denial = %q, want denied %v", denial, tc.denied)
			}
		})
	}
}
