package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeSource serves a fixed certificate and health.
type fakeSource struct {
	cert    *tls.Certificate
	healthy error
}

func (f *fakeSource) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return f.cert, nil
}
func (f *fakeSource) Start(ctx context.Context) error { <-ctx.Done(); return nil }
func (f *fakeSource) Healthy() error                  { return f.healthy }

// startServer runs a Server on loopback ports and returns its base URLs.
func startServer(t *testing.T, cfg Config) (secureURL, healthURL string) {
	t.Helper()
	cfg.SecureAddr, cfg.HealthAddr = "127.0.0.1:0", "127.0.0.1:0"
	reg := prometheus.NewRegistry()
	cfg.Gatherer, cfg.Registerer = reg, reg
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	secureLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	healthLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.serve(ctx, secureLn, healthLn) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve returned %v on shutdown", err)
		}
	})
	return "https://" + secureLn.Addr().String(), "http://" + healthLn.Addr().String()
}

func testCert(t *testing.T) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func do(t *testing.T, method, url string) (int, string, *http.Response) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequest(method, url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp
}

func TestRoutes(t *testing.T) {
	answer := func(s string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(s)) })
	}
	secure, health := startServer(t, Config{
		Certificates: &fakeSource{cert: testCert(t)},
		Parts:        []Routes{{"/a/one": answer("one")}, {"/b/two": answer("two")}},
	})
	tests := map[string]struct {
		method, url string
		wantCode    int
		wantBody    string
	}{
		"first part's route":  {http.MethodPost, secure + "/a/one", 200, "one"},
		"second part's route": {http.MethodPost, secure + "/b/two", 200, "two"},
		"GET is 405":          {http.MethodGet, secure + "/a/one", 405, "only POST"},
		"unknown path is 404": {http.MethodPost, secure + "/nope", 404, ""},
		"healthz":             {http.MethodGet, health + "/healthz", 200, "ok"},
		"readyz":              {http.MethodGet, health + "/readyz", 200, "ok"},
		"metrics":             {http.MethodGet, health + "/metrics", 200, "everynode_http_request_duration_seconds"},
		"no pprof by default": {http.MethodGet, health + "/debug/pprof/", 404, ""},
	}
	// metrics last: it must see the earlier requests.
	order := []string{"first part's route", "second part's route", "GET is 405", "unknown path is 404", "healthz", "readyz", "no pprof by default", "metrics"}
	for _, name := range order {
		tc := tests[name]
		t.Run(name, func(t *testing.T) {
			code, body, _ := do(t, tc.method, tc.url)
			if code != tc.wantCode || !strings.Contains(body, tc.wantBody) {
				t.Fatalf("got %d %q, want %d containing %q", code, body, tc.wantCode, tc.wantBody)
			}
		})
	}
}

func TestRoutesRefusesBadWiring(t *testing.T) {
	h := http.NotFoundHandler()
	tests := map[string][]Routes{
		"one path in two parts": {{"/x": h}, {"/x": h}},
		"relative path":         {{"x": h}},
		"nil handler":           {{"/x": nil}},
	}
	for name, parts := range tests {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			_, err := New(Config{SecureAddr: ":0", HealthAddr: ":0", Certificates: &fakeSource{cert: testCert(t)},
				Gatherer: reg, Registerer: reg, Parts: parts})
			if err == nil {
				t.Fatal("New accepted the routes")
			}
		})
	}
}

func TestProtocols(t *testing.T) {
	post := func(t *testing.T, url string) *http.Response {
		t.Helper()
		client := &http.Client{Transport: &http.Transport{
			ForceAttemptHTTP2: true,
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		}}
		resp, err := client.Post(url+"/any", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		http2     bool
		wantMajor int
	}{{true, 2}, {false, 1}} {
		t.Run(fmt.Sprintf("http2=%v", tc.http2), func(t *testing.T) {
			secure, health := startServer(t, Config{Certificates: &fakeSource{cert: testCert(t)}, HTTP2: tc.http2})
			if resp := post(t, secure); resp.ProtoMajor != tc.wantMajor {
				t.Fatalf("served %s to a client offering h2 and http/1.1, want HTTP/%d", resp.Proto, tc.wantMajor)
			}
			if _, body, _ := do(t, http.MethodGet, health+"/metrics"); !strings.Contains(body, "everynode_https_connections_total 1") {
				t.Errorf("metrics do not count the one connection:\n%s", body)
			}
		})
	}

	secure, _ := startServer(t, Config{Certificates: &fakeSource{cert: testCert(t)}, HTTP2: true})
	tlsOld := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11, MinVersion: tls.VersionTLS10,
	}}}
	if _, err := tlsOld.Post(secure+"/any", "application/json", strings.NewReader("{}")); err == nil {
		t.Fatal("a TLS 1.1 client was served; want TLS 1.2 at least")
	}
}

func TestReadyzFailsWithoutCertificate(t *testing.T) {
	_, health := startServer(t, Config{
		Certificates: &fakeSource{healthy: errors.New("no serving certificate loaded")},
		Ready:        []Check{{Name: "informers", Check: func() error { return errors.New("not synced") }}},
	})
	code, body, _ := do(t, http.MethodGet, health+"/readyz")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("readyz %d, want 503", code)
	}
	for _, want := range []string{"[-]certificate: no serving certificate loaded", "[-]informers: not synced"} {
		if !strings.Contains(body, want) {
			t.Errorf("readyz body %q lacks %q", body, want)
		}
	}
}

func TestBodyCap(t *testing.T) {
	read := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		}
	})
	secure, _ := startServer(t, Config{Certificates: &fakeSource{cert: testCert(t)}, Parts: []Routes{{"/read": read}}})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Post(secure+"/read", "application/json", io.LimitReader(zeros{}, MaxBodyBytes+1))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d for an oversized body, want 413", resp.StatusCode)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
