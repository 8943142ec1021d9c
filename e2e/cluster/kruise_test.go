package cluster

import (
	"slices"
	"strings"
	"testing"
)

// A manifest shaped as Kruise v1.8.2's config/webhook/manifests.yaml: a
// pod entry, Kruise's own kinds, and an entry on apps/v1 workloads.
const kruiseManifest = `---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1, v1beta1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-pod}
  failurePolicy: Fail
  name: mpod.kb.io
  rules:
  - apiGroups: [""]
    apiVersions: [v1]
    operations: [CREATE]
    resources: [pods]
  sideEffects: None
- admissionReviewVersions: [v1, v1beta1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-apps-kruise-io-v1alpha1-daemonset}
  failurePolicy: Fail
  name: mdaemonset.kb.io
  rules:
  - apiGroups: [apps.kruise.io]
    apiVersions: [v1alpha1]
    operations: [CREATE, UPDATE]
    resources: [daemonsets]
  sideEffects: None
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1, v1beta1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-apps-deployment}
  failurePolicy: Fail
  name: vbuiltindeployment.kb.io
  rules:
  - apiGroups: [apps]
    apiVersions: [v1]
    operations: [DELETE]
    resources: [deployments]
  sideEffects: None
- admissionReviewVersions: [v1, v1beta1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-policy-kruise-io-podunavailablebudget}
  failurePolicy: Fail
  name: vpodunavailablebudget.kb.io
  rules:
  - apiGroups: [policy.kruise.io]
    apiVersions: [v1alpha1]
    operations: [CREATE, UPDATE]
    resources: [podunavailablebudgets]
  sideEffects: None
`

func TestKruiseWebhookEntries(t *testing.T) {
	mws, vws, err := kruiseWebhookEntries([]byte(kruiseManifest), 9876, []byte("CA"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range mws {
		got = append(got, w.Name+" "+*w.ClientConfig.URL+" "+string(w.ClientConfig.CABundle))
		if w.ClientConfig.Service != nil {
			t.Errorf("%s: still a service reference", w.Name)
		}
	}
	for _, w := range vws {
		got = append(got, w.Name+" "+*w.ClientConfig.URL+" "+string(w.ClientConfig.CABundle))
	}
	want := []string{
		"mdaemonset.kb.io https://127.0.0.1:9876/mutate-apps-kruise-io-v1alpha1-daemonset CA",
		"vpodunavailablebudget.kb.io https://127.0.0.1:9876/validate-policy-kruise-io-podunavailablebudget CA",
	}
	if !slices.Equal(got, want) {
		t.Errorf("entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if mws[0].FailurePolicy == nil || *mws[0].FailurePolicy != "Fail" || len(mws[0].AdmissionReviewVersions) != 2 {
		t.Errorf("the entry's other fields are not Kruise's: %+v", mws[0])
	}
}

func TestKruiseWebhookEntriesRefusesAManifestWithoutKruiseEntries(t *testing.T) {
	podOnly, _, _ := strings.Cut(kruiseManifest, "- admissionReviewVersions: [v1, v1beta1]\n  clientConfig:\n    service: {name: webhook-service, namespace: system, path: /mutate-apps")
	if _, _, err := kruiseWebhookEntries([]byte(podOnly), 1, nil); err == nil {
		t.Error("no error for a manifest with no entry of Kruise's kinds")
	}
}

func TestKruiseArgs(t *testing.T) {
	c := &Cluster{Root: "/r", State: "/r/.e2e"}
	k := Kruise{WebhookPort: 1, MetricsPort: 2, HealthPort: 3, PprofPort: 4}
	tests := map[string]struct {
		o        KruiseOptions
		want     []string
		wantLast string
	}{
		"defaults": {want: []string{"--rest-config-qps=50", "--rest-config-burst=100", "--enable-leader-election=false",
			"--feature-gates=PodWebhook=false,KruiseDaemon=false", "--metrics-addr=127.0.0.1:2", "--health-probe-addr=127.0.0.1:3",
			"--pprof-addr=127.0.0.1:4", "--protection-log-path=/r/.e2e/kruise/log"}},
		"bench profile": {o: BenchProfile{QPS: 100, Burst: 200}.KruiseOptions(),
			want: []string{"--rest-config-qps=100", "--rest-config-burst=200"}},
		"workers": {o: KruiseOptions{QPS: 100, Burst: 200, DaemonSetWorkers: 8},
			want: []string{"--rest-config-qps=100", "--rest-config-burst=200", "--daemonset-workers=8"}},
		"extra flags last": {o: KruiseOptions{Args: []string{"-v=4"}}, wantLast: "-v=4"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			args := c.kruiseArgs(tc.o, k)
			if args[0] != "/r/.e2e/bin/kruise-manager" {
				t.Errorf("binary %s", args[0])
			}
			for _, w := range tc.want {
				if !slices.Contains(args, w) {
					t.Errorf("no %s in %v", w, args)
				}
			}
			if tc.wantLast != "" && args[len(args)-1] != tc.wantLast {
				t.Errorf("last flag %s, want %s", args[len(args)-1], tc.wantLast)
			}
		})
	}
}
