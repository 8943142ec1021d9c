package cluster

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// What kruise-manager needs in the cluster and on disk before it starts
// (StartKruise): its identity, its certificates, its webhook
// configurations.

// kruiseIdentity makes Kruise's namespace and ServiceAccount, binds it
// to Kruise's own ClusterRole (read from role.yaml, renamed
// kruise-manager-role as Kruise's kustomization prefixes it) and writes
// a kubeconfig with its token.
func (c *Cluster) kruiseIdentity(ctx context.Context, roleFile string) error {
	kube, err := c.Client()
	if err != nil {
		return err
	}
	b, err := os.ReadFile(roleFile)
	if err != nil {
		return err
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(bytes.TrimPrefix(b, []byte("---\n")), &role); err != nil || len(role.Rules) == 0 {
		return fmt.Errorf("%s: not a ClusterRole with rules (%v)", roleFile, err)
	}
	const name = "kruise-manager"
	role.ObjectMeta = metav1.ObjectMeta{Name: name + "-role"}
	objs := []func() error{
		func() error {
			_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KruiseNamespace}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kube.CoreV1().ServiceAccounts(KruiseNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kube.RbacV1().ClusterRoles().Update(ctx, &role, metav1.UpdateOptions{})
			if apierrors.IsNotFound(err) {
				_, err = kube.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{})
			}
			return err
		},
		func() error {
			_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: name + "-rolebinding"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: KruiseNamespace}},
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objs {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kruise-manager's identity: %w", err)
		}
	}
	if err := os.MkdirAll(c.kruiseDir(""), 0o755); err != nil {
		return err
	}
	return c.tokenKubeconfig(ctx, KruiseNamespace, name, c.kruiseDir("kubeconfig"))
}

// kruiseCerts writes Kruise's certificate folder afresh and returns the
// CA's PEM. Kruise reads six files there (its fs cert writer), keeps
// them if the serving certificate verifies for WEBHOOK_HOST against the
// CA, and writes the CA into the webhook configurations itself.
func (c *Cluster) kruiseCerts() ([]byte, error) {
	if err := c.ensurePKI(); err != nil {
		return nil, err
	}
	dir := c.kruiseDir("certs")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ca, err := loadPair(c.PKI(), "ca")
	if err != nil {
		return nil, err
	}
	// tls.crt and tls.key are two of Kruise's names already.
	if _, err := makePair(dir, "tls", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kruise-manager"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		// Kruise's own readiness check calls https://localhost:<port>.
		DNSNames:    []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, &ca); err != nil {
		return nil, err
	}
	copies := map[string]string{
		filepath.Join(dir, "tls.crt"):    "cert.pem",
		filepath.Join(dir, "tls.key"):    "key.pem",
		filepath.Join(c.PKI(), "ca.crt"): "ca-cert.pem",
		filepath.Join(c.PKI(), "ca.key"): "ca-key.pem",
	}
	for from, to := range copies {
		b, err := os.ReadFile(from)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, to), b, 0o600); err != nil {
			return nil, err
		}
	}
	return os.ReadFile(filepath.Join(c.PKI(), "ca.crt"))
}

const (
	kruiseMutating   = "kruise-mutating-webhook-configuration"
	kruiseValidating = "kruise-validating-webhook-configuration"
)

// kruiseWebhooks creates the two webhook configurations kruise-manager
// expects, from the entries of its manifest (config/webhook/manifests.yaml)
// that only match Kruise's own kinds, each calling
// https://127.0.0.1:<port><its path> with the harness's CA. They are
// deleted and made anew: Kruise keeps the entries it first saw in an
// annotation ("template") and restores them from it, so an older
// configuration would keep an older port.
func (c *Cluster) kruiseWebhooks(ctx context.Context, manifest string, port int, ca []byte) error {
	b, err := os.ReadFile(manifest)
	if err != nil {
		return err
	}
	mws, vws, err := kruiseWebhookEntries(b, port, ca)
	if err != nil {
		return fmt.Errorf("%s: %w", manifest, err)
	}
	kube, err := c.Client()
	if err != nil {
		return err
	}
	adm := kube.AdmissionregistrationV1()
	for _, err := range []error{
		adm.MutatingWebhookConfigurations().Delete(ctx, kruiseMutating, metav1.DeleteOptions{}),
		adm.ValidatingWebhookConfigurations().Delete(ctx, kruiseValidating, metav1.DeleteOptions{}),
	} {
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if _, err := adm.MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: kruiseMutating}, Webhooks: mws}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("%s: %w", kruiseMutating, err)
	}
	if _, err := adm.ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: kruiseValidating}, Webhooks: vws}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("%s: %w", kruiseValidating, err)
	}
	return nil
}

// kruiseWebhookEntries are the entries of Kruise's webhook manifest
// that match only Kruise's own kinds, each calling
// https://127.0.0.1:<port><its service path> and trusting ca.
func kruiseWebhookEntries(manifest []byte, port int, ca []byte) ([]admissionregistrationv1.MutatingWebhook, []admissionregistrationv1.ValidatingWebhook, error) {
	var mutating admissionregistrationv1.MutatingWebhookConfiguration
	var validating admissionregistrationv1.ValidatingWebhookConfiguration
	for doc := range strings.SplitSeq(string(manifest), "\n---") {
		var kind struct{ Kind string }
		err := yaml.Unmarshal([]byte(doc), &kind)
		switch {
		case err != nil:
		case kind.Kind == "MutatingWebhookConfiguration":
			err = yaml.Unmarshal([]byte(doc), &mutating)
		case kind.Kind == "ValidatingWebhookConfiguration":
			err = yaml.Unmarshal([]byte(doc), &validating)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	url := func(name string, cc *admissionregistrationv1.WebhookClientConfig) error {
		if cc.Service == nil || cc.Service.Path == nil {
			return fmt.Errorf("entry %s has no service path", name)
		}
		u := fmt.Sprintf("https://127.0.0.1:%d%s", port, *cc.Service.Path)
		*cc = admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: ca}
		return nil
	}
	var mws []admissionregistrationv1.MutatingWebhook
	for _, w := range mutating.Webhooks {
		if kruiseOnly(w.Rules) {
			if err := url(w.Name, &w.ClientConfig); err != nil {
				return nil, nil, err
			}
			mws = append(mws, w)
		}
	}
	var vws []admissionregistrationv1.ValidatingWebhook
	for _, w := range validating.Webhooks {
		if kruiseOnly(w.Rules) {
			if err := url(w.Name, &w.ClientConfig); err != nil {
				return nil, nil, err
			}
			vws = append(vws, w)
		}
	}
	if len(mws) == 0 || len(vws) == 0 {
		return nil, nil, fmt.Errorf("no webhook entry for Kruise's own kinds")
	}
	return mws, vws, nil
}

// kruiseOnly reports whether every rule matches only Kruise's groups.
func kruiseOnly(rules []admissionregistrationv1.RuleWithOperations) bool {
	for _, r := range rules {
		for _, g := range r.APIGroups {
			if !slices.Contains(kruiseGroups, g) {
				return false
			}
		}
	}
	return len(rules) > 0
}

// freePorts are n loopback ports free a moment ago. The listeners are
// held until all n are picked, so the n differ.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
