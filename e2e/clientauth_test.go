package e2e

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Client-certificate authentication on the webhook and extender port
// (issue 30). With client authentication on (Cluster.SetClientAuth) everynode runs with
// --client-ca-file: kube-apiserver reaches the webhooks with the client
// certificate its admission configuration names (the harness's
// admission configuration), kube-scheduler the extender with the one in its
// extender tlsConfig (everynode scheduler-config --client-cert-file). The
// daemon pods of a new set (webhooks fail closed for them) and an ordinary
// pod (the extender's filter is called) prove both callers get through;
// a caller without a certificate, or with one of another CA, does not.
func TestClientCertificateAuth(t *testing.T) {
	step(t, harness.SetClientAuth(bg, true))
	t.Cleanup(func() { step(t, harness.SetClientAuth(bg, false)) })

	filtersBefore := extenderCalls(t, "filter")
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "mtls-" + randSuffix()}
	nodes := createNodes(t, "mtls", 2, sel)
	createSet(t, simpleSet(ns, "agent", sel))
	eventually(t, settle, "a pod on each node, through the webhooks", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, nil)
	})

	createOrdinaryPod(t, ns, "web", sel)
	eventually(t, time.Minute, "the ordinary pod to be scheduled, the extender asked", func() (bool, string, error) {
		p, err := kube.CoreV1().Pods(ns).Get(ctx(t), "web", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		calls := extenderCalls(t, "filter") - filtersBefore
		return p.Spec.NodeName != "" && calls > 0, fmt.Sprintf("node %q, %v filter calls since client-auth on", p.Spec.NodeName, calls), nil
	})

	// Callers without the client CA's certificate: refused at the
	// handshake (the server CA is trusted, so nothing else can fail).
	pki := harness.PKI()
	roots := x509.NewCertPool()
	ca, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil || !roots.AppendCertsFromPEM(ca) {
		t.Fatalf("the harness CA: %v", err)
	}
	// The serving certificate as a client certificate: right key, wrong CA.
	wrongCA, err := tls.LoadX509KeyPair(filepath.Join(pki, "tls.crt"), filepath.Join(pki, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	scheduler, err := tls.LoadX509KeyPair(filepath.Join(pki, "scheduler-client.crt"), filepath.Join(pki, "scheduler-client.key"))
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + cmp.Or(os.Getenv("EVERYNODE_PORT"), "18443")
	for name, certs := range map[string][]tls.Certificate{"no client certificate": nil, "a certificate of another CA": {wrongCA}} {
		if err := handshake(addr, roots, certs); err == nil {
			t.Errorf("%s: the handshake succeeded; want it refused", name)
		} else {
			t.Logf("%s: refused: %v", name, err)
		}
	}
	if err := handshake(addr, roots, []tls.Certificate{scheduler}); err != nil {
		t.Errorf("kube-scheduler's client certificate: %v; want the handshake to succeed", err)
	}
}

// handshake completes a TLS handshake with addr and reads once, which is
// when a TLS 1.3 client learns that the server refused its certificate.
// The certificate, if any, is sent whatever CAs the server names as
// acceptable (Go's client would otherwise keep back one they did not
// sign, and the server would only see none).
func handshake(addr string, roots *x509.CertPool, certs []tls.Certificate) error {
	cfg := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
	if len(certs) > 0 {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &certs[0], nil }
	}
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		return err
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	if _, err := conn.Read(buf); err != nil {
		return err
	}
	return nil
}

// extenderCalls is everynode's count of extender calls of verb.
func extenderCalls(t *testing.T, verb string) float64 {
	t.Helper()
	series, err := scrape(t)
	if err != nil {
		t.Fatalf("scrape everynode: %v", err)
	}
	return series.sum("everynode_extender_request_duration_seconds_count", with(map[string]string{"verb": verb}))
}
