package soak

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// What the watches see, and what the soak itself does, as one stream of
// records in the order they happened here (watch.go makes them). The
// checkers (invariants.go) read nothing else, so a run's records, kept
// as JSON lines, can be checked again offline and the checkers can be
// tested with records made by hand.

// Op is what happened to an object.
type Op string

const (
	OpAdd    Op = "add"
	OpUpdate Op = "update"
	OpDelete Op = "delete"
)

// Obs is one record: exactly one of its pointers is set.
type Obs struct {
	At   time.Time `json:"at"`
	Pod  *PodObs   `json:"pod,omitempty"`
	Set  *SetObs   `json:"set,omitempty"`
	Node *NodeObs  `json:"node,omitempty"`
	Rev  *RevObs   `json:"rev,omitempty"`
	Act  *ActObs   `json:"act,omitempty"`
}

// PodObs is a daemon pod of one of the soak's sets as a watch saw it.
type PodObs struct {
	Op   Op     `json:"op"`
	Name string `json:"name"`
	UID  string `json:"uid"`
	// Set is the pod's SetLabel: the set it was made for, owned or not.
	Set string `json:"set"`
	// OwnerUID is its controller's UID, "" while it is orphaned.
	OwnerUID string `json:"ownerUID,omitempty"`
	// Node is the node it is made for (the target-node annotation, else
	// spec.nodeName).
	Node string `json:"node"`
	// Hash is its controller-revision-hash.
	Hash string `json:"hash"`
	// Terminating: its deletionTimestamp is set.
	Terminating bool `json:"terminating,omitempty"`
	// Finished: phase Succeeded or Failed.
	Finished bool `json:"finished,omitempty"`
	// ReadySince is when it last turned Ready (as this watch saw it), zero
	// while it is not Ready.
	ReadySince time.Time `json:"readySince,omitzero"`
	// Listed: the record came from a relist after a broken watch, not a
	// live event: what changed happened at some time in the gap, and the
	// relist shows the changes in name order, not the order they came.
	Listed bool `json:"listed,omitempty"`
	// GateClosed: the in-place readiness gate's condition is False, as the
	// controller writes it just before it patches the pod's images.
	GateClosed bool `json:"gateClosed,omitempty"`
}

// Live reports whether the pod counts as one of its set's pods on its
// node: not going away, not done.
func (p *PodObs) Live() bool { return p.Op != OpDelete && !p.Terminating && !p.Finished }

// AvailableAt reports whether the pod was available at t: Ready for
// minReady by then.
func (p *PodObs) AvailableAt(t time.Time, minReady time.Duration) bool {
	return p.Live() && !p.ReadySince.IsZero() && !p.ReadySince.Add(minReady).After(t)
}

// SetObs is one of the soak's sets, of either kind, with its strategy
// (defaults applied) and status.
type SetObs struct {
	Op                 Op     `json:"op"`
	Name               string `json:"name"`
	UID                string `json:"uid"`
	Kind               Kind   `json:"kind"`
	Generation         int64  `json:"generation"`
	ObservedGeneration int64  `json:"observedGeneration"`
	Desired            int32  `json:"desired"`
	Updated            int32  `json:"updated"`
	Available          int32  `json:"available"`
	UpdateRevision     string `json:"updateRevision,omitempty"`
	OnDelete           bool   `json:"onDelete,omitempty"`
	// MaxSurge and MaxUnavailable are as the set says, or their defaults
	// ("0" and "1").
	MaxSurge        string `json:"maxSurge"`
	MaxUnavailable  string `json:"maxUnavailable"`
	MinReadySeconds int32  `json:"minReadySeconds,omitempty"`
	Deleting        bool   `json:"deleting,omitempty"`
}

// Converged reports whether the set's status says its rollout is done:
// the newest generation observed, and every desired node with an
// updated, available pod.
func (s *SetObs) Converged() bool {
	return s.Op != OpDelete && s.ObservedGeneration >= s.Generation && s.Desired > 0 &&
		s.Updated == s.Desired && s.Available == s.Desired
}

// NodeObs is one of the soak's nodes: whether a rollout may count on it
// (the node lifecycle of placement/lifecycle.go, roughly: Ready, no
// unreachable or not-ready taint, not leaving, not being deleted).
type NodeObs struct {
	Op      Op     `json:"op"`
	Name    string `json:"name"`
	Serving bool   `json:"serving"`
	// Why says why a node does not serve.
	Why string `json:"why,omitempty"`
	// Since is when the node stopped serving as the node says it (its
	// Ready condition's transition, an unreachable taint's time), zero
	// when it does not say: a watch that lags or relists brings the news
	// after the fact.
	Since time.Time `json:"since,omitzero"`
}

// RevObs is a ControllerRevision of one of the soak's sets.
type RevObs struct {
	Op       Op     `json:"op"`
	Name     string `json:"name"`
	Set      string `json:"set"`
	OwnerUID string `json:"ownerUID,omitempty"`
	Hash     string `json:"hash"`
}

// ActKind is something the soak did that the checkers must know of, so
// as not to blame the controller for it.
type ActKind string

const (
	// ActDeletePod: the soak deletes pod Name (an OnDelete roll).
	ActDeletePod ActKind = "delete-pod"
	// ActDeleteSet: the soak deletes set Set (Orphan: --cascade=orphan).
	ActDeleteSet ActKind = "delete-set"
	// ActCreateSet: the soak creates set Set.
	ActCreateSet ActKind = "create-set"
	// ActCutOff and ActHeal: Nodes are cut off from kube-apiserver, and
	// back.
	ActCutOff ActKind = "cut-off"
	ActHeal   ActKind = "heal"
	// ActNodeLeave: node Name leaves (tainted, then deleted).
	ActNodeLeave ActKind = "node-leave"
	// ActFault: a fault starts (Name is its kind); ActFaultEnd: it is over.
	ActFault    ActKind = "fault"
	ActFaultEnd ActKind = "fault-end"
)

// ActObs is one thing the soak did, recorded before it did it.
type ActObs struct {
	Kind   ActKind  `json:"kind"`
	Set    string   `json:"set,omitempty"`
	Name   string   `json:"name,omitempty"`
	Orphan bool     `json:"orphan,omitempty"`
	Nodes  []string `json:"nodes,omitempty"`
}

// WriteObs writes records as JSON lines.
func WriteObs(w io.Writer, obs ...Obs) error {
	enc := json.NewEncoder(w)
	for i := range obs {
		if err := enc.Encode(&obs[i]); err != nil {
			return err
		}
	}
	return nil
}

// ReadObs reads records written by WriteObs, for a check offline.
func ReadObs(r io.Reader) ([]Obs, error) {
	var out []Obs
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var o Obs
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			return out, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, o)
	}
	return out, sc.Err()
}
