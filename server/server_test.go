package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptrace"
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
	if cfg.DrainTimeout == 0 {
		// As before the timeout was configurable: a connection closing as
		// the test ends must not fail it.
		cfg.DrainTimeout = 20 * time.Second
	}
	ts := runServer(t, cfg, nil)
	t.Cleanup(func() {
		if err := ts.stop(); err != nil {
			t.Errorf("serve returned %v on shutdown", err)
		}
	})
	return ts.secureURL, ts.healthURL
}

// testServer is a Server running on loopback ports.
type testServer struct {
	secureURL, healthURL string
	cancel               context.CancelFunc
	done                 chan error // serve's result
}

// stop cancels the run context and waits for serve to return.
func (ts *testServer) stop() error {
	ts.cancel()
	return <-ts.done
}

// runServer builds a Server, lets prepare change it (test hooks), and
// serves it on loopback ports until the test ends or ts.stop.
func runServer(t *testing.T, cfg Config, prepare func(*Server)) *testServer {
	t.Helper()
	cfg.SecureAddr, cfg.HealthAddr = "127.0.0.1:0", "127.0.0.1:0"
	reg := prometheus.NewRegistry()
	cfg.Gatherer, cfg.Registerer = reg, reg
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(s)
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
	// Whatever the test did, serve must not outlive it.
	t.Cleanup(cancel)
	return &testServer{
		secureURL: "https://" + secureLn.Addr().String(),
		healthURL: "http://" + healthLn.Addr().String(),
		cancel:    cancel,
		done:      done,
	}
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

// post sends an empty JSON POST over HTTP/1.1 from any goroutine.
func post(url string) (code int, body string, err error) {
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Post(url, "application/json", strings.NewReader("{}"))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// blocking answers "finished" once release is closed, after closing started.
func blocking(started chan<- struct{}, release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(started)
		<-release
		_, _ = w.Write([]byte("finished"))
	})
}

func TestShutdownFailsReadyzAndKeepsServing(t *testing.T) {
	endDelay := make(chan time.Time)
	var delay time.Duration
	ts := runServer(t, Config{
		Certificates:  &fakeSource{cert: testCert(t)},
		Parts:         []Routes{{"/hook": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("served")) })}},
		ShutdownDelay: time.Hour, // ended by endDelay instead
		DrainTimeout:  time.Minute,
	}, func(s *Server) {
		s.after = func(d time.Duration) <-chan time.Time { delay = d; return endDelay }
	})
	if code, body, _ := do(t, http.MethodGet, ts.healthURL+"/readyz"); code != http.StatusOK {
		t.Fatalf("readyz before shutdown: %d %q", code, body)
	}

	ts.cancel()
	code, body, _ := do(t, http.MethodGet, ts.healthURL+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "[-]shutdown: shutting down") {
		t.Errorf("readyz right after cancel: %d %q, want 503 saying shutting down", code, body)
	}
	if code, body, _ := do(t, http.MethodGet, ts.healthURL+"/healthz"); code != http.StatusOK {
		t.Errorf("healthz during the delay: %d %q, want 200", code, body)
	}
	code, body, resp := do(t, http.MethodPost, ts.secureURL+"/hook")
	if code != http.StatusOK || body != "served" {
		t.Errorf("webhook route during the delay: %d %q, want 200 served", code, body)
	}
	if !resp.Close {
		t.Error("a response during the delay keeps the connection; want Connection: close so the client reconnects elsewhere")
	}

	close(endDelay)
	if err := <-ts.done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if delay != time.Hour {
		t.Errorf("waited %v, want the configured ShutdownDelay", delay)
	}
}

// A connection the client keeps idle in its pool stays open when
// shutdown begins: the client's next call on it is answered (with
// Connection: close), not cut. Closing idle connections at once raced with
// kube-apiserver reusing them and failed admissions (e2e/realnode).
func TestShutdownKeepsIdleConnectionsForOneMoreCall(t *testing.T) {
	endDelay, delayStarted := make(chan time.Time), make(chan struct{})
	ts := runServer(t, Config{
		Certificates:  &fakeSource{cert: testCert(t)},
		Parts:         []Routes{{"/hook": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("served")) })}},
		ShutdownDelay: time.Hour, // ended by endDelay instead
		DrainTimeout:  time.Minute,
	}, func(s *Server) {
		s.after = func(time.Duration) <-chan time.Time { close(delayStarted); return endDelay }
	})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	call := func() (reused bool, resp *http.Response, err error) {
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodPost, ts.secureURL+"/hook", strings.NewReader("{}"))
		resp, err = client.Do(req)
		if err == nil {
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		return reused, resp, err
	}
	if _, resp, err := call(); err != nil || resp.Close {
		t.Fatalf("before shutdown: %v, close %v", err, resp != nil && resp.Close)
	}
	ts.cancel()
	<-delayStarted // the shutdown has begun and waits out its delay
	reused, resp, err := call()
	if err != nil || !reused {
		t.Fatalf("the call on the pooled connection after shutdown began: reused %v, err %v; want it answered on that connection", reused, err)
	}
	if !resp.Close {
		t.Error("the answer keeps the connection; want Connection: close")
	}
	close(endDelay)
	if err := <-ts.done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

