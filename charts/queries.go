// Package charts reads the PromQL of the everynode chart's alerts and
// Grafana dashboard (everynode/files) and the metric names it selects, so
// checks can hold those names against the metrics the binary registers
// (cmd/everynode, a unit test) and the ones a running everynode exports
// (e2e, a scrape). Both checks read the queries here, so they cannot
// disagree on what the chart names.
//
// The files are embedded: a check compiled from a checkout reads that
// checkout's chart, wherever the test runs.
package charts

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"
)

//go:embed everynode/values.yaml everynode/files/prometheusrule.yaml everynode/files/dashboard.json
var chart embed.FS

// Rule is one alerting or recording rule of files/prometheusrule.yaml.
type Rule struct {
	Alert, Record, Expr, For string
	Labels, Annotations      map[string]string
}

// Query is one PromQL expression of the chart and where it is, e.g.
// `alert EverynodeLeaderMissing` or `panel "Leader" target A`.
type Query struct {
	Where, Expr string
}

// Values returns the chart's default values (values.yaml).
func Values() (map[string]any, error) {
	var values map[string]any
	if err := yaml.Unmarshal(read("values.yaml"), &values); err != nil {
		return nil, fmt.Errorf("values.yaml: %w", err)
	}
	return values, nil
}

// Rules renders files/prometheusrule.yaml as the chart's tpl does, with the
// chart's default values and release name everynode, and returns its rules.
// A rule without expr, or with neither or both of alert and record, and an
// alert without for, a severity label or a summary, is an error.
func Rules() ([]Rule, error) {
	values, err := Values()
	if err != nil {
		return nil, err
	}
	tmpl, err := template.New("prometheusrule.yaml").Option("missingkey=error").Funcs(template.FuncMap{
		"include": func(name string, _ any) (string, error) {
			if name == "everynode.fullname" {
				return "everynode", nil
			}
			return "", fmt.Errorf("package charts knows no template %q", name)
		},
	}).Parse(string(read("files/prometheusrule.yaml")))
	if err != nil {
		return nil, fmt.Errorf("files/prometheusrule.yaml must use plain template actions and include only: %w", err)
	}
	var out bytes.Buffer
	data := map[string]any{"Values": values, "Release": map[string]any{"Name": "everynode", "Namespace": "everynode-system"}}
	if err := tmpl.Execute(&out, data); err != nil {
		return nil, fmt.Errorf("render files/prometheusrule.yaml: %w", err)
	}
	var spec struct {
		Groups []struct {
			Name  string
			Rules []Rule
		}
	}
	if err := yaml.UnmarshalStrict(out.Bytes(), &spec); err != nil {
		return nil, fmt.Errorf("rendered files/prometheusrule.yaml: %w\n%s", err, out.String())
	}
	var rules []Rule
	var errs []error
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			if r.Expr == "" || (r.Alert == "") == (r.Record == "") {
				errs = append(errs, fmt.Errorf("group %s: a rule needs expr and one of alert or record: %+v", g.Name, r))
			}
			if r.Alert != "" && (r.For == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "") {
				errs = append(errs, fmt.Errorf("alert %s: want for, a severity label and a summary", r.Alert))
			}
			rules = append(rules, r)
		}
	}
	return rules, errors.Join(errs...)
}

