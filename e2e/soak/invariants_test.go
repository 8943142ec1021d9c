package soak

import (
	"bytes"
	"reflect"
	"slices"
	"testing"
	"time"
)

// A little language for recorded streams: a clock, and records at it.

var t0 = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

type stream struct {
	now time.Time
	obs []Obs
}

func newStream() *stream { return &stream{now: t0} }

func (s *stream) after(d time.Duration) *stream { s.now = s.now.Add(d); return s }

func (s *stream) add(o Obs) *stream {
	o.At = s.now
	s.obs = append(s.obs, o)
	return s
}

func (s *stream) set(name, uid, surge, unavailable string, desired int32) *stream {
	return s.add(Obs{Set: &SetObs{Op: OpAdd, Name: name, UID: uid, Kind: KindEverynode, Generation: 1, ObservedGeneration: 1,
		Desired: desired, MaxSurge: surge, MaxUnavailable: unavailable}})
}

// rollingTo records set name rolling out revision update (generation 2,
// observed).
func (s *stream) rollingTo(name, uid, surge, unavailable string, desired int32, update string) *stream {
	return s.add(Obs{Set: &SetObs{Op: OpUpdate, Name: name, UID: uid, Kind: KindEverynode, Generation: 2, ObservedGeneration: 2,
		Desired: desired, MaxSurge: surge, MaxUnavailable: unavailable, UpdateRevision: update}})
}

func (s *stream) onDeleteSet(name, uid string, desired int32) *stream {
	return s.add(Obs{Set: &SetObs{Op: OpAdd, Name: name, UID: uid, Kind: KindEverynode, Desired: desired, OnDelete: true}})
}

// pod records a live pod of set on node; ready: Ready since an hour ago.
func (s *stream) pod(set, owner, name, node, hash string, ready bool) *stream {
	p := &PodObs{Op: OpUpdate, Name: name, UID: "uid-" + name, Set: set, OwnerUID: owner, Node: node, Hash: hash}
	if ready {
		p.ReadySince = t0.Add(-time.Hour)
	}
	return s.add(Obs{Pod: p})
}

// readyNow records the pod Ready from now.
func (s *stream) readyNow(set, owner, name, node, hash string) *stream {
	return s.add(Obs{Pod: &PodObs{Op: OpUpdate, Name: name, UID: "uid-" + name, Set: set, OwnerUID: owner, Node: node, Hash: hash, ReadySince: s.now}})
}

func (s *stream) terminating(set, owner, name, node, hash string) *stream {
	return s.add(Obs{Pod: &PodObs{Op: OpUpdate, Name: name, UID: "uid-" + name, Set: set, OwnerUID: owner, Node: node, Hash: hash,
		Terminating: true, ReadySince: t0.Add(-time.Hour)}})
}

func (s *stream) act(a ActObs) *stream { return s.add(Obs{Act: &a}) }

// fleet is set name with uid u over nodes n1..n<k>, one available pod of
// revision old on each.
func fleet(name, u, surge, unavailable string, k int) *stream {
	s := newStream().set(name, u, surge, unavailable, int32(k))
	for i := 1; i <= k; i++ {
		n := "n" + string(rune('0'+i))
		s.pod(name, u, name+"-old-"+n, n, "old", true)
	}
	return s.after(time.Minute)
}

func invariants(vs []Violation) []Invariant {
	var out []Invariant
	for _, v := range vs {
		out = append(out, v.Invariant)
	}
	return out
}