func TestShutdownDrainsInFlightRequests(t *testing.T) {
	const delay = 20 * time.Millisecond
	started, release, draining := make(chan struct{}), make(chan struct{}), make(chan struct{})
	ts := runServer(t, Config{
		Certificates:  &fakeSource{cert: testCert(t)},
		Parts:         []Routes{{"/slow": blocking(started, release)}},
		ShutdownDelay: delay,
		DrainTimeout:  time.Minute, // only a bound: the request is released below
	}, func(s *Server) {
		// Shutdown runs this once it has closed the listeners.
		s.secure.RegisterOnShutdown(func() { close(draining) })
	})
	type result struct {
		code int
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		code, body, err := post(ts.secureURL + "/slow")
		got <- result{code, body, err}
	}()
	<-started

	cancelled := time.Now()
	ts.cancel()
	<-draining
	if waited := time.Since(cancelled); waited < delay {
		t.Errorf("listeners closed %v after cancel, before the %v delay", waited, delay)
	}
	if _, _, err := post(ts.secureURL + "/slow"); err == nil {
		t.Error("a new request was served after the listeners closed")
	}
	close(release)
	if r := <-got; r.err != nil || r.code != http.StatusOK || r.body != "finished" {
		t.Errorf("in-flight request: %d %q %v, want 200 finished", r.code, r.body, r.err)
	}
	if err := <-ts.done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

func TestShutdownReturnsAfterDelayAndDrainTimeout(t *testing.T) {
	const delay, drain = 30 * time.Millisecond, 30 * time.Millisecond
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release) // after the test: the handler outlives its connection
	ts := runServer(t, Config{
		Certificates:  &fakeSource{cert: testCert(t)},
		Parts:         []Routes{{"/stuck": blocking(started, release)}},
		ShutdownDelay: delay,
		DrainTimeout:  drain,
	}, nil)
	cut := make(chan error, 1)
	go func() { _, _, err := post(ts.secureURL + "/stuck"); cut <- err }()
	<-started

	cancelled := time.Now()
	ts.cancel()
	select {
	case err := <-ts.done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("serve returned %v, want the drain's deadline exceeded", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not return with a request stuck past the drain timeout")
	}
	if waited := time.Since(cancelled); waited < delay+drain {
		t.Errorf("serve returned %v after cancel, before delay %v + drain %v", waited, delay, drain)
	}
	if err := <-cut; err == nil {
		t.Error("the stuck request got an answer; want its connection cut")
	}
}

func TestNewRefusesNegativeShutdownDurations(t *testing.T) {
	for _, cfg := range []Config{{ShutdownDelay: -time.Second}, {DrainTimeout: -time.Second}} {
		reg := prometheus.NewRegistry()
		cfg.SecureAddr, cfg.HealthAddr, cfg.Gatherer, cfg.Registerer = ":0", ":1", reg, reg
		cfg.Certificates = &fakeSource{cert: testCert(t)}
		if _, err := New(cfg); err == nil {
			t.Errorf("New accepted delay %v, drain timeout %v", cfg.ShutdownDelay, cfg.DrainTimeout)
		}
	}
}

// Past the in-flight cap a route answers 429 with Retry-After at once,
// counts it, and serves again once a slot frees; another route is not
// affected.
func TestInFlightCap(t *testing.T) {
	started, release := make(chan struct{}, 4), make(chan struct{})
	secure, health := startServer(t, Config{
		Certificates: &fakeSource{cert: testCert(t)},
		Parts: []Routes{{
			"/slow": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				started <- struct{}{}
				<-release
				_, _ = w.Write([]byte("finished"))
			}),
			"/fast": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }),
		}},
		MaxInFlight: 2,
	})
	for range 2 {
		go func() { _, _, _ = post(secure + "/slow") }()
		<-started
	}

	code, body, resp := do(t, http.MethodPost, secure+"/slow")
	if code != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" || !strings.Contains(body, "at most 2 at once") {
		t.Fatalf("third request in flight: %d %q Retry-After %q; want 429 with Retry-After 1", code, body, resp.Header.Get("Retry-After"))
	}
	if code, _, _ := do(t, http.MethodPost, secure+"/fast"); code != http.StatusOK {
		t.Errorf("another route answered %d while /slow was full; want 200", code)
	}
	if _, metrics, _ := do(t, http.MethodGet, health+"/metrics"); !strings.Contains(metrics, `everynode_http_requests_refused_total{route="/slow"} 1`) {
		t.Errorf("/metrics lacks one refusal on /slow:\n%s", metrics)
	}

	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		go func() { <-started }()
		code, _, _ := do(t, http.MethodPost, secure+"/slow")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/slow still answers %d after the slots were released", code)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// net/http's error log is rate-limited: a burst of handshake errors makes
