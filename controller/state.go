package controller

import (
	"maps"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/controller/pacing"
	"everynode.io/everynode/controller/plan"
)

// setState is everything the controller remembers about one set between
// syncs: the pod changes it waits to see, its last status write, and its
// pacing. The informer caches hold everything else.
type setState struct {
	expected expectations
	written  statusWrite
	pace     pacing.Set
	// canonical holds the UIDs of the set's revisions whose data was found
	// in canonical form: data is immutable, so each is checked once, not
	// decoded and encoded again on every sync.
	canonical map[types.UID]struct{}
	// pods is the memo of the set's pods' facts (podmemo.go), and
	// podsRead when a sync last asked for it (dropIdleMemos).
	pods     *plan.PodMemo
	podsRead time.Time
	// unmarked is the migration's marking (migrate.go): done once per
	// set and term, then the pods marked that the cache has yet to show.
	unmarked struct {
		done    bool
		waiting []cache.ObjectName
	}
}

// setStates holds the setState of every set under one lock, and forgets a
// set's in one step when the set goes. Its methods are what the sync, the
// event handlers and the pod requests ask of that memory.
type setStates struct {
	clock clock.PassiveClock
	pacer *pacing.Pacer

	mu sync.Mutex
	m  map[cache.ObjectName]*setState
}

func newSetStates(clk clock.PassiveClock, pacer *pacing.Pacer) *setStates {
	return &setStates{clock: clk, pacer: pacer, m: make(map[cache.ObjectName]*setState)}
}

// entry returns the set's state, made on first use. The caller holds mu.
func (s *setStates) entry(key cache.ObjectName) *setState {
	st := s.m[key]
	if st == nil {
		st = &setState{}
		s.m[key] = st
	}
	return st
}

// with runs fn on the set's state under the lock.
func (s *setStates) with(key cache.ObjectName, fn func(*setState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.entry(key))
}