func TestCheckers(t *testing.T) {
	tests := map[string]struct {
		stream *stream
		want   []Invariant
	}{
		"two pods of a set on a node": {
			stream: fleet("a", "u1", "", "1", 3).pod("a", "u1", "a-dup", "n2", "old", false),
			want:   []Invariant{InvDuplicate},
		},
		"an orphan and a new pod on a node": {
			// The set was made again: its orphan counts with it.
			stream: fleet("a", "u1", "", "1", 2).
				act(ActObs{Kind: ActDeleteSet, Set: "a", Orphan: true}).
				add(Obs{Set: &SetObs{Op: OpDelete, Name: "a", UID: "u1"}}).
				pod("a", "", "a-old-n1", "n1", "old", true).
				pod("a", "", "a-old-n2", "n2", "old", true).
				act(ActObs{Kind: ActCreateSet, Set: "a"}).
				set("a", "u2", "", "1", 2).
				pod("a", "u2", "a-new", "n1", "old", false),
			want: []Invariant{InvDuplicate},
		},
		"a pod of the deleted incarnation beside the new one's": {
			stream: fleet("a", "u1", "", "1", 2).
				act(ActObs{Kind: ActDeleteSet, Set: "a"}).
				add(Obs{Set: &SetObs{Op: OpDelete, Name: "a", UID: "u1"}}).
				set("a", "u2", "", "1", 2).
				pod("a", "u2", "a-new", "n1", "old", false),
		},
		"a surge pair within maxSurge": {
			stream: fleet("s", "u1", "1", "0", 3).pod("s", "u1", "s-new-n1", "n1", "new", false),
		},
		"surge pairs past maxSurge": {
			stream: fleet("s", "u1", "1", "0", 3).
				pod("s", "u1", "s-new-n1", "n1", "new", false).
				pod("s", "u1", "s-new-n2", "n2", "new", false),
			want: []Invariant{InvSurge},
		},
		"a pair whose new pod is available is no longer surging": {
			// The old pod's delete is on its way: the rollout surges on
			// the next node meanwhile, as upstream does.
			stream: fleet("s", "u1", "1", "0", 3).
				rollingTo("s", "u1", "1", "0", 3, "new").
				pod("s", "u1", "s-new-n1", "n1", "new", true).
				after(2*time.Second).
				pod("s", "u1", "s-new-n2", "n2", "new", false).
				after(2 * time.Second),
		},
		"surge pairs past maxSurge, new pods not yet available": {
			stream: fleet("s", "u1", "1", "0", 3).
				rollingTo("s", "u1", "1", "0", 3, "new").
				pod("s", "u1", "s-new-n1", "n1", "new", false).
				pod("s", "u1", "s-new-n2", "n2", "new", false),
			want: []Invariant{InvSurge},
		},
		"surge pairs past maxSurge, one of them on a node back from unreachable": {
			// n1 surged, then went unreachable: the rollout skipped it and
			// surged on n2. n1 is back with its pair, not yet available.
			stream: fleet("s", "u1", "1", "0", 3).
				rollingTo("s", "u1", "1", "0", 3, "new").
				pod("s", "u1", "s-new-n1", "n1", "new", false).
				after(5*time.Second).
				add(Obs{Node: &NodeObs{Op: OpUpdate, Name: "n1", Why: "Unreachable: Ready Unknown for 40s", Since: t0.Add(65 * time.Second)}}).
				pod("s", "u1", "s-new-n2", "n2", "new", false).
				after(5 * time.Second).
				add(Obs{Node: &NodeObs{Op: OpUpdate, Name: "n1", Serving: true}}).
				after(5 * time.Second),
		},
		"a replacement of an unavailable old pod beside surge pairs": {
			// n2's old pod is not Ready (its node was away): upstream
			// replaces it at once, outside maxSurge.
			stream: fleet("s", "u1", "1", "0", 3).
				rollingTo("s", "u1", "1", "0", 3, "new").
				pod("s", "u1", "s-new-n1", "n1", "new", false).
				pod("s", "u1", "s-old-n2", "n2", "old", false).
				after(time.Second).
				pod("s", "u1", "s-new-n2", "n2", "new", false).
				after(5 * time.Second),
		},
		"surge pairs past maxSurge after a node came back": {
			// The node was out before the pair began: its pair counts.
			stream: fleet("s", "u1", "1", "0", 3).
				add(Obs{Node: &NodeObs{Op: OpUpdate, Name: "n1", Why: "not Ready", Since: t0.Add(50 * time.Second)}}).
				after(5*time.Second).
				add(Obs{Node: &NodeObs{Op: OpUpdate, Name: "n1", Serving: true}}).
				after(5*time.Second).
				pod("s", "u1", "s-new-n1", "n1", "new", false).
				pod("s", "u1", "s-new-n2", "n2", "new", false).
				after(5 * time.Second),
			want: []Invariant{InvSurge},
		},
		"two pods of one revision on a node of a surge set": {
			stream: fleet("s", "u1", "1", "0", 3).pod("s", "u1", "s-again", "n1", "old", false),
			want:   []Invariant{InvDuplicate},
		},
		"an available pod deleted with maxUnavailable already down": {
			stream: fleet("a", "u1", "", "1", 3).
				terminating("a", "u1", "a-old-n1", "n1", "old").
				pod("a", "u1", "a-new-n1", "n1", "new", false).
				after(time.Second).
				terminating("a", "u1", "a-old-n2", "n2", "old"),
			want: []Invariant{InvUnavailable},
		},
		"take-downs within the budget of the next status's desired count": {
			// 10% of 10 nodes is 1; three nodes back in service make 13
			// desired, 2 down, which the controller's next status says.
			stream: fleet("a", "u1", "", "10%", 10).
				terminating("a", "u1", "a-old-n1", "n1", "old").
				after(100*time.Millisecond).
				terminating("a", "u1", "a-old-n2", "n2", "old").
				after(3*time.Second).
				rollingTo("a", "u1", "", "10%", 13, "new").
				after(time.Minute),
		},
		"a status long after the take-down does not raise the budget": {
			stream: fleet("a", "u1", "", "10%", 10).
				terminating("a", "u1", "a-old-n1", "n1", "old").
				after(100*time.Millisecond).
				terminating("a", "u1", "a-old-n2", "n2", "old").
				after(10*time.Second).
				rollingTo("a", "u1", "", "10%", 13, "new").
				after(time.Minute),
			want: []Invariant{InvUnavailable},
		},
		"pods gone in a watch gap are not judged when they went": {
			// A delete with no terminating state seen before: the watch
			// was broken (a kube-apiserver or etcd restart) and the relist
			// shows the end, in its own order. The node stays down until
			// a new pod is available.
			stream: fleet("a", "u1", "", "1", 3).
				add(Obs{Pod: &PodObs{Op: OpDelete, Name: "a-old-n1", UID: "uid-a-old-n1", Set: "a", OwnerUID: "u1", Node: "n1", Hash: "old"}}).
				add(Obs{Pod: &PodObs{Op: OpDelete, Name: "a-old-n2", UID: "uid-a-old-n2", Set: "a", OwnerUID: "u1", Node: "n2", Hash: "old"}}),
		},
		"a node down from a watch gap still counts against the budget": {
			stream: fleet("a", "u1", "", "1", 3).
				add(Obs{Pod: &PodObs{Op: OpDelete, Name: "a-old-n1", UID: "uid-a-old-n1", Set: "a", OwnerUID: "u1", Node: "n1", Hash: "old"}}).
				after(time.Second).
				terminating("a", "u1", "a-old-n2", "n2", "old"),
			want: []Invariant{InvUnavailable},
		},
		"a node down from a watch gap recovers with a pod listed Ready": {
			// The relist lists the replacement already Ready, since
			// before the delete's record.
			stream: fleet("a", "u1", "", "1", 3).
				add(Obs{Pod: &PodObs{Op: OpDelete, Name: "a-old-n1", UID: "uid-a-old-n1", Set: "a", OwnerUID: "u1", Node: "n1", Hash: "old"}}).
				add(Obs{Pod: &PodObs{Op: OpAdd, Name: "a-new-n1", UID: "uid-a-new-n1", Set: "a", OwnerUID: "u1", Node: "n1", Hash: "new", ReadySince: t0}}).
				after(time.Second).
				terminating("a", "u1", "a-old-n2", "n2", "old"),
		},
		"a relist's instant of two pods on a node is no duplicate": {
			// The relist lists the new pods, then drops the old ones that
			// went in the gap, within the same instant.
			stream: fleet("a", "u1", "", "1", 3).
				add(Obs{Pod: &PodObs{Op: OpAdd, Name: "a-new-n1", UID: "uid-a-new-n1", Set: "a", OwnerUID: "u1", Node: "n1", Hash: "new", ReadySince: t0}}).
				add(Obs{Pod: &PodObs{Op: OpDelete, Name: "a-old-n1", UID: "uid-a-old-n1", Set: "a", OwnerUID: "u1", Node: "n1", Hash: "old"}}).
				after(time.Minute).
				pod("a", "u1", "a-old-n2", "n2", "old", true),
		},
		"two pods on a node past the settling time are a duplicate": {
			stream: fleet("a", "u1", "", "1", 3).
				add(Obs{Pod: &PodObs{Op: OpAdd, Name: "a-new-n1", UID: "uid-a-new-n1", Set: "a", OwnerUID: "u1", Node: "n1", Hash: "new", ReadySince: t0}}).
				after(2 * time.Second).
				add(Obs{Pod: &PodObs{Op: OpDelete, Name: "a-old-n1", UID: "uid-a-old-n1", Set: "a", OwnerUID: "u1", Node: "n1", Hash: "old"}}),
			want: []Invariant{InvDuplicate},
		},
		"a pod a relist shows terminating is not judged": {
			stream: fleet("a", "u1", "", "1", 3).
				add(Obs{Pod: &PodObs{Op: OpUpdate, Name: "a-old-n1", UID: "uid-a-old-n1", Set: "a", OwnerUID: "u1", Node: "n1", Hash: "old",
					Terminating: true, Listed: true, ReadySince: t0.Add(-time.Hour)}}).
				add(Obs{Pod: &PodObs{Op: OpUpdate, Name: "a-old-n2", UID: "uid-a-old-n2", Set: "a", OwnerUID: "u1", Node: "n2", Hash: "old",
					Terminating: true, Listed: true, ReadySince: t0.Add(-time.Hour)}}),
		},
		"a node the records later show unreachable from before is not counted down": {
			// A lagging node watch: n1 went Ready Unknown before the
			// take-down on n2, and its record comes after it.
			stream: fleet("a", "u1", "", "1", 3).
				terminating("a", "u1", "a-old-n1", "n1", "old").
				pod("a", "u1", "a-new-n1", "n1", "new", false).
				after(time.Second).
				terminating("a", "u1", "a-old-n2", "n2", "old").
				after(5 * time.Second).
				add(Obs{Node: &NodeObs{Op: OpUpdate, Name: "n1", Why: "Unreachable: Ready Unknown for 40s", Since: t0.Add(30 * time.Second)}}),
		},
		"a node that stopped serving after the take-down still counts": {
			stream: fleet("a", "u1", "", "1", 3).
				terminating("a", "u1", "a-old-n1", "n1", "old").
				pod("a", "u1", "a-new-n1", "n1", "new", false).
				after(time.Second).
				terminating("a", "u1", "a-old-n2", "n2", "old").
				after(5 * time.Second).
				add(Obs{Node: &NodeObs{Op: OpUpdate, Name: "n1", Why: "not Ready", Since: t0.Add(90 * time.Second)}}),
			want: []Invariant{InvUnavailable},
		},
		"a node back in service by the judging still counts out when it was": {
			stream: fleet("a", "u1", "", "1", 3).
				terminating("a", "u1", "a-old-n1", "n1", "old").
				pod("a", "u1", "a-new-n1", "n1", "new", false).
				after(time.Second).
				terminating("a", "u1", "a-old-n2", "n2", "old").
				after(5*time.Second).
				add(Obs{Node: &NodeObs{Op: OpUpdate, Name: "n1", Why: "Unreachable: Ready Unknown for 40s", Since: t0.Add(30 * time.Second)}}).
				after(time.Second).
				add(Obs{Node: &NodeObs{Op: OpUpdate, Name: "n1", Serving: true}}).
				after(time.Minute).
				pod("a", "u1", "a-new-n1", "n1", "new", true),
		},
		"two pods on a node in a long relist are judged after it": {
			// The relist delivers for 3 s; the new pod on n1 comes first,
			// the old one's delete last.
			stream: fleet("a", "u1", "", "1", 3).
				add(Obs{Pod: &PodObs{Op: OpAdd, Name: "a-new-n1", UID: "uid-a-new-n1", Set: "a", OwnerUID: "u1", Node: "n1", Hash: "new", ReadySince: t0, Listed: true}}).
				after(1500 * time.Millisecond).
				add(Obs{Pod: &PodObs{Op: OpUpdate, Name: "a-old-n3", UID: "uid-a-old-n3", Set: "a", OwnerUID: "u1", Node: "n3", Hash: "old", ReadySince: t0, Listed: true}}).
				after(1500 * time.Millisecond).
				add(Obs{Pod: &PodObs{Op: OpDelete, Name: "a-old-n1", UID: "uid-a-old-n1", Set: "a", OwnerUID: "u1", Node: "n1", Hash: "old", Listed: true}}),
		},
		"minReadySeconds counted from a condition's whole second": {
			// The replacement turned Ready at .9 s as the soak saw it;
			// its condition says the whole second, so the controller
			// counts it available 0.9 s before the soak does.
			stream: fleet("a", "u1", "", "1", 3).
				add(Obs{Set: &SetObs{Op: OpUpdate, Name: "a", UID: "u1", Kind: KindEverynode, Generation: 1, ObservedGeneration: 1,
					Desired: 3, MaxUnavailable: "1", MinReadySeconds: 5}}).
				terminating("a", "u1", "a-old-n1", "n1", "old").
				pod("a", "u1", "a-new-n1", "n1", "new", false).
				after(900*time.Millisecond).readyNow("a", "u1", "a-new-n1", "n1", "new").
				after(4200*time.Millisecond).
				terminating("a", "u1", "a-old-n2", "n2", "old"),
		},
		"one node at a time": {
			stream: fleet("a", "u1", "", "1", 3).
				terminating("a", "u1", "a-old-n1", "n1", "old").
				pod("a", "u1", "a-new-n1", "n1", "new", false).
				after(time.Second).readyNow("a", "u1", "a-new-n1", "n1", "new").
				after(time.Second).
				terminating("a", "u1", "a-old-n2", "n2", "old"),
		},
		"a patch in place past the budget": {
			stream: fleet("a", "u1", "", "1", 3).
				pod("a", "u1", "a-old-n1", "n1", "new", true).
				after(time.Second).
				pod("a", "u1", "a-old-n2", "n2", "new", true),
			want: []Invariant{InvUnavailable},
		},
		"gates closed for updates in place past the budget": {
			stream: fleet("a", "u1", "", "1", 3).
				add(Obs{Pod: &PodObs{Op: OpUpdate, Name: "a-old-n1", UID: "uid-a-old-n1", Set: "a", OwnerUID: "u1", Node: "n1", Hash: "old", GateClosed: true}}).
				after(time.Second).
				add(Obs{Pod: &PodObs{Op: OpUpdate, Name: "a-old-n2", UID: "uid-a-old-n2", Set: "a", OwnerUID: "u1", Node: "n2", Hash: "old", GateClosed: true}}),
			want: []Invariant{InvUnavailable},
		},
		"a delete of the soak that never took": {
			// The set goes on with no deletionTimestamp: its rollout is
			// checked again, and a delete by someone else is a loss.
			stream: fleet("a", "u1", "", "1", 3).
				act(ActObs{Kind: ActDeleteSet, Set: "a", Orphan: true}).
				after(time.Minute).set("a", "u1", "", "1", 3).
				terminating("a", "u1", "a-old-n1", "n1", "old").
				after(time.Second).
				terminating("a", "u1", "a-old-n2", "n2", "old").
				add(Obs{Set: &SetObs{Op: OpDelete, Name: "a", UID: "u1"}}),
			want: []Invariant{InvUnavailable, InvLostSet},
		},
		"a surge set deleting an old pod with no new one available": {
			stream: fleet("s", "u1", "1", "0", 3).terminating("s", "u1", "s-old-n1", "n1", "old"),
			want:   []Invariant{InvUnavailable},
		},
		"a surge set deleting an old pod beside an available new one": {
			stream: fleet("s", "u1", "1", "0", 3).
				pod("s", "u1", "s-new-n1", "n1", "new", false).
				after(time.Second).readyNow("s", "u1", "s-new-n1", "n1", "new").
				after(time.Second).
				terminating("s", "u1", "s-old-n1", "n1", "old"),
		},
		"pods the soak deleted are not the controller's doing": {
			stream: fleet("a", "u1", "", "1", 3).
				act(ActObs{Kind: ActDeletePod, Name: "a-old-n1"}).terminating("a", "u1", "a-old-n1", "n1", "old").
				act(ActObs{Kind: ActDeletePod, Name: "a-old-n2"}).terminating("a", "u1", "a-old-n2", "n2", "old"),
		},
		"an OnDelete set": {
			stream: newStream().onDeleteSet("o", "u1", 2).
				pod("o", "u1", "o-1", "n1", "old", true).pod("o", "u1", "o-2", "n2", "old", true).
				terminating("o", "u1", "o-1", "n1", "old").terminating("o", "u1", "o-2", "n2", "old"),
		},
		"pods on a node cut off": {
			stream: fleet("a", "u1", "", "1", 3).
				act(ActObs{Kind: ActCutOff, Nodes: []string{"n1", "n2"}}).
				terminating("a", "u1", "a-old-n1", "n1", "old").
				terminating("a", "u1", "a-old-n2", "n2", "old"),
		},
		"a pod that only just turned available": {
			// The controller may not have seen it Ready yet.
			stream: fleet("a", "u1", "", "1", 3).
				terminating("a", "u1", "a-old-n1", "n1", "old").
				readyNow("a", "u1", "a-old-n2", "n2", "old").
				after(500*time.Millisecond).
				terminating("a", "u1", "a-old-n2", "n2", "old"),
		},
		"a set deleted by someone else": {
			stream: fleet("a", "u1", "", "1", 1).add(Obs{Set: &SetObs{Op: OpDelete, Name: "a", UID: "u1"}}),
			want:   []Invariant{InvLostSet},
		},
		"a set the soak deleted": {
			stream: fleet("a", "u1", "", "1", 1).act(ActObs{Kind: ActDeleteSet, Set: "a"}).add(Obs{Set: &SetObs{Op: OpDelete, Name: "a", UID: "u1"}}),
		},
		"a pod gone while its set is orphan-deleted": {
			stream: fleet("a", "u1", "", "1", 2).
				act(ActObs{Kind: ActDeleteSet, Set: "a", Orphan: true}).
				add(Obs{Set: &SetObs{Op: OpDelete, Name: "a", UID: "u1"}}).
				pod("a", "", "a-old-n1", "n1", "old", true).
				after(3*time.Second).
				terminating("a", "", "a-old-n1", "n1", "old"),
			want: []Invariant{InvLostPod},
		},
		"a pod gone just as its set is orphan-deleted": {
			// A sync begun before the controller saw the deletion.
			stream: fleet("a", "u1", "", "1", 2).
				act(ActObs{Kind: ActDeleteSet, Set: "a", Orphan: true}).
				after(100*time.Millisecond).
				terminating("a", "u1", "a-old-n1", "n1", "old"),
		},
		"a revision gone while its set is orphan-deleted": {
			stream: fleet("a", "u1", "", "1", 2).
				act(ActObs{Kind: ActDeleteSet, Set: "a", Orphan: true}).
				add(Obs{Rev: &RevObs{Op: OpDelete, Name: "a-old", Set: "a", Hash: "old"}}),
			want: []Invariant{InvLostRev},
		},
		"a revision a live pod runs": {
			stream: fleet("a", "u1", "", "1", 2).add(Obs{Rev: &RevObs{Op: OpDelete, Name: "a-old", Set: "a", OwnerUID: "u1", Hash: "old"}}),
			want:   []Invariant{InvLostRev},
		},
		"an old revision no pod runs": {
			stream: fleet("a", "u1", "", "1", 2).add(Obs{Rev: &RevObs{Op: OpDelete, Name: "a-older", Set: "a", OwnerUID: "u1", Hash: "older"}}),
		},
		"revisions of a set deleted with cascade": {
			stream: fleet("a", "u1", "", "1", 2).act(ActObs{Kind: ActDeleteSet, Set: "a"}).
				add(Obs{Rev: &RevObs{Op: OpDelete, Name: "a-old", Set: "a", OwnerUID: "u1", Hash: "old"}}),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vs := CheckAll(tc.stream.obs)
			// Some invariants are judged once they settle: the order
			// of kinds is not the point.
			got, want := invariants(vs), slices.Clone(tc.want)
			slices.Sort(got)
			slices.Sort(want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("violations %v, want %v", vs, tc.want)
			}
		})
	}
}

