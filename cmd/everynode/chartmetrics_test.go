package main

import (
	"context"
	"crypto/tls"
	"regexp"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/cache"

	"everynode.io/everynode/certs"
	"everynode.io/everynode/charts"
	everynodelisters "everynode.io/everynode/client/listers/everynode/v1alpha1"
	"everynode.io/everynode/server"
)

// The chart's alerts and dashboard (charts/everynode/files) query metrics by
// name. This reads every PromQL expression of both (package charts renders
// the rules as the chart does) and checks that each metric they name is
// registered by the binary, in the registry serve builds: a metric renamed
// or dropped in Go fails here instead of leaving an alert that never fires.
// e2e's TestChartMetricsAreExported checks the same names against a
// running everynode's /metrics.
func TestChartQueriesNameRegisteredMetrics(t *testing.T) {
	registered := registeredMetricNames(t)
	for _, name := range []string{"everynode_leader", "everynode_daemonset_status_desired_number_scheduled",
		"everynode_controller_pods_created_total", "everynode_http_request_duration_seconds", "go_goroutines"} {
		if !registered[name] {
			t.Fatalf("the registry lacks %s: is registeredMetricNames still building serve's registry?", name)
		}
	}

	queries, err := charts.AllQueries()
	if err != nil {
		t.Fatal(err)
	}
	problems, used := charts.Unknown(queries, func(name string) bool { return charts.Registered(registered, name) })
	for _, p := range problems {
		t.Errorf("%s, which everynode does not register", p)
	}
	if !t.Failed() {
		t.Logf("%d queries name %d metrics, all registered", len(queries), len(used))
	}
}

// registeredMetricNames builds the registry as serve does (newRegistry, the
// parts' registerMetrics, the server's request metrics) and returns the
// name of every metric registered with it, from the collectors'
// descriptions, so vectors without children count too.
func registeredMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	reg := newRegistry()
	rec := &recordingRegisterer{Registerer: reg}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	registerMetrics(rec, everynodelisters.NewDaemonSetLister(indexer), func() float64 { return 0 })
	if _, err := server.New(server.Config{
		SecureAddr: "127.0.0.1:0", HealthAddr: "127.0.0.1:0",
		Certificates: noCertificates{}, Gatherer: reg, Registerer: rec,
	}); err != nil {
		t.Fatal(err)
	}

	names := map[string]bool{}
	fqName := regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)
	descs := make(chan *prometheus.Desc, 1000)
	for _, c := range rec.collectors {
		c.Describe(descs)
	}
	close(descs)
	for d := range descs {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		names[m[1]] = true
	}
	// The Go and process collectors, registered by newRegistry itself.
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		names[mf.GetName()] = true
	}
	return names
}

type recordingRegisterer struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registerer.Register(c)
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

type noCertificates struct{}

func (noCertificates) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return nil, certs.ErrNoCertificate
}
func (noCertificates) Start(context.Context) error { return nil }
func (noCertificates) Healthy() error              { return certs.ErrNoCertificate }