// forget drops everything remembered of a set: it was deleted, or replaced
// by another of the same name, whose pods and pacing start afresh.
func (s *setStates) forget(key cache.ObjectName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// Expectations (expectations.go).

// expectCreations records that a pod is being created for each node.
func (s *setStates) expectCreations(key cache.ObjectName, nodes []string) {
	if len(nodes) > 0 {
		s.with(key, func(st *setState) { st.expected.expectCreations(nodes, s.clock.Now()) })
	}
}

// expectDeletions records that each pod (namespace/name) is being deleted.
func (s *setStates) expectDeletions(key cache.ObjectName, podKeys []string) {
	if len(podKeys) > 0 {
		s.with(key, func(st *setState) { st.expected.expectDeletions(podKeys, s.clock.Now()) })
	}
}

// expectUpdates records that each pod (namespace/name) is being updated in
// place.
func (s *setStates) expectUpdates(key cache.ObjectName, podKeys []string) {
	if len(podKeys) > 0 {
		s.with(key, func(st *setState) { st.expected.expectUpdates(podKeys, s.clock.Now()) })
	}
}

// updateObserved marks the in-place update of a pod as seen (or as never
// going to be seen). completed reports whether it was the last thing the
// set waited for.
func (s *setStates) updateObserved(key cache.ObjectName, podKey string) (completed bool) {
	s.with(key, func(st *setState) { completed = st.expected.updateObserved(podKey) })
	return completed
}

// creationObserved marks the creation for node as seen (or as never going
// to be seen, after a failed create). completed reports whether it was the
// last thing the set waited for.
func (s *setStates) creationObserved(key cache.ObjectName, node string) (completed bool) {
	s.with(key, func(st *setState) { completed = st.expected.creationObserved(node) })
	return completed
}

// deletionObserved marks the deletion of a pod as seen. completed reports
// whether it was the last thing the set waited for.
func (s *setStates) deletionObserved(key cache.ObjectName, podKey string) (completed bool) {
	s.with(key, func(st *setState) { completed = st.expected.deletionObserved(podKey) })
	return completed
}

// satisfied reports whether the set waits for no pod change.
func (s *setStates) satisfied(key cache.ObjectName) (ok bool) {
	s.with(key, func(st *setState) { ok = st.expected.satisfied(s.clock.Now()) })
	return ok
}

// creating reports whether the set waits for no pod change, as
// satisfied, and when it waits, the nodes it waits to see a pod created
// for (a copy).
func (s *setStates) creating(key cache.ObjectName) (ok bool, nodes map[string]struct{}) {
	s.with(key, func(st *setState) {
		if ok = st.expected.satisfied(s.clock.Now()); !ok {
			nodes = maps.Clone(st.expected.creates)
		}
	})
	return ok, nodes
}

// expiresIn is how long until the set's expectations expire, if it waits
// for any.
func (s *setStates) expiresIn(key cache.ObjectName) (d time.Duration, waits bool) {
	s.with(key, func(st *setState) {
		if waits = !st.expected.none(); waits {
			d = st.expected.raised.Add(expectationsTTL).Sub(s.clock.Now())
		}
	})
	return d, waits
}

// pending returns how many creations, deletions and in-place updates the
// set waits for.
func (s *setStates) pending(key cache.ObjectName) (creates, deletes, updates int) {
	s.with(key, func(st *setState) {
		creates, deletes, updates = len(st.expected.creates), len(st.expected.deletes), len(st.expected.updates)
	})
	return creates, deletes, updates
}

// Status writes (statuswrites.go).

// freshest returns the newer of ds (from the cache) and the set as the last
// status write left it.
func (s *setStates) freshest(ds *everynodev1alpha1.DaemonSet) (out *everynodev1alpha1.DaemonSet) {
	s.with(cache.MetaObjectToName(ds), func(st *setState) { out = st.written.freshest(ds) })
	return out
}

// statusWriteDelay is how long a write of counts alone must still wait.
func (s *setStates) statusWriteDelay(ds *everynodev1alpha1.DaemonSet, now time.Time) (d time.Duration) {
	s.with(cache.MetaObjectToName(ds), func(st *setState) {
		if st.written.uid == ds.UID {
			d = s.pacer.StatusWriteDelay(&st.pace, now)
		}
	})
	return d
}

// wrote records a status write over ds (as the sync read it) that returned
// written.
func (s *setStates) wrote(ds, written *everynodev1alpha1.DaemonSet, at time.Time) {
	s.with(cache.MetaObjectToName(ds), func(st *setState) {
		st.written.wrote(ds, written)
		s.pacer.StatusWritten(&st.pace, at)
	})
}

// conflicted drops the written copy of a set whose write over it was
// refused.
func (s *setStates) conflicted(ds *everynodev1alpha1.DaemonSet) {
	s.with(cache.MetaObjectToName(ds), func(st *setState) { st.written.conflicted() })
}

// Pacing (package pacing).

// createBatches returns the batches in which to send n creates of the set.
func (s *setStates) createBatches(key cache.ObjectName, n int) (batches []int) {
	s.with(key, func(st *setState) { batches = s.pacer.Batches(&st.pace, n) })
	return batches
}

// createsSucceeded records a sync whose creates all succeeded, the largest
// batch being n of at most limit.
func (s *setStates) createsSucceeded(key cache.ObjectName, n, limit int) {
	s.with(key, func(st *setState) { s.pacer.CreatesSucceeded(&st.pace, n, limit) })
}

// startSlow sends the set's next creates back to a batch of one.
func (s *setStates) startSlow(key cache.ObjectName) {
	s.with(key, func(st *setState) { s.pacer.StartSlow(&st.pace) })
}

// slowStart is the first batch size of the set's next creates.
func (s *setStates) slowStart(key cache.ObjectName) (n int) {
	s.with(key, func(st *setState) { n = s.pacer.SlowStart(&st.pace) })
	return n
}

// synced records how long the set's snapshot took to build and how many
// nodes and pods it held (pacing.Pacer.Synced).
func (s *setStates) synced(key cache.ObjectName, cost time.Duration, size int) {
	s.with(key, func(st *setState) { s.pacer.Synced(&st.pace, cost, size) })
}

// podEventDelay is how long a pod event of the set waits to sync it;
// completed says it completed the set's expectations, turnedReady that it
// shows a pod or its containers turning ready. That counts only while
// nothing is pending: until then a sync can only create on nodes with no
// pod (sync.go), which a pod turning ready never makes, and the event that
// completes the expectations syncs the set at once anyway.
// Counted then too, each pod in flight turning ready would run a sync that
// can do nothing.
func (s *setStates) podEventDelay(key cache.ObjectName, completed, turnedReady bool) (d time.Duration) {
	s.with(key, func(st *setState) {
		d = s.pacer.PodEventDelay(&st.pace, pacing.PodEvent{Completed: completed, TurnedReady: turnedReady && st.expected.none()})
	})
	return d
}

// free is how many of want requests of the set's rolling step go now, and
// if fewer, when to ask again (pacing.Pacer.Free).
func (s *setStates) free(key cache.ObjectName, want int) (n int, retry time.Duration) {
	s.with(key, func(st *setState) { n, retry = s.pacer.Free(&st.pace, want) })
	return n, retry
}

// budgetBound records when the set's rolling step asks the budget for
// free tokens again, 0 when it sent all it planned
// (pacing.Pacer.BudgetBound).
func (s *setStates) budgetBound(key cache.ObjectName, retry time.Duration) {
	s.with(key, func(st *setState) { s.pacer.BudgetBound(&st.pace, retry) })
}

// awaitReady records whether the set's rollout waits for a pod to turn
// ready (pacing.Pacer.AwaitReady).
func (s *setStates) awaitReady(key cache.ObjectName, waits bool) {
	s.with(key, func(st *setState) { s.pacer.AwaitReady(&st.pace, waits) })
}

// canonicalRevisions returns the UIDs of the set's revisions known to hold
// canonical data. The caller must not change the map; it replaces it with
// setCanonicalRevisions.
func (s *setStates) canonicalRevisions(key cache.ObjectName) (uids map[types.UID]struct{}) {
	s.with(key, func(st *setState) { uids = st.canonical })
	return uids
}

// setCanonicalRevisions records the revisions known to hold canonical data;
// revisions gone since are dropped with the old map.
func (s *setStates) setCanonicalRevisions(key cache.ObjectName, uids map[types.UID]struct{}) {
	s.with(key, func(st *setState) { st.canonical = uids })
}

// podMemo returns the set's memo of pod facts for sel, made on first use
// or anew when the selector changed. Only the set's sync may use it.
func (s *setStates) podMemo(key cache.ObjectName, sel labels.Selector) (m *plan.PodMemo) {
	s.with(key, func(st *setState) {
		st.pods = st.pods.ForSelector(sel)
		st.podsRead = s.clock.Now()
		m = st.pods
	})
	return m
}

// memoIdle is how long a set's pod memo outlives the set's last sync.
//
// The memo holds the informer's pod objects, and drops those the cache
// replaced only at a sync of the set. An informer that lists again (its
// watch expired: a kube-apiserver or etcd restart) replaces every cached
// object with an equal one and tells no handler: the resourceVersion is
// the same, so it is a resync, which the controller's handlers do not
// ask for. A set at rest is then not synced again, and its memo keeps
// the replaced copy of each of its pods: one extra copy of every daemon
// pod in the leader's heap (e2e/soak/results/README.md). A rolling
// update syncs its set far more often than this; a set that waits longer
// derives its pods' facts afresh at its next sync, as without a memo.
const memoIdle = time.Minute

// dropIdleMemos forgets the pod memo of every set no sync has read for
// memoIdle. A sync under way keeps the memo it holds; the next one
// starts a new memo. Run asks it every backoffGCInterval, so an idle
// memo goes between memoIdle and memoIdle plus that interval after its
// last sync.
func (s *setStates) dropIdleMemos() {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.m {
		if st.pods != nil && now.Sub(st.podsRead) >= memoIdle {
			st.pods = nil
		}
	}
}
