// Package server is everynode's HTTP front: one HTTPS listener for the
// admission webhooks and the scheduler extender (the API server and
// kube-scheduler call it), and one plain-HTTP listener for /healthz, /readyz
// and /metrics (the kubelet and Prometheus call it). It is the only package
// that knows gorilla/mux; the parts hand it plain http.Handlers.
package server

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	"everynode.io/everynode/certs"
)

// Routes are one part's handlers of the HTTPS listener, keyed by path. Each
// part (the webhooks, the extender) names its own paths; the server only
// mounts them, so no path is written twice.
type Routes = map[string]http.Handler

// Check is one readiness condition: nil when ready.
type Check struct {
	Name  string
	Check func() error
}

// Config configures the two listeners.
type Config struct {
	// SecureAddr is the HTTPS listen address, e.g. ":8443".
	SecureAddr string
	// HealthAddr is the plain-HTTP listen address for probes and metrics.
	HealthAddr string
	// Certificates serve the HTTPS listener; /readyz fails while they have
	// no valid certificate.
	Certificates certs.Source
	// Parts are the routes of each part. Every request is a POST.
	Parts []Routes
	// Ready are extra readiness checks (informer caches synced, ...).
	Ready []Check
	// Gatherer is what /metrics exposes; Registerer is where the server
	// registers its own request metrics.
	Gatherer   prometheus.Gatherer
	Registerer prometheus.Registerer
	// Profiling adds /debug/pprof to the health listener.
	Profiling bool
	// HTTP2 offers HTTP/2 on the HTTPS listener besides HTTP/1.1.
	HTTP2 bool
	// ShutdownDelay is how long both listeners keep serving, with /readyz
	// failing, once Run's context ends: the time the endpoints controller
	// and kube-proxy take to stop sending this replica new connections.
	// Zero: no delay.
	ShutdownDelay time.Duration
	// DrainTimeout bounds the wait for in-flight requests after the
	// listeners close; requests still running then are cut. Zero: no wait.
	DrainTimeout time.Duration
	// MaxInFlight caps the requests each route serves at once; past it a
	// request gets 429 with Retry-After (inFlightLimit). Zero: no cap.
	MaxInFlight int
	// ClientCAs, when set, makes the HTTPS listener require a client
	// certificate signed by one of them (the API server's webhook client
	// and kube-scheduler's extender client present one when configured).
	// The health listener never asks for one.
	ClientCAs *x509.CertPool
}

// MaxBodyBytes caps every request body on the HTTPS listener. The webhook
// transport has its own, smaller limit (the API server's 7 MiB object cap)
// and answers 413 itself; this outer cap only stops a stream that never ends.
const MaxBodyBytes = 8 << 20

// Server runs both listeners.
type Server struct {
	secure, health *http.Server

	delay, drainTimeout time.Duration
	// stopping is Run's ctx.Done(), so /readyz fails from the moment the
	// context ends, before the shutdown goroutine has even woken up.
	stopping <-chan struct{}
	// after is time.After; tests end the delay with a channel instead.
	after func(time.Duration) <-chan time.Time
}

// New checks cfg and builds the server; it listens only in Run.
func New(cfg Config) (*Server, error) {
	if cfg.Certificates == nil {
		return nil, errors.New("server: no certificate source")
	}
	if cfg.SecureAddr == "" || cfg.HealthAddr == "" {
		return nil, errors.New("server: both listen addresses are required")
	}
	if cfg.Gatherer == nil || cfg.Registerer == nil {
		return nil, errors.New("server: a metrics registry is required")
	}
	if cfg.ShutdownDelay < 0 || cfg.DrainTimeout < 0 {
		return nil, errors.New("server: negative shutdown delay or drain timeout")
	}
	s := &Server{delay: cfg.ShutdownDelay, drainTimeout: cfg.DrainTimeout, after: time.After}
	metrics := newRequestMetrics()
	if cfg.MaxInFlight < 0 {
		return nil, errors.New("server: negative in-flight cap")
	}
	reconnect := newReconnector(cfg.Certificates)
	router, err := secureRouter(cfg.Parts, cfg.MaxInFlight, metrics, reconnect)
	if err != nil {
		return nil, err
	}
	if err := metrics.register(cfg.Registerer); err != nil {
		return nil, err
	}
	tlsConfig := certs.TLSConfig(cfg.Certificates, cfg.ClientCAs)
	tlsConfig.GetCertificate = reconnect.GetCertificate
	s.secure = &http.Server{
		Addr:              cfg.SecureAddr,
		Handler:           s.closeWhenStopping(http.MaxBytesHandler(router, MaxBodyBytes)),
		TLSConfig:         tlsConfig,
		ConnContext:       connContext,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    1 << 20,
		Protocols:         secureProtocols(cfg.HTTP2),
		ConnState: func(c net.Conn, state http.ConnState) {
			metrics.countConnections(c, state)
			reconnect.forget(c, state)
		},
		ErrorLog: newErrorLog("https"),
	}
	s.health = &http.Server{
		Addr:              cfg.HealthAddr,
		Handler:           healthRouter(cfg, Check{Name: "shutdown", Check: s.notStopping}),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		MaxHeaderBytes:    1 << 16,
		ErrorLog:          newErrorLog("health"),
	}
	return s, nil
}

