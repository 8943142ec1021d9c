package controller

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/tools/cache"
)

func TestRegisterMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	RegisterMetrics(reg)
	RegisterMetrics(reg) // idempotent

	f := newFixture(t)
	addNodes(f, 2)
	ds := newSet("agent")
	f.add(ds)
	before := counterValue(t, podsCreated.WithLabelValues("success"))
	f.mustSync(ds)
	if got := counterValue(t, podsCreated.WithLabelValues("success")) - before; got != 2 {
		t.Errorf("pods_created_total grew by %v, want 2", got)
	}
	f.queue.Add(cache.MetaObjectToName(ds))
	f.c.processNextWorkItem(f.ctx)

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range families {
		have[mf.GetName()] = true
	}
	for _, name := range []string{
		"everynode_controller_sync_duration_seconds",
		"everynode_controller_pods_created_total",
		"everynode_workqueue_depth",
		"everynode_workqueue_adds_total",
	} {
		if !have[name] {
			t.Errorf("metric %s not gathered (have %v)", name, have)
		}
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
