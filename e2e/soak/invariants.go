package soak

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"everynode.io/everynode/placement"
)

// The invariants, checked over the stream of records (observe.go) as it
// comes, by one Checker fed in order:
//
//  1. duplicates: a node never holds two live pods of a set, except an
//     old and a new one of a set whose strategy allows a surge, and never
//     more such nodes than maxSurge;
//  2. unavailable: the controller never takes down an available pod (a
//     delete, or an image patch in place) while as many nodes as
//     maxUnavailable are down by its own doing: a node counts from the
//     moment the controller takes its available pod down until the node
//     has an available pod again;
//  5. lost: no set, revision or pod goes that the soak did not delete:
//     a set deleted by anyone else, a revision deleted while its set (or
//     a live pod of it) still uses it or while its set is orphan-deleted,
//     a pod deleted while its set is orphan-deleted.
//
// Invariants 3 (admission), 4 (convergence) and 6 (resources) are not
// about this stream: traffic.go, run.go and samples.go check them.
//
// What the controller did not do is not held against it: pods the soak
// deleted, pods of a set being deleted, pods on nodes that do not serve
// (cut off, leaving, tainted unreachable), sets updated OnDelete.

// Invariant names a rule; a Violation says which it broke.
type Invariant string

const (
	InvDuplicate   Invariant = "duplicate-pod"
	InvSurge       Invariant = "surge-over-maxSurge"
	InvUnavailable Invariant = "unavailable-over-budget"
	InvAdmission   Invariant = "admission-refused"
	InvConvergence Invariant = "no-convergence"
	InvLostSet     Invariant = "lost-set"
	InvLostRev     Invariant = "lost-revision"
	InvLostPod     Invariant = "lost-pod"
	InvLeak        Invariant = "resource-growth"
)

// AbortedDeleteAfter is how long after the soak asked to delete a set
// an update of it with no deletionTimestamp means the delete never took.
const AbortedDeleteAfter = 30 * time.Second

// Violation is one breach of an invariant, with what it was about.
type Violation struct {
	At        time.Time `json:"at"`
	Invariant Invariant `json:"invariant"`
	Set       string    `json:"set,omitempty"`
	Message   string    `json:"message"`
	// Objects name the pods, nodes, revisions involved.
	Objects []string `json:"objects,omitempty"`
	// Repeats counts later breaches of the same rule by the same set on
	// the same node (or object), not listed again.
	Repeats int `json:"repeats,omitempty"`
}

func (v Violation) String() string {
	s := fmt.Sprintf("%s %s", v.At.UTC().Format("15:04:05.000"), v.Invariant)
	if v.Set != "" {
		s += " set " + v.Set
	}
	s += ": " + v.Message
	if len(v.Objects) > 0 {
		s += " [" + strings.Join(v.Objects, ", ") + "]"
	}
	if v.Repeats > 0 {
		s += fmt.Sprintf(" (and %d more times)", v.Repeats)
	}
	return s
}

// Checker checks invariants 1, 2 and 5 over records fed in order.
type Checker struct {
	// Lag is how stale the controller's view may be: a pod that turned
	// available less than Lag before the controller took it down is
	// taken for one the controller saw unavailable.
	Lag time.Duration
	// StrategyGrace is how long an earlier strategy of a set still
	// holds after a change (the controller acts on what it read).
	StrategyGrace time.Duration
	// Settle is how long two live pods of a set on a node (invariant 1)
	// must last to count: a relist after a broken watch (a kube-apiserver
	// or etcd restart) shows the new pods before it drops the ones that
	// went during the gap, within the same instant.
	Settle time.Duration

	// pending are the nodes whose invariant 1 state is not settled yet,
	// by "set/node", with when it began. They wait until a relist is
	// over too (lastListed: the last Listed pod record's time): a
	// relist of many pods takes longer than Settle to deliver.
	pending    map[string]pendingNode
	lastListed time.Time
	// DownSettle is how long a take-down over the budget (invariant 2)
	// waits to be judged: a node record that lags (a relisting watch)
	// may yet say a node counted down had stopped serving before, and
	// the controller rightly skipped it.
	DownSettle time.Duration
	// StatusLag is how long after a take-down the set's next status may
	// come and still say the desired count the controller budgeted
	// with (judgeDown).
	StatusLag time.Duration
	// pendingDowns are those take-downs, oldest first.
	pendingDowns []pendingDown

	sets map[string]*setState
	pods map[string]*PodObs   // by UID
	born map[string]time.Time // by UID: when a live pod was first recorded
	// replacing marks (by UID) a pod first recorded beside a pod of its
	// set on its node that was not available then, as the controller
	// may have seen it (within Lag): a replacement upstream makes at
	// once, outside maxSurge.
	replacing map[string]bool
	byNode    map[string]map[string]map[string]*PodObs // set -> node -> UID -> pod
	nodes     map[string]*nodeState                    // by name
	deleted   map[string]bool                          // pod names the soak deleted
	vs        []Violation
	seen      map[string]int // violation key -> index in vs
}

