package webhook

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/client/clientset/versioned"
	everynodelisters "everynode.io/everynode/client/listers/everynode/v1alpha1"
)

// TestTemplateDryRunAgainstAPIServer validates templates through a real
// kube-apiserver, to pin down what unit tests can only assume: the shape
// of its Invalid causes and warnings for a pod. It runs only when
// EVERYNODE_TEST_KUBECONFIG names a cluster whose "logging" namespace has a
// "default" service account and no everynode installed: `make e2e` runs it
// so (e2e/cmd/cluster/e2e.go), on its control plane before everynode is installed;
// go test stays hermetic otherwise.
func TestTemplateDryRunAgainstAPIServer(t *testing.T) {
	path := os.Getenv("EVERYNODE_TEST_KUBECONFIG")
	if path == "" {
		t.Skip("EVERYNODE_TEST_KUBECONFIG not set")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := NewPodDryRunnerForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewDaemonSetValidator(nil, runner, 0)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		change       func(ds *everynodev1alpha1.DaemonSet)
		wantCauses   []string // "field: message" substrings; none: allowed
		wantWarnings []string // substrings
	}{
		"fluentd example": {change: func(*everynodev1alpha1.DaemonSet) {}},
		"invalid only as a pod": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Template.Spec.Containers[0].Image = " fluentd"
				ds.Spec.Template.Spec.Containers[0].Name = "Fluentd"
			},
			wantCauses: []string{
				`spec.template.spec.containers[0].image: Invalid value: " fluentd": must not have leading or trailing whitespace`,
				`spec.template.spec.containers[0].name: Invalid value: "Fluentd"`,
			},
		},
		"upstream pod warnings come back on the set's paths": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				c := &ds.Spec.Template.Spec.Containers[0]
				c.Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}, {ContainerPort: 80, Protocol: corev1.ProtocolTCP}}
			},
			wantWarnings: []string{"spec.template.spec.containers[0].ports[1]: duplicate port definition"},
		},
		"missing service account is a warning, not a refusal": {
			change:       func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.ServiceAccountName = "fluentd" },
			wantWarnings: []string{`spec.template: the API server would currently refuse a pod made from this template`, `serviceaccount "fluentd" not found`},
		},
		"override invalid as a pod": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.NodeOverrides = []everynodev1alpha1.NodeOverride{override(`{"pool":"small"}`,
					`{"spec":{"containers":[{"name":"fluentd-elasticsearch","resources":{"limits":{"memory":"100Mi"}}}]}}`)}
			},
			wantCauses: []string{`spec.nodeOverrides[0].patch.spec.containers[0].resources.requests: Invalid value: "200Mi": must be less than or equal to memory limit of 100Mi`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ds := validSet(t)
			tc.change(ds)
			code, review := serve(t, h, reviewBody(t, setRequest(t, admissionv1.Create, ds, nil)))
			if code != http.StatusOK {
				t.Fatalf("HTTP %d", code)
			}
			resp := review.Response
			t.Logf("allowed %v, result %+v, warnings %q", resp.Allowed, resp.Result, resp.Warnings)
			if resp.Allowed != (len(tc.wantCauses) == 0) {
				t.Fatalf("allowed = %v", resp.Allowed)
			}
			for _, c := range tc.wantCauses {
				if !strings.Contains(resp.Result.Message, c) {
					t.Errorf("message %q lacks %q", resp.Result.Message, c)
				}
			}
			all := strings.Join(resp.Warnings, "\n")
			for _, w := range tc.wantWarnings {
				if !strings.Contains(all, w) {
					t.Errorf("warnings %q lack %q", resp.Warnings, w)
				}
			}
			if strings.Contains(all, "could not validate") {
				t.Errorf("fell back to static checks: %q", resp.Warnings)
			}
		})
	}
}

