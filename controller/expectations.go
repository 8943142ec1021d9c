package controller

import (
	"time"
)

// expectationsTTL bounds how long a sync waits for an informer event that
// may have been lost (a watch dropped across a relist): after it the set is
// synced again from what the cache shows, as upstream's ExpectationsTimeout.
const expectationsTTL = 5 * time.Minute

// expectations are the pod creations (by target node) and deletions (by pod
// namespace/name) the controller has asked for on one set and not yet seen
// through the pod informer. A set acts on its pods only when nothing is
// pending; until then its pods in the cache are known to be stale, and
// acting on them would create a second pod on a node whose first one the
// informer has not delivered yet. The one exception relies on creations
// being expected per node (below): a node that shows no pod of the set
// and has no creation pending gets its pod (createOnBareNodes).
//
// Upstream counts creations; counting per node instead means an event for
// any other pod (a pod made by a previous leader, a late event of an earlier
// sync) can never satisfy an expectation it does not belong to.
//
// The zero value expects nothing. setStates guards it.
type expectations struct {
	creates map[string]struct{}
	deletes map[string]struct{}
	// updates are in-place updates and openings of the in-place gate (by
	// pod namespace/name), seen when the pod shows another revision hash
	// or its gate open, or is deleted; and closings of the gate after a
	// patch (gateClosingKey), seen when the pod shows its gate closed.
	updates map[string]struct{}
	// raised is when an expectation was last added, for the TTL.
	raised time.Time
}

// expectCreations records creations for nodes, asked for at now.
func (e *expectations) expectCreations(nodes []string, now time.Time) {
	e.creates = addKeys(e.creates, nodes)
	e.raised = now
}

// expectDeletions records deletions of pods (namespace/name), asked for at
// now.
func (e *expectations) expectDeletions(podKeys []string, now time.Time) {
	e.deletes = addKeys(e.deletes, podKeys)
	e.raised = now
}

// expectUpdates records in-place updates of pods (namespace/name), asked
// for at now.
func (e *expectations) expectUpdates(podKeys []string, now time.Time) {
	e.updates = addKeys(e.updates, podKeys)
	e.raised = now
}

func addKeys(set map[string]struct{}, keys []string) map[string]struct{} {
	if set == nil {
		set = make(map[string]struct{}, len(keys))
	}
	for _, k := range keys {
		set[k] = struct{}{}
	}
	return set
}

// creationObserved marks the creation for node as seen; completed is true
// only when it was pending and nothing else is.
func (e *expectations) creationObserved(node string) (completed bool) {
	return e.observed(e.creates, node)
}

// gateClosingKey is the updates key of a closing of a pod's in-place
// gate after its patch (closeLateGates), seen when the pod shows the gate
// closed. It is not the pod's own key: the closing that comes before a
// patch shows first, and must not end the expectation of the patch.
func gateClosingKey(podKey string) string { return podKey + "#gate-closing" }

// deletionObserved marks the deletion of a pod as seen, and ends an
// in-place update or gate closing of it still expected; completed is true
// only when any was pending and nothing else is.
func (e *expectations) deletionObserved(podKey string) (completed bool) {
	// A pod gone will show no in-place update either.
	updated := e.observed(e.updates, podKey)
	closed := e.observed(e.updates, gateClosingKey(podKey))
	return e.observed(e.deletes, podKey) || updated || closed
}

// updateObserved marks the in-place update of a pod as seen; completed is
// true only when it was pending and nothing else is.
func (e *expectations) updateObserved(podKey string) (completed bool) {
	return e.observed(e.updates, podKey)
}

func (e *expectations) observed(pending map[string]struct{}, key string) (completed bool) {
	if _, ok := pending[key]; !ok {
		return false
	}
	delete(pending, key)
	return e.none()
}

// none reports whether nothing is pending.
func (e *expectations) none() bool {
	return len(e.creates) == 0 && len(e.deletes) == 0 && len(e.updates) == 0
}

// satisfied reports whether nothing is pending at now. Expectations older
// than expectationsTTL are dropped and count as satisfied.
func (e *expectations) satisfied(now time.Time) bool {
	if e.none() {
		return true
	}
	if now.Sub(e.raised) > expectationsTTL {
		*e = expectations{}
		return true
	}
	return false
}
