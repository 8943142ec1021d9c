package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
)

// The controller asks its write fence (controller.WithWriteFence) once
// before each batch of pod writes. That leaves a window: a leader stopped
// (SIGSTOP, a frozen VM) between the check and a request sends the request
// when it wakes, on a view a lease old, while another replica leads. The
// soak caught it: a pod created twice on one node, 30 ms after the old
// leader woke (e2e/soak/results/README.md, the second 60-minute run). So
// the controller's own client asks the fence again for every pod write, as
// the request leaves: a process that wakes mid-batch is refused at its
// next request, not after the batch. A request already handed to the
// kernel when the process stopped is past any client-side check; the API
// server's fence (the chart's leader-fence.yaml) refuses that one.

// writeFence is the fence the controller's client asks before each
// write isFencedWrite names (pods first among them): nil until runController sets it (and always without leader
// election, where nothing else can lead).
type writeFence struct {
	fence atomic.Pointer[func() error]
}

// set makes f the fence of every later pod write.
func (p *writeFence) set(f func() error) { p.fence.Store(&f) }

// check is nil when a pod write may go out.
func (p *writeFence) check() error {
	if f := p.fence.Load(); f != nil {
		return (*f)()
	}
	return nil
}

// wrap returns rt with the fence asked before each pod write.
func (p *writeFence) wrap(rt http.RoundTripper) http.RoundTripper {
	return &fencedTransport{fence: p, next: rt}
}

type fencedTransport struct {
	fence *writeFence
	next  http.RoundTripper
}

func (t *fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if isFencedWrite(req) {
		if err := t.fence.check(); err != nil {
			// client-go does not retry a write that failed before a
			// response, so the request is dropped, not delayed.
			return nil, fmt.Errorf("%s %s refused by the write fence: %w", req.Method, req.URL.Path, err)
		}
	}
	return t.next.RoundTrip(req)
}

// isFencedWrite tells a request that changes what the controller
// reconciles from its view: a pod or its subresources (status, eviction,
// resize, binding), a node (the startup taint), a set's status (either
// kind), a ControllerRevision. A replica that woke past its Lease judges
// all of them from a view a lease old: the soak saw one write a set's
// status from before its stop right after it woke
// (e2e/soak/results/README.md). Reads and watches
// go out unfenced, as do the Lease, the events, the takeover's lock and
// probe (they clean up after a term) and the sets themselves.
func isFencedWrite(req *http.Request) bool {
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		return false
	}
	// [prefix...] api v1 [namespaces <ns>] <resource> [name [subresource]]
	// or [prefix...] apis <group> <version> [namespaces <ns>] <resource> ...;
	// a kubeconfig's server may carry a path prefix.
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	for i, p := range parts {
		var rest []string
		switch {
		case p == "api" && i+1 < len(parts):
			rest = parts[i+2:]
		case p == "apis" && i+2 < len(parts):
			rest = parts[i+3:]
		default:
			continue
		}
		if len(rest) >= 2 && rest[0] == "namespaces" {
			rest = rest[2:]
		}
		if len(rest) == 0 {
			return false
		}
		switch rest[0] {
		case "pods", "nodes", "controllerrevisions":
			return true
		case "daemonsets":
			return len(rest) >= 3 && rest[2] == "status"
		}
		return false
	}
	return false
}
