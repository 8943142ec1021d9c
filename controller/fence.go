package controller

import "context"

// A leader that hung (a long GC pause, SIGSTOP, a frozen VM) past its
// Lease wakes up believing it still leads: its workers resume mid-sync,
// on caches a lease old, and can create or delete pods in the
// milliseconds before its elector notices the Lease is gone. Another
// replica leads by then, so a node could get a pod twice. The write fence
// closes that window: the pod writes of a sync first ask it, and it
// refuses once this replica's last Lease renewal is older than the lease
// duration (cmd/everynode/leader.go keeps the time). Asked once per
// batch, it still lets out a request whose process was stopped after the
// batch asked; so the controller's client asks the same fence again for
// each write of pods, nodes, set status and revisions
// (cmd/everynode/writefence.go), and this one saves a
// batch the requests it would send only to have them refused. Neither
// can stop a request the process had handed to the kernel before it
// hung: the API server's fence does (the chart's leader-fence.yaml),
// from the term each created pod carries (WithLeaderTerm).

type fenceKey struct{}

type termKey struct{}

// WithLeaderTerm returns ctx carrying the leadership term (the Lease's
// leaseTransitions when this replica acquired it): the controller made or
// run with it writes it on each pod it creates
// (everynodev1alpha1.AnnotationLeaderTerm), for the API server's fence.
func WithLeaderTerm(ctx context.Context, term int32) context.Context {
	return context.WithValue(ctx, termKey{}, term)
}

// LeaderTerm is the term ctx carries (WithLeaderTerm), if it does.
func LeaderTerm(ctx context.Context) (int32, bool) {
	t, ok := ctx.Value(termKey{}).(int32)
	return t, ok
}

// leaderTerm is the term of ctx, else the one New was given; false
// without leader election.
func (c *Controller) leaderTerm(ctx context.Context) (int32, bool) {
	if t, ok := LeaderTerm(ctx); ok {
		return t, true
	}
	return c.term, c.hasTerm
}

// WithWriteFence returns ctx carrying fence, which the controller made
// (New) or run with it calls before each batch of pod creates, deletes or
// patches; a non-nil error stops the batch.
func WithWriteFence(ctx context.Context, fence func() error) context.Context {
	return context.WithValue(ctx, fenceKey{}, fence)
}

// HasWriteFence reports whether ctx carries a write fence, for the tests
// of a leadership term's wiring.
func HasWriteFence(ctx context.Context) bool { return fenceOf(ctx) != nil }

func fenceOf(ctx context.Context) func() error {
	f, _ := ctx.Value(fenceKey{}).(func() error)
	return f
}

// writeFence asks the fence of the leadership term: the one of ctx (the
// sync's), else the one New was given. Nil error when the controller may
// still write, and always without leader election. New's matters: a term
// makes its controller with the fenced context but runs it with the
// elector's own, so a fence only on ctx would never be asked.
func (c *Controller) writeFence(ctx context.Context) error {
	f := fenceOf(ctx)
	if f == nil {
		f = c.fence
	}
	if f != nil {
		return f()
	}
	return nil
}
