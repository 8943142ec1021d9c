package certs

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

const testLife = 300 * 24 * time.Hour

// caClock makes CAs that start at the clock's time.
type caClock struct{ now time.Time }

func (c *caClock) newCA() func() (*caPair, error) {
	return newCAFunc("test-ca", testLife, func() time.Time { return c.now })
}

func plan(t *testing.T, c *caClock, stored map[string][]byte, rotate bool) (map[string][]byte, string) {
	t.Helper()
	out, why, err := planCAs(stored, rotate, c.now, c.newCA())
	if err != nil {
		t.Fatal(err)
	}
	return out, why
}

// leafFrom signs a serving certificate with the current CA of data, as a
// replica would serve it.
func leafFrom(t *testing.T, data map[string][]byte, now time.Time) *x509.Certificate {
	t.Helper()
	a := &Authority{leaf: DefaultLeafDuration, now: func() time.Time { return now }}
	if err := a.use(data); err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := a.Sign(&x509.Certificate{
		PublicKey: key.Public(), DNSNames: []string{"everynode.svc"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// trusts says whether a caller that loaded bundle verifies leaf at now.
func trusts(bundle []byte, leaf *x509.Certificate, now time.Time) bool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle)
	_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "everynode.svc", CurrentTime: now})
	return err == nil
}

func subjects(bundle []byte) []string {
	var out []string
	for _, c := range parseBundle(bundle) {
		out = append(out, c.Subject.CommonName)
	}
	return out
}

func TestPlanCAsFirstStartPublishesTheNextCA(t *testing.T) {
	c := &caClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	data, why := plan(t, c, nil, false)
	if data == nil || why == "" {
		t.Fatalf("nothing planned for an empty Secret (why %q)", why)
	}
	if !bytes.Equal(data[caKey], data[corev1.TLSCertKey]) {
		t.Errorf("ca.crt differs from tls.crt: an older everynode's DynamicAuthority would regenerate the CA")
	}
	if got := len(parseBundle(data[BundleKey])); got != 2 {
		t.Errorf("bundle holds %d CAs %v, want the current and the next", got, subjects(data[BundleKey]))
	}
	if !bytes.HasPrefix(data[BundleKey], data[corev1.TLSCertKey]) || !bytes.Contains(data[BundleKey], data[nextCertKey]) {
		t.Errorf("bundle is not current + next")
	}
	c.now = c.now.Add(time.Hour)
	if again, why := plan(t, c, data, false); again != nil {
		t.Errorf("a Secret as wanted is rewritten: %s", why)
	}
}

// The point of the next CA: a caller that loaded the bundle before a
// rotation (kube-scheduler reads its caFile once) trusts the serving
// certificate signed after it, and the API server's caBundle of before
// trusts it too.
func TestPlanCAsRotationKeepsEveryCallerOfTheLastBundle(t *testing.T) {
	c := &caClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	before, _ := plan(t, c, nil, false)
	oldLeaf := leafFrom(t, before, c.now)

	c.now = c.now.Add(time.Minute)
	after, why := plan(t, c, before, true)
	if after == nil || !strings.Contains(why, "rotation asked for") {
		t.Fatalf("rotation asked for, got %q", why)
	}
	if !bytes.Equal(after[corev1.TLSCertKey], before[nextCertKey]) {
		t.Fatalf("the current CA after the rotation is not the published next one")
	}
	if bytes.Equal(after[nextCertKey], before[nextCertKey]) {
		t.Errorf("no new next CA published")
	}
	newLeaf := leafFrom(t, after, c.now)
	if !trusts(before[BundleKey], newLeaf, c.now) {
		t.Errorf("a caller holding the bundle of before the rotation rejects the new serving certificate")
	}
	if !trusts(after[BundleKey], oldLeaf, c.now) {
		t.Errorf("the new bundle rejects the serving certificate of a replica that has not switched yet")
	}
	if got := subjects(after[BundleKey]); len(got) != 3 {
		t.Errorf("bundle after a rotation %v, want current, next, previous", got)
	}
	// A second rotation is beyond a caller that never reloads: say so by
	// testing it, so the documented limit stays true.
	c.now = c.now.Add(time.Minute)
	twice, _ := plan(t, c, after, true)
	if trusts(before[BundleKey], leafFrom(t, twice, c.now), c.now) {
		t.Errorf("a bundle two rotations old still trusted: the docs say restart between rotations")
	}
}

