package webhook

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

func TestRoutes(t *testing.T) {
	nodes, sets := listers(t)
	tests := map[string]struct {
		cfg     Config
		wantErr bool
	}{
		"complete":                 {cfg: Config{ControllerUsername: testController, Nodes: nodes, Sets: sets}},
		"no controller user":       {cfg: Config{Nodes: nodes, Sets: sets}, wantErr: true},
		"no node lister":           {cfg: Config{ControllerUsername: testController, Sets: sets}, wantErr: true},
		"no set lister":            {cfg: Config{ControllerUsername: testController, Nodes: nodes}, wantErr: true},
		"negative dry-run timeout": {cfg: Config{ControllerUsername: testController, Nodes: nodes, Sets: sets, DryRunTimeout: -1}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			hs, err := Routes(tc.cfg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err == nil && len(hs) != 4 {
				t.Errorf("got %d handlers", len(hs))
			}
		})
	}
}

func TestMutateDaemonSetRoute(t *testing.T) {
	h, err := NewDaemonSetDefaulter()
	if err != nil {
		t.Fatal(err)
	}
	raw := loadSet(t, "fluentd-elasticsearch.yaml")
	tests := map[string]struct {
		object    []byte
		wantPatch bool
		check     func(t *testing.T, patched []byte)
	}{
		"fluentd example gets the apps/v1 defaults": {
			object: mustJSON(t, raw), wantPatch: true,
			check: func(t *testing.T, patched []byte) {
				got := &everynodev1alpha1.DaemonSet{}
				if err := json.Unmarshal(patched, got); err != nil {
					t.Fatal(err)
				}
				want := raw.DeepCopy()
				defaultDaemonSet(want)
				if !equality.Semantic.DeepEqual(want, got) {
					t.Errorf("patched set (-want +got):\n%s", diff.Diff(want, got))
				}
			},
		},
		"already defaulted: no patch": {object: mustJSON(t, validSet(t))},
		"unknown fields and spellings of a newer server are kept": {
			object: []byte(`{"apiVersion":"everynode.io/v1alpha1","kind":"DaemonSet","metadata":{"name":"a","namespace":"logging"},
				"spec":{"futureField":{"x":1},"selector":{"matchLabels":{"app":"a"}},"template":{"metadata":{"labels":{"app":"a"}},
				"spec":{"containers":[{"name":"a","image":"a:1","futureContainerField":true,"resources":{"requests":{"cpu":"0.5"}}}]}}}}`),
			wantPatch: true,
			check: func(t *testing.T, patched []byte) {
				for _, s := range []string{`"futureField":{"x":1}`, `"futureContainerField":true`, `"cpu":"0.5"`, `"revisionHistoryLimit":10`, `"restartPolicy":"Always"`} {
					if !strings.Contains(string(patched), s) {
						t.Errorf("patched object lacks %s:\n%s", s, patched)
					}
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req := setRequest(t, admissionv1.Create, raw, nil)
			req.Object = runtime.RawExtension{Raw: tc.object}
			code, review := serve(t, h, reviewBody(t, req))
			if code != http.StatusOK || !review.Response.Allowed {
				t.Fatalf("HTTP %d, review %+v", code, review)
			}
			if review.Response.UID != req.UID {
				t.Errorf("uid = %q, want %q", review.Response.UID, req.UID)
			}
			if (len(review.Response.Patch) > 0) != tc.wantPatch {
				t.Fatalf("patch = %s, want patch %v", review.Response.Patch, tc.wantPatch)
			}
			if tc.check != nil {
				tc.check(t, applyPatch(t, tc.object, review.Response))
			}
		})
	}
}

func TestValidateDaemonSetRoute(t *testing.T) {
	_, sets := listers(t)
	h, err := NewDaemonSetValidator(sets, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		req         func(t *testing.T) *admissionv1.AdmissionRequest
		wantAllowed bool
		wantMessage string
	}{
		"valid create": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return setRequest(t, admissionv1.Create, validSet(t), nil)
			},
			wantAllowed: true,
		},
		"invalid create names its fields": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				ds := validSet(t)
				ds.Spec.Selector = nil
				ds.Spec.Template.Spec.Containers[0].Image = ""
				return setRequest(t, admissionv1.Create, ds, nil)
			},
			wantMessage: `DaemonSet.everynode.io "fluentd-elasticsearch" is invalid: [spec.selector: Required value, spec.template.spec.containers[0].image: Required value]`,
		},
		"selector change refused": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				old := validSet(t)
				ds := old.DeepCopy()
				ds.Spec.Selector.MatchLabels["x"] = "y"
				ds.Spec.Template.Labels["x"] = "y"
				return setRequest(t, admissionv1.Update, ds, old)
			},
			wantMessage: "spec.selector: Invalid value",
		},
		"status: collisionCount decremented": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				old := validSet(t)
				old.Status.CollisionCount = ptr.To[int32](3)
				ds := old.DeepCopy()
				ds.Status.CollisionCount = ptr.To[int32](2)
				req := setRequest(t, admissionv1.Update, ds, old)
				req.SubResource = "status"
				return req
			},
			wantMessage: "status.collisionCount: Invalid value: 2: cannot be decremented",
		},
		"status: spec rules are not applied": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				old := validSet(t)
				old.Spec.Selector = nil // stored before this webhook existed
				ds := old.DeepCopy()
				ds.Status.NumberReady = 3
				req := setRequest(t, admissionv1.Update, ds, old)
				req.SubResource = "status"
				return req
			},
			wantAllowed: true,
		},
		"delete is not ours to judge": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				req := setRequest(t, admissionv1.Delete, validSet(t), nil)
				req.Object = runtime.RawExtension{}
				return req
			},
			wantAllowed: true,
		},
		"object that does not decode": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				req := setRequest(t, admissionv1.Create, validSet(t), nil)
				req.Object = runtime.RawExtension{Raw: []byte(`{"spec":{"minReadySeconds":"soon"}}`)}
				return req
			},
			wantMessage: "decode object",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req := tc.req(t)
			code, review := serve(t, h, reviewBody(t, req))
			if code != http.StatusOK {
				t.Fatalf("HTTP %d", code)
			}
			resp := review.Response
			if resp.UID != req.UID || resp.Allowed != tc.wantAllowed {
				t.Fatalf("response uid %q allowed %v, want %q %v; result %+v", resp.UID, resp.Allowed, req.UID, tc.wantAllowed, resp.Result)
			}
			if tc.wantMessage != "" && !strings.Contains(resp.Result.Message, tc.wantMessage) {
				t.Errorf("message = %q, want it to contain %q", resp.Result.Message, tc.wantMessage)
			}
		})
	}
}