// TestWebhooksAgainstAPIServer serves the four routes over TLS, registers
// them with a real kube-apiserver (EVERYNODE_TEST_KUBECONFIG, the CRD is
// installed from the chart) and checks what a user sees: a valid set is
// stored with its defaults, an invalid one refused with its field paths, a
// daemon pod pinned when the controller makes it and refused when anyone
// else does. It cleans up what it created.
func TestWebhooksAgainstAPIServer(t *testing.T) {
	path := os.Getenv("EVERYNODE_TEST_KUBECONFIG")
	if path == "" {
		t.Skip("EVERYNODE_TEST_KUBECONFIG not set")
	}
	ctx := t.Context()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	sets := versioned.NewForConfigOrDie(cfg).EverynodeV1alpha1().DaemonSets(testNamespace)
	installCRD(t, cfg)

	// The webhooks, on a TLS server the API server trusts through caBundle.
	setIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	nodeIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	runner, err := NewPodDryRunnerForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	handlers, err := Routes(Config{ControllerUsername: testController, Nodes: corev1listers.NewNodeLister(nodeIndexer),
		Sets: everynodelisters.NewDaemonSetLister(setIndexer), DryRunner: runner})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for p, h := range handlers {
		mux.Handle(p, h)
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	registerWebhooks(t, kube, srv.URL, certPEM)

	// Wait until the API server calls us: a set only the webhook can find
	// invalid (the CRD's own rules would refuse a negative minReadySeconds
	// without us) is refused.
	bad := validSet(t)
	bad.Name, bad.UID, bad.Spec.Template.Spec.Containers[0].Image = "probe", "", "fluentd "
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := sets.Create(ctx, bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsInvalid(err), nil
	}); err != nil {
		t.Fatalf("webhooks never took effect: %v", err)
	}

	t.Cleanup(func() { _ = sets.Delete(context.Background(), "fluentd-elasticsearch", metav1.DeleteOptions{}) })
	t.Run("the fluentd example is stored with the apps/v1 defaults", func(t *testing.T) {
		ds := loadSet(t, "fluentd-elasticsearch.yaml")
		created, err := sets.Create(ctx, ds, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := ds.DeepCopy()
		defaultDaemonSet(want)
		if !equality.Semantic.DeepEqual(want.Spec, created.Spec) {
			t.Errorf("stored spec (-want +got):\n%s", diff.Diff(want.Spec, created.Spec))
		}
		if err := setIndexer.Add(created); err != nil {
			t.Fatal(err)
		}
	})

	tests := map[string]struct {
		change func(ds *everynodev1alpha1.DaemonSet)
		want   []string
	}{
		"upstream rules": {
			change: func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Template.Labels = map[string]string{"name": "other"}
				ds.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](5)
				ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge = intOrStr("1")
			},
			// The CRD's CEL rules refuse these before the webhook runs, with
			// no value after "Invalid value" (see TestCRDRulesMatchTheWebhook).
			want: []string{"spec.template.metadata.labels: Invalid value", "spec.template.spec.activeDeadlineSeconds: Forbidden",
				"spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: may not be set when maxUnavailable is non-zero"},
		},
		"a template that is invalid only as a pod": {
			change: func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = "fluentd " },
			want:   []string{`spec.template.spec.containers[0].image: Invalid value: "fluentd "`},
		},
	}
	for name, tc := range tests {
		t.Run("refused: "+name, func(t *testing.T) {
			ds := loadSet(t, "fluentd-elasticsearch.yaml")
			ds.Name = "refused"
			defaultDaemonSet(ds)
			tc.change(ds)
			_, err := sets.Create(ctx, ds, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("err = %v, want Invalid", err)
			}
			t.Log(err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q", w)
				}
			}
		})
	}

	t.Run("refused: selector change", func(t *testing.T) {
		ds, err := sets.Get(ctx, "fluentd-elasticsearch", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ds.Spec.Selector.MatchLabels["tier"] = "x"
		ds.Spec.Template.Labels["tier"] = "x"
		if _, err := sets.Update(ctx, ds, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.selector: Invalid value") || !strings.Contains(err.Error(), "field is immutable") {
			t.Errorf("err = %v", err)
		}
	})

	t.Run("refused: collisionCount decremented through the status subresource", func(t *testing.T) {
		ds, err := sets.Get(ctx, "fluentd-elasticsearch", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ds.Status.CollisionCount = ptr.To[int32](2)
		if ds, err = sets.UpdateStatus(ctx, ds, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		ds.Status.CollisionCount = ptr.To[int32](1)
		if _, err := sets.UpdateStatus(ctx, ds, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "status.collisionCount: Invalid value: 1: cannot be decremented") {
			t.Errorf("err = %v", err)
		}
	})

	t.Run("daemon pods", func(t *testing.T) {
		ds, err := sets.Get(ctx, "fluentd-elasticsearch", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod := daemonPod(t, ds, "node-1")
		pod.TypeMeta = metav1.TypeMeta{}

		if _, err := kube.CoreV1().Pods(testNamespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil ||
			!strings.Contains(err.Error(), `only "system:serviceaccount:everynode-system:everynode" may create such pods, not "`) {
			t.Errorf("pod by admin: err = %v", err)
		}

		asController := rest.CopyConfig(cfg)
		// system:masters stands in for the RBAC the chart grants the controller.
		asController.Impersonate = rest.ImpersonationConfig{UserName: testController, Groups: []string{"system:masters", "system:authenticated"}}
		created, err := kubernetes.NewForConfigOrDie(asController).CoreV1().Pods(testNamespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatalf("pod by the controller: %v", err)
		}
		if na := created.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; !equality.Semantic.DeepEqual(na, pinned("node-1")) {
			t.Errorf("stored pod's required node affinity = %+v", na)
		}
		for _, want := range defaultTolerations {
			found := false
			for _, got := range created.Spec.Tolerations {
				found = found || equality.Semantic.DeepEqual(want, got)
			}
			if !found {
				t.Errorf("stored pod lacks toleration %+v: %+v", want, created.Spec.Tolerations)
			}
		}
	})
}

func installCRD(t *testing.T, cfg *rest.Config) {
	t.Helper()
	data, err := os.ReadFile("../charts/everynode/crds/everynode.io_daemonsets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		t.Fatal(err)
	}
	crds := dynamic.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Create(t.Context(), obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crds.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}) })
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("CRD not established: %v", err)
	}
}

