package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"everynode.io/everynode/certs"
	everynodelisters "everynode.io/everynode/client/listers/everynode/v1alpha1"
	"everynode.io/everynode/server"
)

// The chart's alerts and dashboard (charts/everynode/files) query metrics by
// name. This renders the rules as the chart does, reads every PromQL
// expression of both, and checks that each metric they name is registered
// by the binary, in the registry serve builds: a metric renamed or dropped
// in Go fails here instead of leaving an alert that never fires.
func TestChartQueriesNameRegisteredMetrics(t *testing.T) {
	registered := registeredMetricNames(t)
	for _, name := range []string{"everynode_leader", "everynode_daemonset_status_desired_number_scheduled",
		"everynode_controller_pods_created_total", "everynode_http_request_duration_seconds", "go_goroutines"} {
		if !registered[name] {
			t.Fatalf("the registry lacks %s: is registeredMetricNames still building serve's registry?", name)
		}
	}

	exprs := map[string]string{} // where -> PromQL
	for _, r := range chartRules(t) {
		exprs["alert "+r.Alert+r.Record] = r.Expr
	}
	if len(exprs) < 8 {
		t.Fatalf("found %d rules in files/prometheusrule.yaml, want at least 8: has the file changed shape?", len(exprs))
	}
	n := len(exprs)
	for where, e := range dashboardQueries(t) {
		exprs[where] = e
	}
	if len(exprs)-n < 10 {
		t.Fatalf("found %d queries in files/dashboard.json, want at least 10: has the file changed shape?", len(exprs)-n)
	}

	used := map[string]bool{}
	for where, expr := range exprs {
		names := promQLMetricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: found no metric name in %q", where, expr)
		}
		for _, name := range names {
			used[name] = true
			if !isRegistered(registered, name) {
				t.Errorf("%s names %s, which everynode does not register (expr %q)", where, name, expr)
			}
		}
	}
	if !t.Failed() {
		t.Logf("%d queries name %d metrics, all registered", len(exprs), len(used))
	}
}

// isRegistered: name is registered, or is a histogram's series of one.
func isRegistered(registered map[string]bool, name string) bool {
	if registered[name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && registered[base] {
			return true
		}
	}
	return false
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

type chartRule struct {
	Alert, Record, Expr, For string
	Labels, Annotations      map[string]string
}

// chartRules renders files/prometheusrule.yaml as the chart's tpl does,
// with the chart's default values, and returns its rules.
func chartRules(t *testing.T) []chartRule {
	t.Helper()
	var values map[string]any
	if err := yaml.Unmarshal([]byte(readChart(t, "values.yaml")), &values); err != nil {
		t.Fatal(err)
	}
	tmpl, err := template.New("prometheusrule.yaml").Option("missingkey=error").Funcs(template.FuncMap{
		"include": func(name string, _ any) (string, error) {
			if name == "everynode.fullname" {
				return "everynode", nil
			}
			return "", fmt.Errorf("the test knows no template %q", name)
		},
	}).Parse(readChart(t, "files/prometheusrule.yaml"))
	if err != nil {
		t.Fatalf("files/prometheusrule.yaml must use plain template actions and include only: %v", err)
	}
	var out bytes.Buffer
	data := map[string]any{"Values": values, "Release": map[string]any{"Name": "everynode", "Namespace": "everynode-system"}}
	if err := tmpl.Execute(&out, data); err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Groups []struct {
			Name  string
			Rules []chartRule
		}
	}
	if err := yaml.UnmarshalStrict(out.Bytes(), &spec); err != nil {
		t.Fatalf("rendered rules: %v\n%s", err, out.String())
	}
	var rules []chartRule
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			if r.Expr == "" || (r.Alert == "") == (r.Record == "") {
				t.Errorf("group %s: a rule needs expr and one of alert or record: %+v", g.Name, r)
			}
			if r.Alert != "" && (r.For == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "") {
				t.Errorf("alert %s: want for, a severity label and a summary", r.Alert)
			}
			rules = append(rules, r)
		}
	}
	return rules
}