type setState struct {
	obs   *SetObs
	alive bool
	// uid is the live incarnation's; dying are those the soak deleted
	// with cascade, whose pods the garbage collector takes.
	uid   string
	dying map[string]bool
	// onPurpose: the soak asked to delete it since it was last made;
	// askedAt when.
	onPurpose bool
	askedAt   time.Time
	// orphaned: deleted with --cascade=orphan, not made again yet.
	orphaned bool
	// specs are its strategies, newest last, for StrategyGrace.
	specs []specAt
	// disrupted are the nodes down by the controller's doing, since when.
	disrupted map[string]time.Time
	// desired are the desired counts its statuses said, newest last, for
	// judging a take-down by the next status (judgeDown).
	desired []desiredAt
}

type specAt struct {
	at       time.Time
	strategy placement.Strategy
}

type nodeState struct {
	serving, cutOff, leaving, gone bool
	why                            string
	// out are the spans it did not serve, as its records say: from when
	// the node says it stopped (else when the record came) to the record
	// that shows it serving again; the last one open while it is out.
	out []span
}

// span is a stretch of time; a zero to is still open.
type span struct{ from, to time.Time }

// outDuring reports whether the node's records say it did not serve at
// some time in [from, to].
func (n *nodeState) outDuring(from, to time.Time) bool {
	for _, s := range n.out {
		if !s.from.After(to) && (s.to.IsZero() || s.to.After(from)) {
			return true
		}
	}
	return false
}

// outAt reports whether the node's records say it did not serve at t.
func (n *nodeState) outAt(t time.Time) bool {
	for _, s := range n.out {
		if !t.Before(s.from) && (s.to.IsZero() || t.Before(s.to)) {
			return true
		}
	}
	return false
}

// NewChecker is a checker with the tolerances the soak runs with.
func NewChecker() *Checker {
	return &Checker{Lag: 2 * time.Second, StatusLag: 5 * time.Second, StrategyGrace: 10 * time.Second, Settle: time.Second, pending: map[string]pendingNode{},
		DownSettle: 30 * time.Second,
		sets:       map[string]*setState{}, pods: map[string]*PodObs{}, born: map[string]time.Time{}, replacing: map[string]bool{}, byNode: map[string]map[string]map[string]*PodObs{},
		nodes: map[string]*nodeState{}, deleted: map[string]bool{}, seen: map[string]int{}}
}

// Violations are the breaches found so far, in the order found.
func (c *Checker) Violations() []Violation {
	vs := slices.Clone(c.vs)
	// The states not settled yet count as they stand now.
	for _, p := range c.pendingDowns {
		if kv, ok := c.judgeDown(p); ok {
			if _, seen := c.seen[kv.key]; !seen {
				vs = append(vs, kv.v)
			}
		}
	}
	for _, p := range c.pending {
		for _, kv := range c.nodeViolations(p.at, p.set, p.node) {
			if _, ok := c.seen[kv.key]; !ok {
				vs = append(vs, kv.v)
			}
		}
	}
	return vs
}

// settle judges the pending states that began Settle or more before
// now: those that still hold are violations, dated when they began.
func (c *Checker) settle(now time.Time) {
	for len(c.pendingDowns) > 0 && now.Sub(c.pendingDowns[0].at) >= c.DownSettle {
		if kv, ok := c.judgeDown(c.pendingDowns[0]); ok {
			c.flag(kv.key, kv.v)
		}
		c.pendingDowns = c.pendingDowns[1:]
	}
	for k, p := range c.pending {
		if now.Sub(p.at) < c.Settle || now.Sub(c.lastListed) < c.Settle {
			continue
		}
		delete(c.pending, k)
		for _, kv := range c.nodeViolations(p.at, p.set, p.node) {
			c.flag(kv.key, kv.v)
		}
	}
}

