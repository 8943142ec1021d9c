package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

// gaugeController records everynode_leader while it runs.
type gaugeController struct {
	started atomic.Bool
	during  atomic.Value // float64
}

func (g *gaugeController) Run(ctx context.Context, _ int) error {
	g.during.Store(testutil.ToFloat64(leaderGauge))
	g.started.Store(true)
	<-ctx.Done()
	return nil
}

// everynode_leader is 1 while the controller runs, with and without leader
// election, and 0 once it has returned.
func TestLeaderGauge(t *testing.T) {
	for _, elect := range []bool{false, true} {
		leaderGauge.Set(0)
		o := defaultServeOptions()
		o.namespace = "everynode-system"
		o.leaderElect = elect
		o.leaseDuration, o.renewDeadline, o.retryPeriod = 400*time.Millisecond, 300*time.Millisecond, 50*time.Millisecond
		g := &gaugeController{}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- runController(ctx, o, &clients{kube: kubefake.NewClientset()},
				func(context.Context) (controllerRunner, error) { return g, nil })
		}()
		waitUntil(t, "the controller to start", g.started.Load)
		if got := g.during.Load().(float64); got != 1 {
			t.Errorf("leader election %v: everynode_leader %v while the controller runs, want 1", elect, got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("runController: %v", err)
		}
		if got := testutil.ToFloat64(leaderGauge); got != 0 {
			t.Errorf("leader election %v: everynode_leader %v after the controller returned, want 0", elect, got)
		}
	}
}