// dashboardQueries returns every PromQL query of files/dashboard.json:
// panel targets (rows' nested panels included) and query variables.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	type panel struct {
		Title   string
		Targets []struct{ RefID, Expr string }
		Panels  []json.RawMessage
	}
	var dash struct {
		Panels     []json.RawMessage
		Templating struct {
			List []struct {
				Name, Type string
				Query      json.RawMessage
			}
		}
	}
	if err := json.Unmarshal([]byte(readChart(t, "files/dashboard.json")), &dash); err != nil {
		t.Fatalf("files/dashboard.json: %v", err)
	}
	queries := map[string]string{}
	var walk func([]json.RawMessage)
	walk = func(raws []json.RawMessage) {
		for _, raw := range raws {
			var p panel
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatalf("files/dashboard.json panel: %v", err)
			}
			for _, target := range p.Targets {
				queries[fmt.Sprintf("panel %q target %s", p.Title, target.RefID)] = target.Expr
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	labelValues := regexp.MustCompile(`^\s*label_values\((.+),\s*[a-zA-Z_]\w*\s*\)\s*$`)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q); err != nil {
			if err := json.Unmarshal(v.Query, &q.Query); err != nil {
				t.Fatalf("variable %s: %v", v.Name, err)
			}
		}
		expr := q.Query
		if m := labelValues.FindStringSubmatch(expr); m != nil {
			expr = m[1]
		}
		queries["variable "+v.Name] = expr
	}
	return queries
}

var (
	promQLStrings   = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promQLVariables = regexp.MustCompile(`\$\{\w+(?::\w+)?\}|\$\w+`)
	promQLMatchers  = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promQLGrouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promQLOffset    = regexp.MustCompile(`\boffset\s+-?\w+`)
	promQLToken     = regexp.MustCompile(`[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?|[a-zA-Z_:][a-zA-Z0-9_:]*|\S`)
	promQLKeywords  = []string{"and", "or", "unless", "bool", "by", "without", "on", "ignoring",
		"group_left", "group_right", "offset", "inf", "nan", "Inf", "NaN", "atan2"}
)

// promQLMetricNames returns the metric names an expression selects: the
// identifiers left once strings, label matchers, ranges, grouping label
// lists, function calls and keywords are taken out. It errs on the side of
// reporting (an unknown identifier fails the test), never of missing one.
func promQLMetricNames(expr string) []string {
	s := promQLStrings.ReplaceAllString(expr, `""`)
	s = promQLVariables.ReplaceAllString(s, "1")
	s = promQLMatchers.ReplaceAllString(s, " ")
	s = promQLGrouping.ReplaceAllString(s, " ")
	s = promQLOffset.ReplaceAllString(s, " ")
	tokens := promQLToken.FindAllString(s, -1)
	var names []string
	for i, tok := range tokens {
		c := tok[0]
		if !(c == '_' || c == ':' || (c|0x20 >= 'a' && c|0x20 <= 'z')) {
			continue
		}
		if i+1 < len(tokens) && tokens[i+1] == "(" { // a function or aggregation
			continue
		}
		if slices.Contains(promQLKeywords, tok) || slices.Contains(names, tok) {
			continue
		}
		names = append(names, tok)
	}
	return names
}

func TestPromQLMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (namespace, name) (rate(a_total{job="x", le=~"b{c}"}[5m])) / on (name) group_left (team) b_info`: {"a_total", "b_info"},
		`histogram_quantile(0.99, sum by (le) (rate(h_bucket{job=~"$job"}[$__rate_interval]))) > 1e-3`:           {"h_bucket"},
		`(sum(up) < 1) or absent(x{job="j"}) unless c offset 5m`:                                                 {"up", "x", "c"},
		`max without (pod) (g) == bool 1 and sum (g) by (ns)`:                                                    {"g"},
		`everynode_leader`: {"everynode_leader"},
		`count(max by (namespace, name, reason) (m{type="Progressing"}))`: {"m"},
	} {
		if got := promQLMetricNames(expr); !slices.Equal(got, want) {
			t.Errorf("promQLMetricNames(%q) = %v, want %v", expr, got, want)
		}
	}
}
