package plan

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// podFacts is what a sync derives from one pod of its set: the DaemonPod
// and the node it targets ("" for none).
type podFacts struct {
	DaemonPod
	target string
	// seen is the memo pass that last asked for the pod.
	seen uint32
	// placedIn is the node snapshot placedAt was looked up in (nodeAt).
	placedIn *NodeSnapshot
	placedAt int32
}

// nodeAt is the place of the pod's target node in nodes, and whether it
// is there. The answer is kept until the snapshot changes: syncs share one
// snapshot until a node changes (the controller's node snapshots), and looking each pod's
// node up by name is a map lookup on a string per pod and sync.
func (f *podFacts) nodeAt(nodes *NodeSnapshot) (int32, bool) {
	if f.placedIn != nodes {
		i, known := nodes.byName[f.target]
		if !known {
			i = -1
		}
		f.placedIn, f.placedAt = nodes, i
	}
	return f.placedAt, f.placedAt >= 0
}

// PodMemo keeps each pod's facts from one sync of a set to the next.
//
// Every sync reads every pod of the set, and deriving the facts afresh
// (the revision-hash label, the selector match: map lookups on objects
// spread over the heap, so cache misses) was most of a large set's sync in
// a profile (bench/RESULTS.md). A rolling step changes a few pods at a
// time; the rest are the same objects as last sync.
//
// The memo is keyed by the informer's object, not its name: the informer
// never changes an object it has handed out (an update stores a new one),
// so facts derived from a pointer hold as long as the pointer does, and a
// lookup never reads the pod itself. Only the selector comes from the set:
// the memo starts afresh if it changes.
//
// One sync of the set uses it at a time (the work queue never runs two for
// one key), so it has no lock.
type PodMemo struct {
	sel      labels.Selector
	selector string // sel.String()
	byPod    map[*corev1.Pod]*podFacts
	pass     uint32
	// hashes interns the pods' revision hashes: a set has a few, and
	// every sync compares each pod's with the update revision's and looks
	// it up by revision, which reads the string's bytes. Interned, those
	// are a few strings the cache holds, not one in each pod.
	hashes map[string]string
	// decided is the set's eligibility on each node of a snapshot, kept
	// for the next sync on the same snapshot and version of the set
	// (decisions).
	decided nodeDecisions
}

// nodeDecisions is a set's eligibility on each node of one node snapshot,
// made for one version of the set.
type nodeDecisions struct {
	nodes    *NodeSnapshot
	uid      types.UID
	version  string // the set's resourceVersion
	forNodes []placement.Decision
}

// decisions returns the set's eligibility on each node of nodes, in their
// order. Most syncs of a rolling update find neither the nodes nor the
// set changed since the last one (the set's status is written at most
// once a second while counts move), and deciding again for every node
// means matching its labels and taints each time. A new version of the
// set is decided afresh even if only its status changed: the version is
// the one key that is sure to move with the template.
func (m *PodMemo) decisions(ds *everynodev1alpha1.DaemonSet, nodes *NodeSnapshot) []placement.Decision {
	d := &m.decided
	if d.nodes == nodes && d.uid == ds.UID && d.version == ds.ResourceVersion && ds.ResourceVersion != "" {
		return d.forNodes
	}
	elig := placement.NewEligibility(ds)
	forNodes := make([]placement.Decision, len(nodes.nodes))
	for i, n := range nodes.nodes {
		forNodes[i] = elig.ForNode(n)
	}
	*d = nodeDecisions{nodes: nodes, uid: ds.UID, version: ds.ResourceVersion, forNodes: forNodes}
	return forNodes
}

// ForSelector returns the memo to use with sel: m, or a new memo if m is
// nil or was made for another selector.
func (m *PodMemo) ForSelector(sel labels.Selector) *PodMemo {
	s := sel.String()
	if m != nil && m.selector == s {
		return m
	}
	return &PodMemo{sel: sel, selector: s, byPod: make(map[*corev1.Pod]*podFacts)}
}

// facts returns the facts of pods, in their order, as one pass.
func (m *PodMemo) facts(pods []*corev1.Pod) []*podFacts {
	m.pass++
	out := make([]*podFacts, len(pods))
	for j, pod := range pods {
		out[j] = m.of(pod)
	}
	m.sweep(len(pods))
	return out
}

// of returns the pod's facts, derived once per object.
func (m *PodMemo) of(pod *corev1.Pod) *podFacts {
	f := m.byPod[pod]
	if f == nil {
		f = derivePodFacts(pod, m.sel)
		f.Hash = m.intern(f.Hash)
		m.byPod[pod] = f
	}
	f.seen = m.pass
	return f
}

func (m *PodMemo) intern(s string) string {
	if in, ok := m.hashes[s]; ok {
		return in
	}
	if m.hashes == nil {
		m.hashes = make(map[string]string)
	}
	s = strings.Clone(s) // not the first pod's own bytes
	m.hashes[s] = s
	return s
}

// sweep forgets the objects the last pass did not ask for (pods deleted, or
// replaced by a newer version), once they are a quarter of the memo: a
// sweep reads the whole memo, so it is paid for by the passes that did
// not sweep.
func (m *PodMemo) sweep(asked int) {
	if len(m.byPod) <= asked+asked/4+16 {
		return
	}
	for pod, f := range m.byPod {
		if f.seen != m.pass {
			delete(m.byPod, pod)
		}
	}
}

func derivePodFacts(pod *corev1.Pod, sel labels.Selector) *podFacts {
	f := &podFacts{DaemonPod: newDaemonPod(pod)}
	f.target, _ = placement.TargetNode(pod) // "" when it names no node
	f.selected = sel.Matches(labels.Set(pod.Labels))
	return f
}
