package controller

import (
	"errors"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// StatusWriteInterval is how often, at most, a set's status is written when
// only its counts move. During a rollout every pod that turns ready changes
// a count; writing each one would spend the client's QPS, shared with pod
// creations, on figures nobody reads at that rate. Changes a reader waits
// for (a new generation observed, a revision or collision count, a
// condition's status or reason, such as the rollout completing) are written
// at once.
const StatusWriteInterval = time.Second

// MaxStatusStaleness is how long counts may go unwritten while the
// controller's request budget has no spare token (Config.Budget): pod
// requests are then queued for the client's QPS, and every status write
// would push the last of them back by a token. Upstream writes after every
// sync, and its syncs wait on their API calls: ~30 writes in a 1,000-node
// rolling update at QPS 50 (0.6 s of it), and in the 200 s rolling updates
// of 5,000 nodes 36 (maxUnavailable) and 20 (maxSurge), one every 5-10 s.
// At 5 s everynode wrote 39 and 32 there; at 10 s it writes no more often
// than upstream under load. Progress shows no later than that in `kubectl
// rollout status`, and a condition's change is never held back.
const MaxStatusStaleness = 10 * time.Second

// errStatusConflict marks a status write refused because the set changed
// meanwhile: the sync is retried from the cache, which will hold the newer
// set, instead of re-reading it from the API server.
var errStatusConflict = errors.New("the DaemonSet changed since it was read; status write retried on the next sync")

// statusWrites remembers, per set, the last status write: when it happened
// and the object the API server returned. The informer delivers that object
// a little later; a sync that starts in between would otherwise compute its
// status against the older copy (and write again what was just written)
// and send the older resourceVersion (and fail with a conflict).
type statusWrites struct {
	interval time.Duration // StatusWriteInterval; tests of other things set 0
	mu       sync.Mutex
	m        map[cache.ObjectName]*statusWrite
}

type statusWrite struct {
	uid types.UID
	at  time.Time
	// over holds the resourceVersions older than written: the one the
	// write replaced and, when that was itself a written copy the cache had
	// not seen yet, the ones before it. written is what the API server
	// returned, nil once the cache has caught up.
	over    []string
	written *everynodev1alpha1.DaemonSet
}

func newStatusWrites() *statusWrites {
	return &statusWrites{interval: StatusWriteInterval, m: make(map[cache.ObjectName]*statusWrite)}
}

// freshest returns the newer of ds (from the cache) and the set as the last
// status write left it. The written copy is newer exactly when the cache
// still holds a version that write (or the chain of writes leading to it)
// replaced: any other resourceVersion means the cache has seen the write or
// something after it. (The spec of
// the written copy is the cached one: a write over a changed spec would
// have been refused.)
func (w *statusWrites) freshest(ds *everynodev1alpha1.DaemonSet) *everynodev1alpha1.DaemonSet {
	key := cache.MetaObjectToName(ds)
	w.mu.Lock()
	defer w.mu.Unlock()
	last := w.m[key]
	if last == nil || last.written == nil {
		return ds
	}
	if last.uid != ds.UID {
		delete(w.m, key)
		return ds
	}
	if slices.Contains(last.over, ds.ResourceVersion) {
		return last.written
	}
	last.written = nil
	return ds
}

// wait returns how long a write of counts alone must still wait to come
// interval after the last write; zero if it may go now.
func (w *statusWrites) wait(ds *everynodev1alpha1.DaemonSet, now time.Time, interval time.Duration) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	last := w.m[cache.MetaObjectToName(ds)]
	if last == nil || last.uid != ds.UID {
		return 0
	}
	return max(0, interval-now.Sub(last.at))
}

// maxChain bounds the resourceVersions kept per set: a cache that lags
// more writes than this behind is let be (the next write conflicts and the
// sync is retried).
const maxChain = 8

// wrote records a write over ds (as the sync read it) that returned written.
func (w *statusWrites) wrote(ds, written *everynodev1alpha1.DaemonSet, at time.Time) {
	key := cache.MetaObjectToName(ds)
	w.mu.Lock()
	defer w.mu.Unlock()
	over := []string{ds.ResourceVersion}
	if last := w.m[key]; last != nil && last.written == ds && len(last.over) < maxChain {
		over = append(last.over, ds.ResourceVersion)
	}
	w.m[key] = &statusWrite{uid: ds.UID, at: at, over: over, written: written}
}

// conflicted drops the written copy of a set whose write over it was
// refused: someone else has written the set since, so only the cache can
// tell what it holds now.
func (w *statusWrites) conflicted(ds *everynodev1alpha1.DaemonSet) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if last := w.m[cache.MetaObjectToName(ds)]; last != nil {
		last.written = nil
	}
}

// forget drops what is known about a deleted set.
func (w *statusWrites) forget(key cache.ObjectName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}

// urgentStatusChange reports whether going from old to cur changes more
// than counts, condition messages, and the reason a set waits (which of the
// pods' troubles comes first moves about during any rollout): those changes
// are written at once.
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
		if o.Type != c.Type || o.Status != c.Status || o.ObservedGeneration != c.ObservedGeneration {
			return true
		}
		if o.Reason != c.Reason && !(isTroubleReason(o.Reason) && isTroubleReason(c.Reason)) {
			return true
		}
	}
	return false
}

func isTroubleReason(r string) bool {
	for _, info := range troubleInfo {
		if info.reason == r {
			return true
		}
	}
	return false
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