// flag records a violation once per key; later ones with the same key
// only count.
func (c *Checker) flag(key string, v Violation) {
	if i, ok := c.seen[key]; ok {
		c.vs[i].Repeats++
		return
	}
	c.seen[key] = len(c.vs)
	c.vs = append(c.vs, v)
}

func (c *Checker) set(name string) *setState {
	s := c.sets[name]
	if s == nil {
		s = &setState{dying: map[string]bool{}, disrupted: map[string]time.Time{}}
		c.sets[name] = s
	}
	return s
}

func (c *Checker) node(name string) *nodeState {
	n := c.nodes[name]
	if n == nil {
		// A node not seen yet serves: the checker errs towards blaming
		// nobody only where it knows better.
		n = &nodeState{serving: true}
		c.nodes[name] = n
	}
	return n
}

// serves reports whether a node takes part in rollouts.
func (c *Checker) serves(name string) bool {
	n := c.node(name)
	return n.serving && !n.cutOff && !n.leaving && !n.gone
}

// Observe feeds one record.
func (c *Checker) Observe(o Obs) {
	if o.Pod != nil && o.Pod.Listed {
		c.lastListed = o.At
	}
	c.settle(o.At)
	switch {
	case o.Act != nil:
		c.act(o.At, o.Act)
	case o.Node != nil:
		n := c.node(o.Node.Name)
		open := len(n.out) > 0 && n.out[len(n.out)-1].to.IsZero()
		switch {
		case !o.Node.Serving && !open:
			from := o.Node.Since
			if from.IsZero() || from.After(o.At) {
				from = o.At
			}
			n.out = append(n.out, span{from: from})
		case o.Node.Serving && open:
			n.out[len(n.out)-1].to = o.At
		}
		n.serving, n.why = o.Node.Serving, o.Node.Why
		if o.Node.Op == OpDelete {
			n.gone = true
		}
	case o.Set != nil:
		c.setObs(o.At, o.Set)
	case o.Rev != nil:
		c.revObs(o.At, o.Rev)
	case o.Pod != nil:
		c.podObs(o.At, o.Pod)
	}
}

func (c *Checker) act(at time.Time, a *ActObs) {
	switch a.Kind {
	case ActDeletePod:
		c.deleted[a.Name] = true
	case ActDeleteSet:
		s := c.set(a.Set)
		s.onPurpose, s.askedAt = true, at
		if a.Orphan {
			s.orphaned = true
		} else if s.uid != "" {
			s.dying[s.uid] = true
		}
	case ActCutOff, ActHeal:
		for _, n := range a.Nodes {
			c.node(n).cutOff = a.Kind == ActCutOff
		}
	case ActNodeLeave:
		c.node(a.Name).leaving = true
	}
}

func strategyOf(o *SetObs) placement.Strategy {
	st := placement.Strategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
		MaxSurge: intstr.Parse(cmp.Or(o.MaxSurge, "0")), MaxUnavailable: intstr.Parse(cmp.Or(o.MaxUnavailable, "1"))}
	if o.OnDelete {
		st.Type = appsv1.OnDeleteDaemonSetStrategyType
	}
	return st
}

func (c *Checker) setObs(at time.Time, o *SetObs) {
	s := c.set(o.Name)
	if o.Op == OpDelete {
		if s.alive && o.UID == s.uid && !s.onPurpose {
			c.flag("lost-set/"+o.Name+"/"+o.UID, Violation{At: at, Invariant: InvLostSet, Set: o.Name,
				Message: "the set was deleted, and the soak did not delete it", Objects: []string{string(o.Kind) + " " + o.Name + " uid " + o.UID}})
		}
		if o.UID == s.uid {
			s.alive = false
		}
		return
	}
	if o.UID == s.uid && s.onPurpose && !o.Deleting && at.Sub(s.askedAt) > AbortedDeleteAfter {
		// The soak's delete never took (the API was away and it gave
		// up): the set is as it was.
		s.onPurpose, s.orphaned = false, false
		delete(s.dying, s.uid)
	}
	if o.UID != s.uid {
		// A new incarnation: the soak made it again.
		s.uid, s.alive, s.onPurpose, s.orphaned = o.UID, true, false, false
		s.disrupted = map[string]time.Time{}
		s.specs = nil
	}
	s.obs = o
	s.desired = append(s.desired, desiredAt{at, int(o.Desired)})
	for len(s.desired) > 1 && at.Sub(s.desired[1].at) > 2*c.DownSettle {
		s.desired = s.desired[1:]
	}
	st := strategyOf(o)
	if n := len(s.specs); n == 0 || s.specs[n-1].strategy.Type != st.Type ||
		s.specs[n-1].strategy.MaxSurge != st.MaxSurge || s.specs[n-1].strategy.MaxUnavailable != st.MaxUnavailable {
		s.specs = append(s.specs, specAt{at: at, strategy: st})
	}
	// Only what is still within the grace, and the one before it.
	for len(s.specs) > 1 && at.Sub(s.specs[1].at) > c.StrategyGrace {
		s.specs = s.specs[1:]
	}
	// A set made again has pods (orphans, or its own) to check at once.
	for node := range c.byNode[o.Name] {
		c.checkNode(at, o.Name, node)
	}
}

