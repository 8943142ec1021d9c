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

// podWriteFence is the fence the controller's client asks before each pod
// write: nil until runController sets it (and always without leader
// election, where nothing else can lead).
type podWriteFence struct {
	fence atomic.Pointer[func() error]
}

// set makes f the fence of every later pod write.
func (p *podWriteFence) set(f func() error) { p.fence.Store(&f) }

// check is nil when a pod write may go out.
func (p *podWriteFence) check() error {
	if f := p.fence.Load(); f != nil {
		return (*f)()
	}
	return nil
}

// wrap returns rt with the fence asked before each pod write.
func (p *podWriteFence) wrap(rt http.RoundTripper) http.RoundTripper {
	return &fencedTransport{fence: p, next: rt}
}

type fencedTransport struct {
	fence *podWriteFence
	next  http.RoundTripper
}

func (t *fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if isPodWrite(req) {
		if err := t.fence.check(); err != nil {
			// client-go does not retry a write that failed before a
			// response, so the request is dropped, not delayed.
			return nil, fmt.Errorf("%s %s refused by the write fence: %w", req.Method, req.URL.Path, err)
		}
	}
	return t.next.RoundTrip(req)
}

// isPodWrite tells a request that changes a pod or its subresources
// (status, eviction, resize, binding): /api/v1/namespaces/<ns>/pods[/...].
// Reads and watches go out unfenced, as do writes of other kinds (a
// replica that lost the Lease still reads, and the takeover lock and the
// events are not the pods' business).
func isPodWrite(req *http.Request) bool {
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		return false
	}
	// [prefix...] api v1 namespaces <ns> pods [name [subresource]]; a
	// kubeconfig's server may carry a path prefix.
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	for i := 0; i+4 < len(parts); i++ {
		if parts[i] == "api" && parts[i+1] == "v1" && parts[i+2] == "namespaces" && parts[i+4] == "pods" {
			return true
		}
	}
	return false
}
