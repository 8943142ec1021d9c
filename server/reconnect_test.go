package server

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
)

// swapSource serves whichever certificate it was last given.
type swapSource struct {
	fakeSource
	mu sync.Mutex
}

func (s *swapSource) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cert, nil
}

func (s *swapSource) set(c *tls.Certificate) {
	s.mu.Lock()
	s.cert = c
	s.mu.Unlock()
}

// After the serving certificate changes, a client on a kept-alive
// connection gets its next answer (the call succeeds) with the connection
// closed behind it, and its call after that shakes hands again and sees
// the new certificate. Over HTTP/1.1 and HTTP/2.
func TestClientsReconnectAfterCertificateChange(t *testing.T) {
	for _, http2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("http2=%v", http2), func(t *testing.T) {
			first, second := testCert(t), testCert(t)
			src := &swapSource{fakeSource: fakeSource{cert: first}}
			ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
			secure, health := startServer(t, Config{Certificates: src, HTTP2: http2, Parts: []Routes{{"/ok": ok}}})
			client := &http.Client{Transport: &http.Transport{
				ForceAttemptHTTP2: http2,
				TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
			}}
			call := func() (reused bool, served []byte) {
				t.Helper()
				trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
				req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodPost, secure+"/ok", strings.NewReader("{}"))
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("call failed: %v", err)
				}
				defer resp.Body.Close()
				if body, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK || string(body) != "ok" {
					t.Fatalf("call answered %d %q", resp.StatusCode, body)
				}
				return reused, resp.TLS.PeerCertificates[0].Raw
			}

			call()
			if reused, _ := call(); !reused {
				t.Fatal("the client did not keep its connection: the test shows nothing")
			}
			src.set(second)
			if reused, served := call(); !reused || string(served) != string(first.Certificate[0]) {
				t.Fatalf("the first call after the change: reused %v; want it answered on the old connection", reused)
			}
			// HTTP/2's GOAWAY reaches the client's read loop a moment after
			// the answer; a retry on a connection it just closed is the
			// transport's own (the request was never sent on it).
			reused, served := call()
			if string(served) != string(second.Certificate[0]) {
				t.Fatalf("the call after that still got the old certificate (connection reused %v)", reused)
			}
			call()
			if _, body, _ := do(t, http.MethodGet, health+"/metrics"); !strings.Contains(body, `everynode_https_reconnects_requested_total{route="/ok"} 1`) {
				t.Errorf("want one reconnect asked for on /ok in the metrics:\n%s", grepLines(body, "reconnects"))
			}
		})
	}
}

func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
