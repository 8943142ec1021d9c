package server

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"everynode.io/everynode/certs"
)

// reconnector asks a client to reconnect once the serving certificate its
// connection was opened with has been replaced.
//
// TLS checks the server's certificate only in the handshake. kube-apiserver
// and kube-scheduler keep their connections to everynode open for as long as
// calls keep coming, so without this a new certificate (a CA rotation, a
// cert-manager renewal) would first be seen whenever a connection happens
// to be replaced: maybe hours later, long after anyone watched the
// rotation, and then as a burst of failed calls if the caller does not
// trust it. With it every caller sees the new certificate on its next
// call: the answer to the first call on an old connection carries
// "Connection: close" (over HTTP/2, Go's server turns that into a GOAWAY),
// which closes the connection once answered, so no call fails for it.
type reconnector struct {
	src certs.Source

	mu sync.Mutex
	// served is the certificate each connection's handshake got, by the
	// TCP connection under the TLS one (ClientHelloInfo.Conn).
	served map[net.Conn]*tls.Certificate
}

func newReconnector(src certs.Source) *reconnector {
	return &reconnector{src: src, served: map[net.Conn]*tls.Certificate{}}
}

// GetCertificate is the listener's: src's certificate, remembered for the
// connection.
func (r *reconnector) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	c, err := r.src.GetCertificate(hello)
	if err == nil && hello != nil && hello.Conn != nil {
		r.mu.Lock()
		r.served[hello.Conn] = c
		r.mu.Unlock()
	}
	return c, err
}

type connKey struct{}

// connContext is the server's ConnContext: it gives requests their
// connection.
func connContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// forget is for the server's ConnState: a closed connection's entry goes.
func (r *reconnector) forget(c net.Conn, state http.ConnState) {
	if state != http.StateClosed && state != http.StateHijacked {
		return
	}
	r.mu.Lock()
	delete(r.served, tcpConn(c))
	r.mu.Unlock()
}

// tcpConn is the connection under c when c is TLS.
func tcpConn(c net.Conn) net.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		return tc.NetConn()
	}
	return c
}

// wrap answers with "Connection: close" on a connection whose certificate
// is no longer the one served, counting each in asked.
func (r *reconnector) wrap(h http.Handler, asked prometheus.Counter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if c, ok := req.Context().Value(connKey{}).(net.Conn); ok && r.stale(c) {
			w.Header().Set("Connection", "close")
			asked.Inc()
		}
		h.ServeHTTP(w, req)
	})
}

func (r *reconnector) stale(c net.Conn) bool {
	r.mu.Lock()
	served, ok := r.served[tcpConn(c)]
	r.mu.Unlock()
	if !ok {
		return false
	}
	current, err := r.src.GetCertificate(nil)
	return err == nil && current != served
}
