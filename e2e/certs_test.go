package e2e

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"everynode.io/e2e/cluster"
)

// The chart's and the harness's names (package cluster).
const (
	releaseNamespace = "everynode-system"
	releaseName      = "everynode"
)

// Self-signed mode, the chart's default: everynode keeps its own CA in the
// Secret <release>-ca and writes it into both webhook configurations, and
// the API server then trusts the webhooks. The harness reinstalls the chart
// in that mode (so the RBAC is the mode's own: the Secret and the two
// configurations, nothing more; the chart renders no caBundle in that mode),
// and restarts everynode to match; the scenario ends by switching back.
func TestSelfSignedCertificates(t *testing.T) {
	step(t, harness.SetCertMode(bg, cluster.CertSelfSigned))
	t.Cleanup(func() { step(t, harness.SetCertMode(bg, cluster.CertExternalCA)) })

	waitForCAInBundles(t, releaseName+"-ca", "everynode to write its CA into both configurations")

	webhooksServe(t, "selfsigned")
}

// In cert-manager mode the chart's Issuers and Certificate make the serving
// certificate (naming 127.0.0.1, the host of external.url, as an IP
// address), cert-manager's cainjector writes its CA into both webhook
// configurations, and everynode serves the Secret's files. cert-manager's
// own controller and cainjector run for the scenario (built from its
// library module by tools.sh).
func TestCertManagerCertificates(t *testing.T) {
	step(t, harness.SetCertMode(bg, cluster.CertManager))
	t.Cleanup(func() { step(t, harness.SetCertMode(bg, cluster.CertExternalCA)) })

	waitForCAInBundles(t, releaseName+"-tls", "the cainjector to write the serving CA into both configurations")
	webhooksServe(t, "certmanager")
}

// waitForCAInBundles waits until the ca.crt of the release namespace's
// Secret secret is in every webhook's caBundle.
func waitForCAInBundles(t *testing.T, secret, what string) {
	t.Helper()
	eventually(t, settle, what, func() (bool, string, error) {
		s, err := kube.CoreV1().Secrets(releaseNamespace).Get(ctx(t), secret, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		ca := s.Data["ca.crt"]
		if len(ca) == 0 {
			return false, "the Secret " + secret + " has no ca.crt", nil
		}
		return caInBundles(t, ca)
	})
}

// caInBundles reports whether every webhook of the two configurations
// trusts ca: its caBundle holds it (cert-manager's cainjector may keep a
// CA it replaces next to the new one for a while).
func caInBundles(t *testing.T, ca []byte) (bool, string, error) {
	bundles, err := caBundles(t)
	if err != nil {
		return false, "", err
	}
	for name, b := range bundles {
		if !bytes.Contains(b, bytes.TrimSpace(ca)) {
			return false, fmt.Sprintf("%s has a caBundle of %d bytes without the %d of the CA", name, len(b), len(ca)), nil
		}
	}
	return true, "", nil
}

// webhooksServe checks both webhook paths through the API server: the set
// webhook refuses an invalid set with its own message (only it can), and
// the pod webhook pins the controller's pod to its node.
func webhooksServe(t *testing.T, prefix string) {
	t.Helper()
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: prefix + "-" + randSuffix()}
	// Invalid in a way only the webhook checks (the CRD's CEL rules refuse
	// a wrong restartPolicy before any webhook is called): a container
	// name that is no DNS label.
	bad := simpleSet(ns, "bad", sel)
	bad.Spec.Template.Spec.Containers[0].Name = "Not_A_DNS_Label"
	_, err := everynode.EverynodeV1alpha1().DaemonSets(ns).Create(ctx(t), bad, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "denied the request") || !strings.Contains(err.Error(), "spec.template.spec.containers[0].name") {
		t.Fatalf("creating an invalid set: got %v, want the webhook's refusal naming spec.template.spec.containers[0].name", err)
	}

	nodes := createNodes(t, prefix, 1, sel)
	createSet(t, simpleSet(ns, "agent", sel))
	eventually(t, settle, "a pinned pod on the node", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, func(p *corev1.Pod) string {
			a := p.Spec.Affinity
			if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
				return "not pinned"
			}
			return ""
		})
	})
}

// caBundles returns the caBundle of every webhook in the chart's two
// configurations, by "kind/webhook".
func caBundles(t *testing.T) (map[string][]byte, error) {
	out := map[string][]byte{}
	m, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx(t), releaseName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	for _, w := range m.Webhooks {
		out["mutating/"+w.Name] = w.ClientConfig.CABundle
	}
	v, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx(t), releaseName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	for _, w := range v.Webhooks {
		out["validating/"+w.Name] = w.ClientConfig.CABundle
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no webhooks in the configurations %q", releaseName)
	}
	return out, nil
}