// secureProtocols is HTTP/1.1, and HTTP/2 when http2 is set.
//
// kube-apiserver calls webhooks through a client-go transport, which speaks
// HTTP/2 when the server offers it and otherwise keeps at most 25 idle
// HTTP/1.1 connections per webhook host: whenever more than 25 admission
// calls are in flight at once, each call beyond them opens a new TLS
// connection, and the connections beyond 25 are closed again once
// answered. Calls in flight are the create rate times the admission
// latency, so a loaded API server gets there in bursts during a rollout.
// Over HTTP/2 all calls share one connection. Go's HTTP/2 server (at most
// 250 streams a connection, its default) carries the mitigations for the
// rapid-reset attacks (CVE-2023-44487) that made many webhooks turn
// HTTP/2 off.
func secureProtocols(http2 bool) *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetHTTP2(http2)
	return p
}

// secureRouter mounts every part's routes, each instrumented under its
// path and, with maxInFlight > 0, capped in flight (the refusals are
// timed too, as code 429). Two parts claiming one path, or a path that is
// not absolute, is a wiring mistake and an error.
func secureRouter(parts []Routes, maxInFlight int, m *requestMetrics, reconnect *reconnector) (http.Handler, error) {
	router := mux.NewRouter()
	seen := make(map[string]bool)
	for _, routes := range parts {
		for path, h := range routes {
			switch {
			case !strings.HasPrefix(path, "/"):
				return nil, fmt.Errorf("server: route %q is not an absolute path", path)
			case h == nil:
				return nil, fmt.Errorf("server: route %s has no handler", path)
			case seen[path]:
				return nil, fmt.Errorf("server: route %s is claimed twice", path)
			}
			seen[path] = true
			if maxInFlight > 0 {
				h = newInFlightLimit(path, maxInFlight, m.refused).wrap(h)
			}
			h = reconnect.wrap(h, m.reconnects.WithLabelValues(path))
			router.Handle(path, m.instrument(path, h)).Methods(http.MethodPost)
		}
	}
	router.NotFoundHandler = m.instrument("other", http.NotFoundHandler())
	router.MethodNotAllowedHandler = m.instrument("other", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "only POST is allowed here", http.StatusMethodNotAllowed)
	}))
	return router, nil
}

// Handler is the HTTPS listener's handler chain (body cap, routes, caps,
// metrics), for in-process tests of the wired routes.
func (s *Server) Handler() http.Handler { return s.secure.Handler }

// errShuttingDown is what /readyz reports once Run's context has ended.
var errShuttingDown = errors.New("shutting down")

func (s *Server) notStopping() error {
	select {
	case <-s.stopping:
		return errShuttingDown
	default:
		return nil
	}
}

func healthRouter(cfg Config, stopping Check) http.Handler {
	router := mux.NewRouter()
	router.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	checks := append([]Check{stopping, {Name: "certificate", Check: cfg.Certificates.Healthy}}, cfg.Ready...)
	router.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		var failed []byte
		for _, c := range checks {
			if err := c.Check(); err != nil {
				failed = fmt.Appendf(failed, "[-]%s: %v\n", c.Name, err)
			}
		}
		if failed != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write(failed)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	router.Handle("/metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	if cfg.Profiling {
		router.HandleFunc("/debug/pprof/", pprof.Index)
		router.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		router.HandleFunc("/debug/pprof/profile", pprof.Profile)
		router.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		router.HandleFunc("/debug/pprof/trace", pprof.Trace)
		router.PathPrefix("/debug/pprof/").HandlerFunc(pprof.Index)
	}
	return router
}