// A breach that goes on is listed once, with a count.
func TestViolationsRepeatOnce(t *testing.T) {
	s := fleet("a", "u1", "", "1", 2).pod("a", "u1", "a-dup", "n1", "old", false)
	for range 5 {
		s.after(time.Second).pod("a", "u1", "a-dup", "n1", "old", false)
	}
	vs := CheckAll(s.obs)
	// Six records a second apart: the first settles with the second,
	// then each record but the last, still pending, repeats it.
	if len(vs) != 1 || vs[0].Repeats != 4 {
		t.Fatalf("violations %v, want one duplicate repeated 4 times", vs)
	}
	if got := vs[0].String(); got == "" || !bytes.Contains([]byte(got), []byte("a-dup")) {
		t.Errorf("String %q does not name the pod", got)
	}
}

// Records kept as JSON lines check the same offline.
func TestRecordsRoundTrip(t *testing.T) {
	s := fleet("a", "u1", "", "1", 3).
		terminating("a", "u1", "a-old-n1", "n1", "old").
		after(time.Second).
		terminating("a", "u1", "a-old-n2", "n2", "old")
	var buf bytes.Buffer
	if err := WriteObs(&buf, s.obs...); err != nil {
		t.Fatal(err)
	}
	back, err := ReadObs(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(CheckAll(back), CheckAll(s.obs)) || len(CheckAll(back)) != 1 {
		t.Errorf("offline %v, online %v", CheckAll(back), CheckAll(s.obs))
	}
}

func TestConverged(t *testing.T) {
	ok := SetObs{Generation: 3, ObservedGeneration: 3, Desired: 5, Updated: 5, Available: 5}
	if !ok.Converged() {
		t.Errorf("%+v not converged", ok)
	}
	for name, s := range map[string]SetObs{
		"stale generation": {Generation: 4, ObservedGeneration: 3, Desired: 5, Updated: 5, Available: 5},
		"not all updated":  {Generation: 3, ObservedGeneration: 3, Desired: 5, Updated: 4, Available: 5},
		"not available":    {Generation: 3, ObservedGeneration: 3, Desired: 5, Updated: 5, Available: 4},
		"no nodes":         {Generation: 3, ObservedGeneration: 3},
	} {
		if s.Converged() {
			t.Errorf("%s: %+v converged", name, s)
		}
	}
}