// one line, and the next line counts the ones left out.
func TestErrorLogRateLimited(t *testing.T) {
	now := time.Unix(0, 0)
	k := &klogWriter{listener: "https", now: func() time.Time { return now }}
	var lines int
	for i := 0; i < 100; i++ {
		before := k.last
		if _, err := k.Write([]byte("http: TLS handshake error from 10.0.0.1:5555: EOF\n")); err != nil {
			t.Fatal(err)
		}
		if !k.last.Equal(before) || before.IsZero() {
			lines++
		}
	}
	if lines != 1 || k.dropped != 99 {
		t.Fatalf("100 errors in an instant: %d lines, %d left out; want 1 and 99", lines, k.dropped)
	}
	now = now.Add(errorLogInterval)
	if _, err := k.Write([]byte("again\n")); err != nil {
		t.Fatal(err)
	}
	if k.dropped != 0 || !k.last.Equal(now) {
		t.Errorf("after the interval: dropped %d, last %v; want a line counting the 99", k.dropped, k.last)
	}
}

// testCA is a CA that signs client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key}
}

// client issues a client certificate.
func (ca *testCA) client(t *testing.T, name string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// With ClientCAs the HTTPS port serves only clients whose certificate
// one of them signed; the health port asks nothing.
func TestClientCertificatesRequired(t *testing.T) {
	trusted, other := newTestCA(t, "webhook-clients"), newTestCA(t, "someone-else")
	pool := x509.NewCertPool()
	pool.AddCert(trusted.cert)
	secure, health := startServer(t, Config{
		Certificates: &fakeSource{cert: testCert(t)},
		Parts:        []Routes{{"/ok": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })}},
		ClientCAs:    pool,
	})
	post := func(certs ...tls.Certificate) (int, error) {
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: certs}}}
		resp, err := client.Post(secure+"/ok", "application/json", strings.NewReader("{}"))
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := post(trusted.client(t, "kube-apiserver")); err != nil || code != http.StatusOK {
		t.Errorf("a client certificate of the trusted CA: %d, %v; want 200", code, err)
	}
	if code, err := post(); err == nil {
		t.Errorf("no client certificate: answered %d; want the handshake refused", code)
	}
	if code, err := post(other.client(t, "intruder")); err == nil {
		t.Errorf("a client certificate of another CA: answered %d; want the handshake refused", code)
	}
	if code, _, _ := do(t, http.MethodGet, health+"/healthz"); code != http.StatusOK {
		t.Errorf("health port answered %d without a client certificate; want 200", code)
	}
}

// At twice the cap, as many requests are refused as are served, each
// refusal at once, and every served one completes.
func TestInFlightCapAtTwiceTheCap(t *testing.T) {
	const limit = 8
	started, release := make(chan struct{}, limit), make(chan struct{})
	secure, _ := startServer(t, Config{
		Certificates: &fakeSource{cert: testCert(t)},
		Parts: []Routes{{"/slow": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			started <- struct{}{}
			<-release
			_, _ = w.Write([]byte("finished"))
		})}},
		MaxInFlight: limit,
	})
	served := make(chan int, limit)
	for range limit {
		go func() {
			code, _, _ := post(secure + "/slow")
			served <- code
		}()
		<-started
	}
	var refused int
	start := time.Now()
	for range limit {
		if code, _, err := post(secure + "/slow"); err == nil && code == http.StatusTooManyRequests {
			refused++
		}
	}
	took := time.Since(start)
	close(release)
	ok := 0
	for range limit {
		if <-served == http.StatusOK {
			ok++
		}
	}
	t.Logf("at 2x the cap of %d: %d served, %d refused (429) in %v together", limit, ok, refused, took)
	if refused != limit || ok != limit {
		t.Errorf("%d served and %d refused, want %d each", ok, refused, limit)
	}
}
