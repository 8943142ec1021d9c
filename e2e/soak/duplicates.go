package soak

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Invariant 1: never two live pods of a set on a node, but a surge pair
// within maxSurge, judged once the state has settled.

// pendingNode is a node of a set holding two live pods since at.
type pendingNode struct {
	set, node string
	at        time.Time
}

// checkNode is invariant 1 on one node of a live set.
func (c *Checker) checkNode(at time.Time, set, node string) {
	k := set + "/" + node
	if _, ok := c.pending[k]; ok || len(c.nodeViolations(at, set, node)) == 0 {
		return
	}
	if c.Settle <= 0 {
		for _, kv := range c.nodeViolations(at, set, node) {
			c.flag(kv.key, kv.v)
		}
		return
	}
	c.pending[k] = pendingNode{set: set, node: node, at: at}
}

// keyedViolation is a violation with its flag key.
type keyedViolation struct {
	key string
	v   Violation
}

// nodeViolations is invariant 1 on one node of a live set as the state
// stands, dated at.
func (c *Checker) nodeViolations(at time.Time, set, node string) []keyedViolation {
	s := c.set(set)
	if !s.alive {
		return nil
	}
	var live []*PodObs
	for _, q := range c.byNode[set][node] {
		if s.counts(q) {
			live = append(live, q)
		}
	}
	if len(live) < 2 {
		return nil
	}
	slices.SortFunc(live, func(a, b *PodObs) int { return cmp.Compare(a.Name, b.Name) })
	names := make([]string, len(live))
	for i, q := range live {
		names[i] = fmt.Sprintf("pod %s (revision %s, owner %s)", q.Name, q.Hash, cmp.Or(q.OwnerUID, "none"))
	}
	surge, _, _ := c.limits(s, c.desired(s))
	if surge == 0 || len(live) > 2 || live[0].Hash == live[1].Hash {
		return []keyedViolation{{"duplicate/" + set + "/" + node, Violation{At: at, Invariant: InvDuplicate, Set: set,
			Message: fmt.Sprintf("node %s holds %d live pods of the set (maxSurge %d)", node, len(live), surge), Objects: names}}}
	}
	// A surge pair: count the set's nodes that hold one whose new pod
	// is not available yet. Once it is, the old pod is on its way out
	// and the node no longer counts against maxSurge, as upstream counts
	// it: a rollout then surges on another node in the same step, and
	// the delete and the create go out as the request budget allows.
	update := ""
	if s.obs != nil {
		update = s.obs.UpdateRevision
	}
	//
	// Nor does a pair whose new pod replaced an old one that was not
	// available: upstream makes that replacement at once, outside
	// maxSurge ("the old pod is not available, so we can create the new
	// pod immediately"), and so does everynode.
	//
	// Nor does a node that stopped serving while it held its pair: the
	// rollout skips such a node and does not count its pair (issue 56),
	// so it surges elsewhere meanwhile, and when the node comes back its
	// pair counts again on top of those, until its new pod is available.
	// The controller surges no further then; an overshoot made of
	// returning nodes is that rule, not a breach.
	var pairs []string
	for n, pods := range c.byNode[set] {
		k, done, replacing := 0, false, false
		var since time.Time // when the pair's newest pod was first recorded
		for uid, q := range pods {
			if s.counts(q) {
				k++
				done = done || (update != "" && q.Hash == update && q.AvailableAt(at, s.minReady()))
				if b := c.born[uid]; b.After(since) {
					since, replacing = b, c.replacing[uid]
				}
			}
		}
		if k > 1 && !done && !replacing && !c.node(n).outDuring(since, at) {
			pairs = append(pairs, n)
		}
	}
	if len(pairs) > surge {
		slices.Sort(pairs)
		return []keyedViolation{{"surge/" + set + "/" + node, Violation{At: at, Invariant: InvSurge, Set: set,
			Message: fmt.Sprintf("%d nodes hold an extra pod of the set, maxSurge %d", len(pairs), surge), Objects: pairs}}}
	}
	return nil
}

// besideUnavailable reports whether p, first recorded at, joins a live pod
// of its set on its node that was not available Lag before: the
// controller, whose view may be that stale, may have made p to replace
// it.
func (c *Checker) besideUnavailable(at time.Time, p *PodObs) bool {
	s := c.set(p.Set)
	for uid, q := range c.byNode[p.Set][p.Node] {
		if uid != p.UID && s.counts(q) && !q.AvailableAt(at.Add(-c.Lag), s.minReady()) {
			return true
		}
	}
	return false
}
