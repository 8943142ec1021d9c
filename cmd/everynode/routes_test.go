package main

import (
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/cache"

	everynodelisters "everynode.io/everynode/client/listers/everynode/v1alpha1"
	"everynode.io/everynode/extender"
	"everynode.io/everynode/extender/schedconfig"
	"everynode.io/everynode/webhook"

	corev1listers "k8s.io/client-go/listers/core/v1"
)

// The route paths are defined in Go, by the part that serves them. The
// chart must name them too (webhook clientConfigs, the second scheduler's
// extender entry); this holds it to the Go definitions, so a path changed
// in one place fails here instead of in a cluster.
func TestChartNamesTheServedRoutes(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	hooks, err := webhook.Routes(webhook.Config{
		ControllerUsername: "system:serviceaccount:ns:everynode",
		Nodes:              corev1listers.NewNodeLister(indexer),
		Sets:               everynodelisters.NewDaemonSetLister(indexer),
	})
	if err != nil {
		t.Fatal(err)
	}

	webhooks := readChart(t, "templates/webhooks.yaml")
	var inChart []string
	for _, m := range regexp.MustCompile(`"path" "([^"]+)"`).FindAllStringSubmatch(webhooks, -1) {
		inChart = append(inChart, m[1])
	}
	if len(inChart) == 0 {
		t.Fatal("found no webhook paths in the chart: has the template changed shape?")
	}
	for _, p := range inChart {
		if _, ok := hooks[p]; !ok {
			t.Errorf("the chart's webhooks call %s, which everynode does not serve (it serves %v)", p, sortedKeys(hooks))
		}
	}
	for p := range hooks {
		if !slices.Contains(inChart, p) {
			t.Errorf("everynode serves %s but no webhook in the chart calls it", p)
		}
	}

	helpers := readChart(t, "templates/_helpers.tpl")
	if want := `printf "%s` + extender.PathPrefix + `"`; !strings.Contains(helpers, want) {
		t.Errorf("the chart's scheduler config does not build urlPrefix as %s", want)
	}
	for _, verb := range []string{schedconfig.FilterVerb, schedconfig.PreemptVerb} {
		if !strings.Contains(helpers, "Verb: "+verb+"\n") {
			t.Errorf("the chart's scheduler config lacks the verb %s", verb)
		}
	}
	// Served for configurations written before it was dropped, but no
	// longer configured: each verb is one more timeout per pod while
	// everynode hangs.
	if strings.Contains(helpers, "prioritizeVerb:") {
		t.Error("the chart's scheduler config names the prioritize verb")
	}
}

func readChart(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../charts/everynode/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sortedKeys(m map[string]http.Handler) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
