package controller

import "context"

// A leader that hung (a long GC pause, SIGSTOP, a frozen VM) past its
// Lease wakes up believing it still leads: its workers resume mid-sync,
// on caches a lease old, and can create or delete pods in the
// milliseconds before its elector notices the Lease is gone. Another
// replica leads by then, so a node could get a pod twice. The write fence
// closes that window: the pod writes of a sync first ask it, and it
// refuses once this replica's last Lease renewal is older than the lease
// duration (cmd/everynode/leader.go keeps the time).

type fenceKey struct{}

// WithWriteFence returns ctx carrying fence, which the controller run with
// it calls before each batch of pod creates or deletes; a non-nil error
// stops the batch.
func WithWriteFence(ctx context.Context, fence func() error) context.Context {
	return context.WithValue(ctx, fenceKey{}, fence)
}

// writeFence is the fence of ctx's leadership term: nil error when the
// controller may still write (and always without leader election).
func writeFence(ctx context.Context) error {
	if f, ok := ctx.Value(fenceKey{}).(func() error); ok && f != nil {
		return f()
	}
	return nil
}