// registerWebhooks creates the configurations README.md describes.
func registerWebhooks(t *testing.T, kube kubernetes.Interface, base string, caBundle []byte) {
	t.Helper()
	url := func(p string) admissionregv1.WebhookClientConfig {
		u := base + p
		return admissionregv1.WebhookClientConfig{URL: &u, CABundle: caBundle}
	}
	none := admissionregv1.SideEffectClassNone
	fail, ignore := admissionregv1.Fail, admissionregv1.Ignore
	ifNeeded := admissionregv1.IfNeededReinvocationPolicy
	nsSelector := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "kube-node-lease", "everynode-system"}}}}
	daemonPods := &metav1.LabelSelector{MatchLabels: map[string]string{everynodev1alpha1.LabelDaemonPod: everynodev1alpha1.LabelDaemonPodValue}}
	rule := func(group, version, resource string, ops ...admissionregv1.OperationType) []admissionregv1.RuleWithOperations {
		return []admissionregv1.RuleWithOperations{{Operations: ops, Rule: admissionregv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}}}}
	}
	name := "everynode-webhook-test"
	mutating := &admissionregv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregv1.MutatingWebhook{
			{Name: "mdaemonset.everynode.io", ClientConfig: url(PathMutateDaemonSet), Rules: rule("everynode.io", "v1alpha1", "daemonsets", admissionregv1.Create, admissionregv1.Update),
				FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](5), ReinvocationPolicy: &ifNeeded, NamespaceSelector: nsSelector},
			{Name: "mpod.everynode.io", ClientConfig: url(PathMutatePod), Rules: rule("", "v1", "pods", admissionregv1.Create),
				FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](5), ReinvocationPolicy: &ifNeeded,
				NamespaceSelector: nsSelector, ObjectSelector: daemonPods},
		},
	}
	validating := &admissionregv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregv1.ValidatingWebhook{
			{Name: "vdaemonset.everynode.io", ClientConfig: url(PathValidateDaemonSet), Rules: rule("everynode.io", "v1alpha1", "daemonsets", admissionregv1.Create, admissionregv1.Update),
				FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](15), NamespaceSelector: nsSelector},
			{Name: "vdaemonset-status.everynode.io", ClientConfig: url(PathValidateDaemonSet), Rules: rule("everynode.io", "v1alpha1", "daemonsets/status", admissionregv1.Update),
				FailurePolicy: &ignore, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](5), NamespaceSelector: nsSelector},
			{Name: "vpod.everynode.io", ClientConfig: url(PathValidatePod), Rules: rule("", "v1", "pods", admissionregv1.Create, admissionregv1.Update),
				FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](5),
				NamespaceSelector: nsSelector, ObjectSelector: daemonPods},
		},
	}
	ctx := t.Context()
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mutating, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, validating, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}
