package controller

import (
	"errors"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// errStatusConflict marks a status write refused because the set changed
// meanwhile: the sync is retried from the cache, which will hold the newer
// set, instead of re-reading it from the API server.
var errStatusConflict = errors.New("the DaemonSet changed since it was read; status write retried on the next sync")

// statusWrite is the set as the last status write left it. The informer
// delivers that object a little later; a sync that starts in between would
// otherwise compute its status against the older copy (and write again
// what was just written) and send the older resourceVersion (and fail with
// a conflict). The zero value knows of no write. setStates guards it.
type statusWrite struct {
	uid types.UID
	// over holds the resourceVersions older than written: the one the
	// write replaced and, when that was itself a written copy the cache had
	// not seen yet, the ones before it. written is what the API server
	// returned, nil once the cache has caught up.
	over    []string
	written *everynodev1alpha1.DaemonSet
}

// freshest returns the newer of ds (from the cache) and the written copy.
// The written copy is newer exactly when the cache still holds a version
// that write (or the chain of writes leading to it) replaced: any other
// resourceVersion means the cache has seen the write or something after
// it. (The spec of the written copy is the cached one: a write over a
// changed spec would have been refused.)
func (w *statusWrite) freshest(ds *everynodev1alpha1.DaemonSet) *everynodev1alpha1.DaemonSet {
	if w.written == nil {
		return ds
	}
	if w.uid != ds.UID {
		*w = statusWrite{}
		return ds
	}
	if slices.Contains(w.over, ds.ResourceVersion) {
		return w.written
	}
	w.written = nil
	return ds
}

// maxChain bounds the resourceVersions kept per set: a cache that lags
// more writes than this behind is let be (the next write conflicts and the
// sync is retried).
const maxChain = 8

// wrote records a write over ds (as the sync read it) that returned written.
func (w *statusWrite) wrote(ds, written *everynodev1alpha1.DaemonSet) {
	over := []string{ds.ResourceVersion}
	if w.written == ds && len(w.over) < maxChain {
		over = append(w.over, ds.ResourceVersion)
	}
	*w = statusWrite{uid: ds.UID, over: over, written: written}
}

// conflicted drops the written copy after a write over it was refused:
// someone else has written the set since, so only the cache can tell what
// it holds now.
func (w *statusWrite) conflicted() { w.written = nil }

// urgentStatusChange reports whether going from old to cur changes what a
// reader waits for or must see at once: a new generation observed, a
// revision, the collision count, a condition added or removed or observing
// a new generation, and a condition's reason moving to or from a decision
// (decisionReasons: paused, stopped itself, rolled back, past its deadline).
// Those are written at once.
//
// The rest follows the pods: counts, messages, and the status and reason
// of a condition that only restates them (Available turning False because
// a node joined and True once its pod is Ready; Progressing between
// RollingUpdate, RolloutComplete and the reason a rollout waits). Those
// wait for a spare token like counts (at most pacing.MaxStatusStaleness).
// Written at once, they cost a cluster where nodes join during a rollout
// more requests than the rollout, and hold the joining nodes' pods back
// behind them (the join-under-churn bench; bench/RESULTS.md).
func urgentStatusChange(old, cur *everynodev1alpha1.DaemonSetStatus) bool {
	if old.ObservedGeneration != cur.ObservedGeneration ||
		old.UpdateRevision != cur.UpdateRevision ||
		old.CurrentRevision != cur.CurrentRevision ||
		!equalPtr(old.CollisionCount, cur.CollisionCount) ||
		len(old.Conditions) != len(cur.Conditions) {
		return true
	}
	for i := range cur.Conditions {
		o, c := &old.Conditions[i], &cur.Conditions[i]
		if o.Type != c.Type || o.ObservedGeneration != c.ObservedGeneration {
			return true
		}
		if o.Reason != c.Reason && (decisionReasons[o.Reason] || decisionReasons[c.Reason]) {
			return true
		}
	}
	return false
}

// decisionReasons are the condition reasons that report a decision, the
// user's or the controller's, rather than restate the pods.
var decisionReasons = map[string]bool{
	everynodev1alpha1.ReasonPaused:                   true,
	everynodev1alpha1.ReasonRolloutFailing:           true,
	everynodev1alpha1.ReasonRolledBack:               true,
	everynodev1alpha1.ReasonProgressDeadlineExceeded: true,
	everynodev1alpha1.ReasonInvalidUpdateStrategy:    true,
	// Not a decision but a configuration error that stops every daemon
	// pod: the user must read it now.
	everynodev1alpha1.ReasonDaemonResourceNotIgnored: true,
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
