package e2e

import (
	"errors"
	"testing"
	"time"

	"everynode.io/everynode/takeover"
)

// kube-controller-manager's DaemonSet controller runs in this cluster (the
// e2e cluster runs it with every controller), so the takeover probe must
// find it: this is what keeps `everynode serve --takeover` from running a
// second controller over the same apps/v1 sets. (The other half, no
// answer with --controllers=*,-daemonset-controller, is `make
// conformance`'s: everynode takes over there only after the probe found
// nobody.)
func TestTakeoverProbeFindsKubeControllerManager(t *testing.T) {
	ns := newNamespace(t)
	p := &takeover.Probe{Client: kube, Namespace: ns, Timeout: 20 * time.Second}
	// Twice: once for a new probe, once for a probe moved to a new
	// generation, which is what every later check does.
	for round := 1; round <= 2; round++ {
		start := time.Now()
		err := p.Check(ctx(t))
		var other *takeover.ErrOtherController
		if !errors.As(err, &other) {
			t.Fatalf("round %d: Check = %v after %s; want kube-controller-manager's DaemonSet controller found", round, err, time.Since(start).Round(time.Millisecond))
		}
		t.Logf("round %d: %v", round, err)
	}
}