// limits are the most generous maxSurge and maxUnavailable of the set's
// strategies within the grace, scaled to desired nodes, and whether any
// of them rolls (not OnDelete).
func (c *Checker) limits(s *setState, desired int) (surge, unavailable int, rolling bool) {
	for _, sp := range s.specs {
		st := sp.strategy
		if !st.RollingUpdate() {
			continue
		}
		rolling = true
		ms, mu, err := st.Limits(desired)
		if err != nil {
			continue
		}
		surge, unavailable = max(surge, ms), max(unavailable, mu)
	}
	return surge, unavailable, rolling
}

// counts is whether a pod counts with set s now: alive, and its own or
// an orphan it may adopt.
func (s *setState) counts(p *PodObs) bool {
	return p.Live() && (p.OwnerUID == "" || p.OwnerUID == s.uid)
}

func (s *setState) minReady() time.Duration {
	if s.obs == nil {
		return 0
	}
	return time.Duration(s.obs.MinReadySeconds) * time.Second
}

func (c *Checker) podObs(at time.Time, p *PodObs) {
	prev := c.pods[p.UID]
	if prev != nil {
		delete(c.byNode[prev.Set][prev.Node], prev.UID)
	}
	if p.Op == OpDelete {
		delete(c.pods, p.UID)
		delete(c.born, p.UID)
		delete(c.replacing, p.UID)
	} else {
		c.pods[p.UID] = p
		if _, ok := c.born[p.UID]; !ok {
			c.born[p.UID] = at
			c.replacing[p.UID] = c.besideUnavailable(at, p)
		}
		if c.byNode[p.Set] == nil {
			c.byNode[p.Set] = map[string]map[string]*PodObs{}
		}
		if c.byNode[p.Set][p.Node] == nil {
			c.byNode[p.Set][p.Node] = map[string]*PodObs{}
		}
		c.byNode[p.Set][p.Node][p.UID] = p
	}
	s := c.set(p.Set)
	if prev != nil {
		c.checkTakenDown(at, s, prev, p)
	}
	if !s.alive {
		return
	}
	if prev != nil && prev.Node != p.Node {
		c.checkNode(at, p.Set, prev.Node)
	}
	c.checkNode(at, p.Set, p.Node)
}

// revObs is invariant 5 for revisions.
func (c *Checker) revObs(at time.Time, r *RevObs) {
	if r.Op != OpDelete {
		return
	}
	s := c.set(r.Set)
	if s.dying[r.OwnerUID] {
		return
	}
	obj := []string{"revision " + r.Name + " hash " + r.Hash}
	switch {
	case s.orphaned:
		c.flag("lost-rev/"+r.Name, Violation{At: at, Invariant: InvLostRev, Set: r.Set,
			Message: "a revision was deleted while its set was deleted with --cascade=orphan", Objects: obj})
	case !s.alive:
		return
	case s.obs != nil && r.Hash == s.obs.UpdateRevision:
		c.flag("lost-rev/"+r.Name, Violation{At: at, Invariant: InvLostRev, Set: r.Set,
			Message: "the set's update revision was deleted", Objects: obj})
	default:
		for _, byUID := range c.byNode[r.Set] {
			for _, q := range byUID {
				if s.counts(q) && q.Hash == r.Hash {
					c.flag("lost-rev/"+r.Name, Violation{At: at, Invariant: InvLostRev, Set: r.Set,
						Message: "a revision was deleted while a live pod of the set runs it", Objects: append(obj, "pod "+q.Name)})
					return
				}
			}
		}
	}
}

// CheckAll feeds every record to a new checker and returns what it found.
func CheckAll(obs []Obs) []Violation {
	c := NewChecker()
	for _, o := range obs {
		c.Observe(o)
	}
	return c.Violations()
}