// The schedule: every CA is next, current and previous for a third of its
// life each, from the first start on (when current and next are made
// together).
func TestPlanCAsRotatesOnSchedule(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &caClock{now: start}
	data, _ := plan(t, c, nil, false)
	for round := 1; round <= 3; round++ {
		due := start.Add(time.Duration(round) * testLife / 3)
		c.now = due.Add(-time.Hour)
		if again, why := plan(t, c, data, false); again != nil {
			t.Fatalf("round %d: rotated an hour early: %s", round, why)
		}
		c.now = due.Add(time.Hour)
		rotated, why := plan(t, c, data, false)
		if rotated == nil || !bytes.Equal(rotated[corev1.TLSCertKey], data[nextCertKey]) {
			t.Fatalf("round %d: the next CA was not promoted on time (%q)", round, why)
		}
		if got := parseBundle(rotated[BundleKey]); len(got) != 3 || !bytes.Equal(got[2].Raw, parseBundle(data[corev1.TLSCertKey])[0].Raw) {
			t.Errorf("round %d: bundle %v, want current, next and the CA current until now", round, subjects(rotated[BundleKey]))
		}
		if cur := parseBundle(rotated[corev1.TLSCertKey])[0]; nearExpiry(cur, c.now) {
			t.Errorf("round %d: the promoted CA is near its expiry already", round)
		}
		data = rotated
	}
	// A current CA near its end is replaced even when the next one is
	// young (an older everynode's one-year CA after an upgrade).
	short, err := newCAFunc("short", 30*24*time.Hour, func() time.Time { return c.now.Add(-25 * 24 * time.Hour) })()
	if err != nil {
		t.Fatal(err)
	}
	data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey], data[caKey] = short.certPEM, short.keyPEM, short.certPEM
	rotated, why := plan(t, c, data, false)
	if rotated == nil || !strings.Contains(why, "a third of its life left") {
		t.Errorf("a current CA with a sixth of its life left was kept (%q)", why)
	}
}

// An older everynode's Secret (DynamicAuthority: tls.crt, tls.key,
// ca.crt) keeps its CA; the next one is added.
func TestPlanCAsUpgradeKeepsTheCurrentCA(t *testing.T) {
	c := &caClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	ca, err := c.newCA()()
	if err != nil {
		t.Fatal(err)
	}
	old := map[string][]byte{corev1.TLSCertKey: ca.certPEM, corev1.TLSPrivateKeyKey: ca.keyPEM, caKey: ca.certPEM}
	data, why := plan(t, c, old, false)
	if data == nil || !bytes.Equal(data[corev1.TLSCertKey], ca.certPEM) || len(data[nextCertKey]) == 0 {
		t.Fatalf("upgrade: current replaced or no next CA (%q)", why)
	}
}

func TestPlanCAsRepairs(t *testing.T) {
	c := &caClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	good, _ := plan(t, c, nil, false)

	broken := map[string][]byte{}
	for k, v := range good {
		broken[k] = v
	}
	broken[corev1.TLSPrivateKeyKey] = []byte("garbage")
	data, why := plan(t, c, broken, false)
	if data == nil || !bytes.Equal(data[corev1.TLSCertKey], good[nextCertKey]) || !strings.Contains(why, "current CA unusable") {
		t.Errorf("a broken current CA with a good next one: want the next promoted, got %q", why)
	}

	data, why = plan(t, c, map[string][]byte{corev1.TLSCertKey: []byte("x")}, false)
	if data == nil || !strings.Contains(why, "no usable CA") || len(parseBundle(data[BundleKey])) != 2 {
		t.Errorf("nothing usable: want a new current and next, got %q", why)
	}

	noNext := map[string][]byte{}
	for k, v := range good {
		noNext[k] = v
	}
	delete(noNext, nextKeyKey)
	data, why = plan(t, c, noNext, false)
	if data == nil || !bytes.Equal(data[corev1.TLSCertKey], good[corev1.TLSCertKey]) || !strings.Contains(why, "next CA missing") {
		t.Errorf("a missing next key: want a new next CA and the current kept, got %q", why)
	}
}

// The Authority against an API server (fake clientset): it creates the
// Secret, signs with its current CA, and rotates when annotated, removing
// the annotation, and tells DynamicSource to sign anew.
func TestAuthorityRotatesOnRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	a := NewAuthority(client, "ns", "ca", 0)
	rotated := make(chan struct{}, 1)
	a.WatchRotation(rotated)
	go func() { _ = a.Run(ctx) }()

	secret := waitSecret(t, client, func(s *corev1.Secret) bool { return len(s.Data[BundleKey]) > 0 })
	<-rotated
	first := secret.Data[corev1.TLSCertKey]

	secret.Annotations[RotateAnnotation] = "now"
	if _, err := client.CoreV1().Secrets("ns").Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	after := waitSecret(t, client, func(s *corev1.Secret) bool { return !bytes.Equal(s.Data[corev1.TLSCertKey], first) })
	if _, still := after.Annotations[RotateAnnotation]; still {
		t.Errorf("the rotation request annotation is still there after the rotation")
	}
	if !bytes.Equal(after.Data[corev1.TLSCertKey], secret.Data[nextCertKey]) {
		t.Errorf("rotated to a CA that was not the published next one")
	}
	select {
	case <-rotated:
	case <-time.After(10 * time.Second):
		t.Fatal("DynamicSource was not told to sign a new serving certificate")
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf, err := a.Sign(&x509.Certificate{PublicKey: key.Public(), DNSNames: []string{"everynode.svc"}})
	if err != nil {
		t.Fatal(err)
	}
	if !trusts(secret.Data[BundleKey], leaf, time.Now()) {
		t.Errorf("the serving certificate after the rotation is not trusted by the bundle of before")
	}
}

func waitSecret(t *testing.T, client *fake.Clientset, ok func(*corev1.Secret) bool) *corev1.Secret {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		s, err := client.CoreV1().Secrets("ns").Get(context.Background(), "ca", metav1.GetOptions{})
		if err == nil && ok(s) {
			return s
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the Secret never got as wanted")
	return nil
}