// Run listens on both addresses and serves until ctx ends, then shuts down
// in three steps (see shutdown). A listener that fails to start or dies
// stops both, without the delay.
func (s *Server) Run(ctx context.Context) error {
	secureLn, err := net.Listen("tcp", s.secure.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.secure.Addr, err)
	}
	healthLn, err := net.Listen("tcp", s.health.Addr)
	if err != nil {
		_ = secureLn.Close()
		return fmt.Errorf("listen on %s: %w", s.health.Addr, err)
	}
	return s.serve(ctx, secureLn, healthLn)
}

func (s *Server) serve(ctx context.Context, secureLn, healthLn net.Listener) error {
	// Set before the listeners serve, so every probe handler sees it.
	s.stopping = ctx.Done()
	errs := make(chan error, 2)
	go func() { errs <- s.secure.ServeTLS(secureLn, "", "") }()
	go func() { errs <- s.health.Serve(healthLn) }()
	klog.InfoS("Serving", "https", secureLn.Addr().String(), "health", healthLn.Addr().String())

	select {
	case <-ctx.Done():
		return s.shutdown(errs)
	case err := <-errs:
		// One listener is gone: this replica is broken, exit now so it
		// restarts, letting in-flight requests on the other one finish.
		runErr := fmt.Errorf("listener stopped: %w", err)
		return errors.Join(runErr, s.drain(time.Now()))
	}
}

// shutdown is what a SIGTERM starts. Endpoints stop routing to a pod only
// some time after it starts terminating, and the API server and
// kube-scheduler call the webhooks and the extender until then: closing the
// listeners at once would fail those calls (webhooks with failurePolicy
// Fail refuse the object). So:
//
//  1. /readyz fails at once (notStopping), /healthz stays ok;
//  2. both listeners keep serving for the delay, while endpoints drop this
//     replica;
//  3. the listeners close and in-flight requests get up to the drain
//     timeout to finish.
func (s *Server) shutdown(errs <-chan error) error {
	start := time.Now()
	klog.InfoS("Shutting down: /readyz fails, still serving until endpoints drop this replica", "delay", s.delay)
	// Clients that keep a connection open (the API server does, over
	// HTTP/1.1 keep-alive for webhooks) go on using this replica after the
	// endpoints drop it, since kube-proxy's connection tracking keeps an
	// open connection on the pod it chose. closeWhenStopping answers them
	// with Connection: close, so each reconnects through the Service after
	// its next call. Idle connections are not closed here: a client may be
	// sending on one at that very moment (http.Server's
	// SetKeepAlivesEnabled(false) does close them, and with the API server
	// reusing its pool at 60 admissions/s, a replica's stop failed 1 to 6
	// admissions each time on the real node, e2e/realnode).
	select {
	case <-s.after(s.delay):
	case err := <-errs:
		return errors.Join(fmt.Errorf("listener stopped: %w", err), s.drain(start))
	}
	return s.drain(start)
}

// closeWhenStopping answers with "Connection: close" once shutdown has
// begun (over HTTP/2, Go's server turns that into a GOAWAY), so a client
// leaves this replica after a call that succeeded rather than by a call
// that fails.
func (s *Server) closeWhenStopping(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.notStopping() != nil {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

// drain closes both listeners and waits up to the drain timeout for
// in-flight requests; requests still running then are cut.
func (s *Server) drain(start time.Time) error {
	drainStart := time.Now()
	klog.InfoS("Draining in-flight requests", "timeout", s.drainTimeout, "afterDelay", drainStart.Sub(start))
	ctx, cancel := context.WithTimeout(context.Background(), s.drainTimeout)
	defer cancel()
	var errs []error
	// The HTTPS listener first: the kubelet may still probe the health one.
	for _, srv := range []struct {
		name string
		*http.Server
	}{{"https", s.secure}, {"health", s.health}} {
		if err := srv.Shutdown(ctx); err != nil {
			klog.ErrorS(err, "Drain did not finish, cutting the requests still running", "server", srv.name, "timeout", s.drainTimeout)
			_ = srv.Close()
			errs = append(errs, fmt.Errorf("shut down %s server: %w", srv.name, err))
		}
	}
	klog.InfoS("HTTP servers stopped", "drain", time.Since(drainStart), "total", time.Since(start))
	return errors.Join(errs...)
}
