package soak

import (
	"fmt"
	"slices"
	"time"
)

// Invariant 2: the nodes a set has down by the controller's doing, and
// the pods it takes down while they reach maxUnavailable.

// checkTakenDown is invariants 2 and 5 for a pod that changed: did it go
// (or go through an image patch) while available, and who is to blame.
func (c *Checker) checkTakenDown(at time.Time, s *setState, prev, p *PodObs) {
	went := prev.Live() && !p.Live()
	// An update in place: the gate closed first (a pod updated with its
	// gate is not Ready by the time its images change), or the images
	// patched on a pod without one.
	patched := p.Live() && prev.Live() && (p.Hash != prev.Hash || (p.GateClosed && !prev.GateClosed))
	if !went && !patched {
		return
	}
	// Within Lag of the orphaning delete, a pod may still go by a sync
	// the controller began before it saw the set's deletion.
	if went && s.orphaned && !c.deleted[p.Name] && c.serves(p.Node) && at.Sub(s.askedAt) >= c.Lag {
		c.flag("lost-pod/"+p.Name, Violation{At: at, Invariant: InvLostPod, Set: p.Set,
			Message: "a pod went while its set was deleted with --cascade=orphan", Objects: []string{"pod " + p.Name + " on " + p.Node}})
	}
	// Not the controller's doing, or not a rollout of a live set.
	if !s.alive || s.orphaned || c.deleted[p.Name] || s.dying[p.OwnerUID] || (p.OwnerUID != "" && p.OwnerUID != s.uid) || !c.serves(p.Node) {
		return
	}
	_, budget, rolling := c.limits(s, c.desired(s))
	if !rolling {
		return
	}
	// Taken down while available as the controller could have seen it.
	if !prev.AvailableAt(at.Add(-c.Lag), s.minReady()) {
		return
	}
	// Another available pod of the set on the node keeps it up (a surge).
	for _, q := range c.byNode[p.Set][p.Node] {
		if q.UID != p.UID && s.counts(q) && q.AvailableAt(at, s.minReady()) {
			return
		}
	}
	// A pod seen deleted while the last state seen of it was live, or
	// seen changed by a relist, went or changed during a watch gap (a
	// kube-apiserver or etcd restart): the relist shows only the end, in
	// its own order, not when the pod went nor what was available then.
	// The change itself is not judged, and its node is down until any
	// available pod is there: the replacement the relist lists may have
	// turned Ready before this record.
	missed := went && p.Op == OpDelete || p.Listed
	if _, ok := s.disrupted[p.Node]; !ok {
		s.disrupted[p.Node] = at
		if missed {
			s.disrupted[p.Node] = time.Time{}
		}
	}
	down := c.disruptedNodes(at, s)
	if len(down) > budget && !missed {
		how := "deleted"
		switch {
		case patched && p.Hash != prev.Hash:
			how = fmt.Sprintf("patched in place (revision %s to %s)", prev.Hash, p.Hash)
		case patched:
			how = "closed for an update in place (gate False)"
		}
		pd := pendingDown{key: "unavailable/" + p.Set + "/" + p.Node, at: at, set: p.Set, s: s, budget: budget, down: down,
			what: fmt.Sprintf("available pod %s on %s %s", p.Name, p.Node, how)}
		if c.DownSettle <= 0 {
			if kv, ok := c.judgeDown(pd); ok {
				c.flag(kv.key, kv.v)
			}
			return
		}
		c.pendingDowns = append(c.pendingDowns, pd)
	}
}

// desiredAt is a desired count a set's status said, and when.
type desiredAt struct {
	at      time.Time
	desired int
}

// pendingDown is a take-down made with more nodes down than the budget,
// as the records stood then.
type pendingDown struct {
	key, set, what string
	at             time.Time
	s              *setState
	budget         int
	down           []string
}

// judgeDown is the violation of a pending take-down, if it still is one:
// the nodes counted down leave out those a later record says had
// stopped serving by then (the controller skips them, and rightly).
func (c *Checker) judgeDown(p pendingDown) (keyedViolation, bool) {
	var down []string
	for _, n := range p.down {
		if !c.node(n).outAt(p.at) {
			down = append(down, n)
		}
	}
	budget := p.budget
	// The budget scales with the desired nodes, and the status that says
	// how many lags the controller's view: nodes back in service after a
	// kube-apiserver restart count for its next sync before its next
	// status write. The first status written within StatusLag after
	// the take-down says what that sync saw (the smoke saw three
	// take-downs at once, with 22 desired: the status had said 19 a
	// moment before, and said 22 2.1 s after). A node that joins in
	// that time can raise the budget by its share: the price of not
	// flagging the controller for its status's lag.
	if p.s != nil {
		for _, d := range p.s.desired {
			if d.at.After(p.at) && !d.at.After(p.at.Add(c.StatusLag)) {
				_, after, _ := c.limits(p.s, d.desired)
				budget = max(budget, after)
				break
			}
		}
	}
	if len(down) <= budget {
		return keyedViolation{}, false
	}
	return keyedViolation{p.key, Violation{At: p.at, Invariant: InvUnavailable, Set: p.set,
		Message: fmt.Sprintf("%s with %d nodes down by the controller's doing, maxUnavailable %d", p.what, len(down), budget),
		Objects: down}}, true
}

// desired is the set's desired count as its status says, or the nodes
// its live pods are on when the status says less (it lags).
func (c *Checker) desired(s *setState) int {
	n := 0
	if s.obs != nil {
		n = int(s.obs.Desired)
	}
	on := 0
	for _, pods := range c.byNode[s.obsName()] {
		for _, q := range pods {
			if s.counts(q) {
				on++
				break
			}
		}
	}
	return max(n, on)
}

func (s *setState) obsName() string {
	if s.obs == nil {
		return ""
	}
	return s.obs.Name
}

// conditionClock is the precision of a condition's lastTransitionTime,
// from which the controller counts minReadySeconds (as upstream): a pod
// is available to it up to this much before the soak, which times the
// Ready it sees by its own clock, counts it so.
const conditionClock = time.Second

// disruptedNodes are the set's nodes down by the controller's doing at
// at, with the ones that recovered (an available pod that turned Ready
// after it went down) or stopped serving forgotten.
func (c *Checker) disruptedNodes(at time.Time, s *setState) []string {
	var out []string
	for node, since := range s.disrupted {
		if !c.serves(node) {
			delete(s.disrupted, node)
			continue
		}
		up := false
		for _, q := range c.byNode[s.obsName()][node] {
			if s.counts(q) && !q.ReadySince.Before(since.Truncate(time.Second)) && q.AvailableAt(at.Add(conditionClock), s.minReady()) {
				up = true
			}
		}
		if up {
			delete(s.disrupted, node)
			continue
		}
		out = append(out, node)
	}
	slices.Sort(out)
	return out
}