// DashboardQueries returns every PromQL query of files/dashboard.json: panel
// targets (rows' nested panels included) and query variables, the
// label_values(...) of a variable reduced to its series selector.
func DashboardQueries() ([]Query, error) {
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
	if err := json.Unmarshal(read("files/dashboard.json"), &dash); err != nil {
		return nil, fmt.Errorf("files/dashboard.json: %w", err)
	}
	var queries []Query
	var walk func([]json.RawMessage) error
	walk = func(raws []json.RawMessage) error {
		for _, raw := range raws {
			var p panel
			if err := json.Unmarshal(raw, &p); err != nil {
				return fmt.Errorf("files/dashboard.json panel: %w", err)
			}
			for _, target := range p.Targets {
				queries = append(queries, Query{fmt.Sprintf("panel %q target %s", p.Title, target.RefID), target.Expr})
			}
			if err := walk(p.Panels); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(dash.Panels); err != nil {
		return nil, err
	}
	labelValues := regexp.MustCompile(`^\s*label_values\((.+),\s*[a-zA-Z_]\w*\s*\)\s*$`)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		// Grafana writes a query variable's query as an object or, in
		// older dashboards, as a plain string.
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q); err != nil {
			if err := json.Unmarshal(v.Query, &q.Query); err != nil {
				return nil, fmt.Errorf("files/dashboard.json variable %s: %w", v.Name, err)
			}
		}
		expr := q.Query
		if m := labelValues.FindStringSubmatch(expr); m != nil {
			expr = m[1]
		}
		queries = append(queries, Query{"variable " + v.Name, expr})
	}
	return queries, nil
}

// RuleQueries returns the expression of every rule of Rules.
func RuleQueries() ([]Query, error) {
	rules, err := Rules()
	if err != nil {
		return nil, err
	}
	queries := make([]Query, 0, len(rules))
	for _, r := range rules {
		queries = append(queries, Query{"alert " + r.Alert + r.Record, r.Expr})
	}
	return queries, nil
}

// AllQueries returns the queries of the rules and of the dashboard, the
// ones the checks hold to the exported metrics. Fewer than 8 rules or 10
// dashboard queries is an error: the files changed shape, and a parse
// that finds little would check little.
func AllQueries() ([]Query, error) {
	rules, err := RuleQueries()
	if err != nil {
		return nil, err
	}
	dash, err := DashboardQueries()
	if err != nil {
		return nil, err
	}
	if len(rules) < 8 || len(dash) < 10 {
		return nil, fmt.Errorf("found %d rules and %d dashboard queries, want at least 8 and 10: have the chart's files changed shape?", len(rules), len(dash))
	}
	return append(rules, dash...), nil
}

// External are the metrics the chart's queries may name that another
// exporter (kube-state-metrics, the kubelet, Prometheus itself) provides,
// each with the reason the chart needs it: the checks take them as
// exported. None today: everynode exports its sets' status itself
// (controller.SetStatusCollector), as kube-state-metrics does not see them.
var External = map[string]string{}

// Unknown returns, for every query, the metric names it selects that
// exported rejects and that are not External, each as "<where> names
// <metric> (expr ...)", and the set of every name the queries select. A
// query that selects no name at all is reported too: a parse that finds
// nothing checks nothing.
func Unknown(queries []Query, exported func(name string) bool) (problems []string, used map[string]bool) {
	used = map[string]bool{}
	for _, q := range queries {
		names := MetricNames(q.Expr)
		if len(names) == 0 {
			problems = append(problems, fmt.Sprintf("%s: found no metric name in %q", q.Where, q.Expr))
		}
		for _, name := range names {
			used[name] = true
			if _, external := External[name]; !external && !exported(name) {
				problems = append(problems, fmt.Sprintf("%s names %s (expr %q)", q.Where, name, q.Expr))
			}
		}
	}
	return problems, used
}

// Registered reports whether a query may name name when only the names of
// the registered metric families are known (their descriptions, not their
// types): name is one, or is name_bucket, name_sum or name_count of one,
// the series of a histogram or summary. It cannot tell a counter's
// x_bucket from a histogram's; a scrape, which lists series, can.
func Registered(families map[string]bool, name string) bool {
	if families[name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && families[base] {
			return true
		}
	}
	return false
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

// MetricNames returns the metric names an expression selects: the
// identifiers left once strings, label matchers, ranges, grouping label
// lists, function calls and keywords are taken out. It errs on the side of
// reporting (an unknown identifier fails a check), never of missing one.
func MetricNames(expr string) []string {
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

// read returns a file of the chart; the embed directive guarantees it.
func read(name string) []byte {
	b, err := chart.ReadFile("everynode/" + name)
	if err != nil {
		panic(err)
	}
	return b
}