func TestMutatePodRoute(t *testing.T) {
	ds := validSet(t)
	withOverride := validSet(t)
	withOverride.Name = "with-override"
	withOverride.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"pool":"big"}`, `{"spec":{"containers":[{"name":"fluentd-elasticsearch","image":"fluentd:big"}]}}`)}
	nodes, sets := listers(t, ds, withOverride, node("node-1", map[string]string{"pool": "big"}))
	h, err := NewPodMutator(nodes, sets, WithSchedulerName("everynode-scheduler"))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		pod         func(t *testing.T) *corev1.Pod
		wantAllowed bool
		wantPatch   bool
		wantImage   string
		wantMessage string
		// wantCode is the result code of a refusal: 403 unless set.
		wantCode int
		// namespace is the request's, when not the pod's.
		namespace string
	}{
		"daemon pod pinned and tolerated": {
			pod:         func(t *testing.T) *corev1.Pod { return daemonPod(t, ds, "node-1") },
			wantAllowed: true, wantPatch: true, wantImage: ds.Spec.Template.Spec.Containers[0].Image,
		},
		"override applied for a matching node": {
			pod:         func(t *testing.T) *corev1.Pod { return daemonPod(t, withOverride, "node-1") },
			wantAllowed: true, wantPatch: true, wantImage: "fluentd:big",
		},
		"reinvocation changes nothing": {
			pod: func(t *testing.T) *corev1.Pod {
				pod := daemonPod(t, withOverride, "node-1")
				if err := mutatePod(pod, "node-1", withOverride, node("node-1", map[string]string{"pool": "big"}), "everynode-scheduler"); err != nil {
					t.Fatal(err)
				}
				return pod
			},
			wantAllowed: true, wantImage: "fluentd:big",
		},
		"other pods untouched": {
			pod: func(t *testing.T) *corev1.Pod {
				pod := daemonPod(t, ds, "node-1")
				delete(pod.Labels, everynodev1alpha1.LabelDaemonPod)
				return pod
			},
			wantAllowed: true, wantImage: ds.Spec.Template.Spec.Containers[0].Image,
		},
		"no target annotation": {
			pod: func(t *testing.T) *corev1.Pod {
				pod := daemonPod(t, ds, "node-1")
				pod.Annotations = nil
				return pod
			},
			wantMessage: "but no everynode.io/node-name annotation naming its node",
		},
		"owner unknown": {
			pod: func(t *testing.T) *corev1.Pod {
				pod := daemonPod(t, ds, "node-1")
				pod.OwnerReferences[0].Name = "gone"
				return pod
			},
			wantMessage: "everynode DaemonSet logging/gone, is not known",
		},
		"owner deleted and created again": {
			pod: func(t *testing.T) *corev1.Pod {
				pod := daemonPod(t, ds, "node-1")
				pod.OwnerReferences[0].UID = "uid-of-an-earlier-set"
				return pod
			},
			wantMessage: "with uid uid-of-an-earlier-set, but that set now has uid",
		},
		"owner reference without a uid": {
			pod: func(t *testing.T) *corev1.Pod {
				pod := daemonPod(t, withOverride, "node-1")
				pod.OwnerReferences[0].UID = ""
				return pod
			},
			wantMessage: "has no uid; the API server refuses such a reference",
		},
		"a pod of another namespace than the request's": {
			pod:         func(t *testing.T) *corev1.Pod { return daemonPod(t, withOverride, "node-1") },
			namespace:   "attacker",
			wantCode:    http.StatusBadRequest,
			wantMessage: `the pod's namespace "logging" is not the request's "attacker"`,
		},
		"node unknown while overrides need it": {
			pod:         func(t *testing.T) *corev1.Pod { return daemonPod(t, withOverride, "node-7") },
			wantMessage: `target node "node-7" is not known`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := tc.pod(t)
			req := podRequest(t, admissionv1.Create, testController, pod, nil)
			if tc.namespace != "" {
				req.Namespace = tc.namespace
			}
			code, review := serve(t, h, reviewBody(t, req))
			if code != http.StatusOK {
				t.Fatalf("HTTP %d", code)
			}
			resp := review.Response
			if resp.Allowed != tc.wantAllowed {
				t.Fatalf("allowed = %v, want %v; result %+v", resp.Allowed, tc.wantAllowed, resp.Result)
			}
			if !resp.Allowed {
				wantCode := cmp.Or(tc.wantCode, http.StatusForbidden)
				if resp.Result.Code != int32(wantCode) || !strings.Contains(resp.Result.Message, tc.wantMessage) {
					t.Errorf("result = %d %q, want %d containing %q", resp.Result.Code, resp.Result.Message, wantCode, tc.wantMessage)
				}
				if strings.Contains(string(resp.Patch), "fluentd:big") {
					t.Errorf("a refusal carries the set's override in its patch: %s", resp.Patch)
				}
				return
			}
			if (len(resp.Patch) > 0) != tc.wantPatch {
				t.Fatalf("patch = %s, want patch %v", resp.Patch, tc.wantPatch)
			}
			got := &corev1.Pod{}
			if err := json.Unmarshal(applyPatch(t, req.Object.Raw, resp), got); err != nil {
				t.Fatal(err)
			}
			if got.Spec.Containers[0].Image != tc.wantImage {
				t.Errorf("image = %q, want %q", got.Spec.Containers[0].Image, tc.wantImage)
			}
			if tc.wantPatch {
				na := got.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
				if !equality.Semantic.DeepEqual(na, pinned("node-1")) {
					t.Errorf("required node affinity = %+v", na)
				}
				if got.Spec.SchedulerName != "everynode-scheduler" || len(got.Spec.Tolerations) != 8 {
					t.Errorf("schedulerName %q, %d tolerations", got.Spec.SchedulerName, len(got.Spec.Tolerations))
				}
			}
		})
	}
}

func TestValidatePodRoute(t *testing.T) {
	ds := validSet(t)
	_, sets := listers(t, ds)
	h, err := NewPodValidator(testController, sets)
	if err != nil {
		t.Fatal(err)
	}
	plain := func(t *testing.T) *corev1.Pod {
		p := daemonPod(t, ds, "node-1")
		delete(p.Labels, everynodev1alpha1.LabelDaemonPod)
		return p
	}
	tests := map[string]struct {
		req         func(t *testing.T) *admissionv1.AdmissionRequest
		wantMessage string // empty: allowed
	}{
		"controller creates": {req: func(t *testing.T) *admissionv1.AdmissionRequest {
			return podRequest(t, admissionv1.Create, testController, daemonPod(t, ds, "node-1"), nil)
		}},
		"user creates": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Create, "alice", daemonPod(t, ds, "node-1"), nil)
			},
			wantMessage: `not "alice"`,
		},
		"controller creates for a missing set": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				p := daemonPod(t, ds, "node-1")
				p.OwnerReferences[0].Name = "gone"
				return podRequest(t, admissionv1.Create, testController, p, nil)
			},
			wantMessage: "does not exist",
		},
		"user labels an existing pod": {
			req: func(t *testing.T) *admissionv1.AdmissionRequest {
				return podRequest(t, admissionv1.Update, "alice", daemonPod(t, ds, "node-1"), plain(t))
			},
			wantMessage: "cannot be added to an existing pod",
		},
		"user edits a daemon pod": {req: func(t *testing.T) *admissionv1.AdmissionRequest {
			p := daemonPod(t, ds, "node-1")
			old := p.DeepCopy()
			p.Annotations["note"] = "x"
			return podRequest(t, admissionv1.Update, "alice", p, old)
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req := tc.req(t)
			code, review := serve(t, h, reviewBody(t, req))
			if code != http.StatusOK {
				t.Fatalf("HTTP %d", code)
			}
			resp := review.Response
			if resp.UID != req.UID {
				t.Errorf("uid = %q", resp.UID)
			}
			if tc.wantMessage == "" {
				if !resp.Allowed {
					t.Errorf("denied: %+v", resp.Result)
				}
				return
			}
			if resp.Allowed || resp.Result.Code != http.StatusForbidden || !strings.Contains(resp.Result.Message, tc.wantMessage) {
				t.Errorf("response allowed %v result %+v, want 403 containing %q", resp.Allowed, resp.Result, tc.wantMessage)
			}
		})
	}
}

// TestRoutesRefuseOtherKinds: a configuration rule that sends the wrong
// kind gets a clear 400 in the review, not a misdecoded object.
func TestRoutesRefuseOtherKinds(t *testing.T) {
	ds := validSet(t)
	nodes, sets := listers(t, ds)
	hs, err := Routes(Config{ControllerUsername: testController, Nodes: nodes, Sets: sets})
	if err != nil {
		t.Fatal(err)
	}
	for path, h := range hs {
		t.Run(path, func(t *testing.T) {
			req := setRequest(t, admissionv1.Create, ds, nil)
			req.Kind.Group, req.Kind.Version = "apps", "v1"
			_, review := serve(t, h, reviewBody(t, req))
			if review == nil || review.Response.Allowed || review.Response.Result.Code != http.StatusBadRequest ||
				!strings.Contains(review.Response.Result.Message, "not apps/v1 DaemonSet") {
				t.Errorf("response = %+v", review)
			}
		})
	}
}
