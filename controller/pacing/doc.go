// Package pacing decides when the everynode controller's requests go out,
// so the reconcile logic only decides what they are. It is the controller's
// one seam for timing:
//
//   - the request budget (Bucket): one token bucket for all of the
//     controller's clients. Pod work takes tokens first come, first served;
//     a rolling update's own requests go only as many at a time as there
//     are free tokens (Free), so pod work for nodes without a pod goes
//     first, and the rest wait for a batch of them (FreeBatch, more for a
//     larger set or one whose syncs cost more, Pacer.Free); bookkeeping
//     (Normal events, status writes that only move counts) takes only
//     tokens the pod work leaves;
//   - slow start (Pacer.Batches): creates go out in batches of 1, 2, 4, ...,
//     as upstream's, but a set whose creates keep succeeding starts its next
//     sync where the last left off, until it comes to rest;
//   - pod-event batching (Pacer.PodEventDelay): a pod event syncs its set
//     after a delay proportional to what that set's sync costs, so events
//     that arrive meanwhile share one sync;
//   - status writes (Pacer.StatusWriteDelay): a change of counts alone is
//     written at most every StatusWriteInterval, or MaxStatusStaleness
//     while pod work has the budget;
//   - events (EventRecorders, Pacer.EventSink): Warnings and Normal events
//     on separate broadcasters, Normal ones waiting for a spare token.
//
// A Pacer holds no per-set state of its own: the controller keeps a Set for
// each DaemonSet next to its other per-set state and passes it in, under
// its own lock. What each choice bought in the benchmark is recorded in
// bench/RESULTS.md.
package pacing
