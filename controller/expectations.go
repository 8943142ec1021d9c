package controller

import (
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// expectationsTTL bounds how long a sync waits for an informer event that
// may have been lost (a watch dropped across a relist): after it the set is
// synced again from what the cache shows, as upstream's ExpectationsTimeout.
const expectationsTTL = 5 * time.Minute

// expectations remembers, per set, the pod creations (by target node) and
// deletions (by pod namespace/name) the controller has asked for and not yet
// seen through the pod informer. A set is synced only when nothing is
// pending; until then its pods in the cache are known to be stale, and
// acting on them would create a second pod on a node whose first one the
// informer has not delivered yet.
//
// Upstream counts creations; counting per node instead means an event for
// any other pod (a pod made by a previous leader, a late event of an earlier
// sync) can never satisfy an expectation it does not belong to.
type expectations struct {
	mu    sync.Mutex
	clock clock.PassiveClock
	sets  map[cache.ObjectName]*setExpectations
}

type setExpectations struct {
	creates map[string]struct{}
	deletes map[string]struct{}
	// raised is when an expectation was last added, for the TTL.
	raised time.Time
}

func newExpectations(c clock.PassiveClock) *expectations {
	return &expectations{clock: c, sets: map[cache.ObjectName]*setExpectations{}}
}

func (e *expectations) entry(set cache.ObjectName) *setExpectations {
	s := e.sets[set]
	if s == nil {
		s = &setExpectations{creates: map[string]struct{}{}, deletes: map[string]struct{}{}}
		e.sets[set] = s
	}
	s.raised = e.clock.Now()
	return s
}

// expectCreations records that a pod is being created for each node.
func (e *expectations) expectCreations(set cache.ObjectName, nodes []string) {
	if len(nodes) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.entry(set)
	for _, n := range nodes {
		s.creates[n] = struct{}{}
	}
}

// expectDeletions records that each pod (namespace/name) is being deleted.
func (e *expectations) expectDeletions(set cache.ObjectName, podKeys []string) {
	if len(podKeys) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.entry(set)
	for _, k := range podKeys {
		s.deletes[k] = struct{}{}
	}
}

// creationObserved marks the creation for node as seen (or as never going
// to be seen, after a failed create). completed reports whether it was the
// last thing the set waited for.
func (e *expectations) creationObserved(set cache.ObjectName, node string) (completed bool) {
	return e.observed(set, node, func(s *setExpectations) map[string]struct{} { return s.creates })
}

// deletionObserved marks the deletion of a pod as seen. completed reports
// whether it was the last thing the set waited for.
func (e *expectations) deletionObserved(set cache.ObjectName, podKey string) (completed bool) {
	return e.observed(set, podKey, func(s *setExpectations) map[string]struct{} { return s.deletes })
}

// observed drops key from the pending set pick chooses; completed is true
// only when key was pending and nothing else is.
func (e *expectations) observed(set cache.ObjectName, key string, pick func(*setExpectations) map[string]struct{}) (completed bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.sets[set]
	if s == nil {
		return false
	}
	pending := pick(s)
	if _, ok := pending[key]; !ok {
		return false
	}
	delete(pending, key)
	return len(s.creates) == 0 && len(s.deletes) == 0
}

// satisfied reports whether nothing is pending for the set. Expectations
// older than expectationsTTL are dropped and count as satisfied.
func (e *expectations) satisfied(set cache.ObjectName) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.sets[set]
	if s == nil {
		return true
	}
	if len(s.creates) == 0 && len(s.deletes) == 0 {
		delete(e.sets, set)
		return true
	}
	if e.clock.Since(s.raised) > expectationsTTL {
		delete(e.sets, set)
		return true
	}
	return false
}

// pending returns how many creations and deletions the set waits for.
func (e *expectations) pending(set cache.ObjectName) (creates, deletes int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s := e.sets[set]; s != nil {
		return len(s.creates), len(s.deletes)
	}
	return 0, 0
}

// forget drops everything pending for a set, when the set is deleted, so a
// new set of the same name starts clean.
func (e *expectations) forget(set cache.ObjectName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.sets, set)
}
