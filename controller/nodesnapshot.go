package controller

import (
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	"everynode.io/everynode/controller/plan"
)

// nodeSnapshots keeps the last plan.NodeSnapshot until a node event says the
// cache changed.
//
// Every sync reads every node, and a rolling update syncs several times a
// second: rebuilding the list and the name map each time showed in
// profiles of large clusters (bench/RESULTS.md), for nodes that had not
// changed since the last sync.
//
// The node handlers count changes (changed); a snapshot is rebuilt when
// the count has moved since it was built. The informer updates its cache
// before it calls the handlers, so a snapshot may be newer than the count
// it is filed under, never older than any node event a handler has seen:
// a sync that a node event queues (through the node queue) always sees
// the node. Rebuilds are serialized, so no snapshot replaces a newer one:
// a node some sync saw stays in every later snapshot until it is deleted.
type nodeSnapshots struct {
	changes atomic.Uint64

	mu    sync.Mutex
	last  *plan.NodeSnapshot
	built uint64 // changes when last was listed
}

// changed records that the node cache changed: the next get lists afresh.
func (s *nodeSnapshots) changed() { s.changes.Add(1) }

// get returns the last snapshot, listing the nodes again if one changed
// since it was built.
func (s *nodeSnapshots) get(lister corelisters.NodeLister) (*plan.NodeSnapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Read the count before listing: a change in between then leaves the
	// snapshot filed under a count already passed, and the next get lists
	// again.
	changes := s.changes.Load()
	if s.last != nil && s.built == changes {
		return s.last, nil
	}
	nodes, err := lister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	s.last, s.built = plan.NewNodeSnapshot(nodes), changes
	return s.last, nil
}
