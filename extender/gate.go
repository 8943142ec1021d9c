package extender

import (
	"hash/maphash"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"everynode.io/everynode/index"
	"everynode.io/everynode/placement"
)

// gateCache knows which nodes a readiness gate holds back, and why.
//
// The filter for ordinary pods reads it on every scheduling attempt in the
// cluster, so reads are one atomic load of an immutable map; all the work is
// done here, on informer events: a set event recomputes that set over all
// nodes, a node event that node for every gated set, a daemon pod event its
// one (set, node) pair. Each sync reads the listers while holding mu, and the
// informers update their stores before they notify, so whatever order the
// three informers deliver in, the last sync of a pair has seen its latest
// inputs.
type gateCache struct {
	cluster *cluster

	mu sync.Mutex
	// sets holds the sets with nodeReadinessGate: true, by key.
	sets map[string]*setGate
	// byNode lists, sorted, the keys of the sets that gate each node.
	byNode map[string][]string
	// reasons is the master copy of the snapshot: gated node -> reason.
	reasons map[string]string

	// snapshot is built from reasons on each change and never written
	// after it is stored; nil when no node is gated.
	snapshot atomic.Pointer[gateSnapshot]
}

// gateSnapshot is what the filter reads: the gated nodes with their
// reasons, and a one-hash Bloom filter over their names. Gated nodes are
// few (fresh nodes), so for nearly every candidate a clear bit answers
// "not gated" without the map lookup, which costs a few times more.
type gateSnapshot struct {
	reasons map[string]string
	bloom   [bloomWords]uint64
}

// bloomWords sizes the Bloom filter: 4,096 bits, one cache-friendly
// half-kilobyte; with 50 gated nodes about 1% of lookups reach the map.
const bloomWords = 64

// bloomSeed keys the filter's hash; any seed works, a random one keeps the
// collisions from being the same everywhere.
var bloomSeed = maphash.MakeSeed()

// bloomBit returns the word and bit of name in the filter.
func bloomBit(name string) (word int, bit uint64) {
	h := maphash.String(bloomSeed, name)
	return int(h>>6) % bloomWords, 1 << (h & 63)
}

// lookup returns the reason a node is gated, if it is.
func (s *gateSnapshot) lookup(name string) (string, bool) {
	if w, bit := bloomBit(name); s.bloom[w]&bit == 0 {
		return "", false
	}
	reason, ok := s.reasons[name]
	return reason, ok
}

// setGate is what the cache remembers about one gated set.
type setGate struct {
	uid        types.UID
	generation int64
	// eligibility is prepared once per spec, not once per node event.
	eligibility *placement.Eligibility
	// nodes holds the nodes this set gates now.
	nodes map[string]struct{}
}

func newGateCache(c *cluster) *gateCache {
	return &gateCache{
		cluster: c,
		sets:    map[string]*setGate{},
		byNode:  map[string][]string{},
		reasons: map[string]string{},
	}
}

// gated returns the current snapshot, nil when no node is gated. The
// caller must not modify it.
func (g *gateCache) gated() *gateSnapshot {
	return g.snapshot.Load()
}

// gates decides whether one set holds one node back: the set should run
// there (or keeps running there, for a node tainted NoSchedule after its pod
// came) and none of its pods there is Ready. A node that will never get a
// pod is not gated, or it would be closed for good.
func gates(elig *placement.Eligibility, node *corev1.Node, st podState) bool {
	if st.ready {
		return false
	}
	d := elig.ForNode(node)
	return d.ShouldRun || (d.ShouldContinueRunning && st.active)
}

// podState sums up a set's pods on one node.
type podState struct {
	active bool // some pod is neither finished nor being deleted
	ready  bool // some active pod is Ready
}

func (s *podState) add(pod *corev1.Pod) {
	if !placement.IsPodActive(pod) {
		return
	}
	s.active = true
	if placement.IsPodReady(pod) {
		s.ready = true
	}
}

// syncSet recomputes one set over every node: on creation, deletion, and
// when its spec (generation) or gate flag changes. Status updates, the
// common case during a rollout, keep the generation and cost a map lookup.
func (g *gateCache) syncSet(key string) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.sets[key]
	set, err := g.cluster.sets.DaemonSets(namespace).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		klog.ErrorS(err, "Cannot read DaemonSet for the readiness gate", "daemonset", key)
		return
	}
	if err != nil || !set.Spec.NodeReadinessGate || set.DeletionTimestamp != nil {
		if old == nil {
			return
		}
		delete(g.sets, key)
		changed := false
		for node := range old.nodes {
			changed = g.setNode(node, key, false) || changed
		}
		if changed {
			g.publish()
		}
		return
	}
	// Generation 0 means a client that does not maintain it: recompute.
	if old != nil && old.uid == set.UID && old.generation == set.Generation && set.Generation != 0 {
		return
	}
	sg := &setGate{
		uid:         set.UID,
		generation:  set.Generation,
		eligibility: placement.NewEligibility(set),
		nodes:       map[string]struct{}{},
	}
	states := map[string]podState{}
	objs, err := g.cluster.pods.ByIndex(index.DaemonPodsBySetUID, string(set.UID))
	if err != nil {
		klog.ErrorS(err, "Cannot list daemon pods for the readiness gate", "daemonset", key)
		return
	}
	for _, obj := range objs {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			continue
		}
		if node, ok := placement.TargetNode(pod); ok {
			st := states[node]
			st.add(pod)
			states[node] = st
		}
	}
	nodes, err := g.cluster.nodes.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Cannot list nodes for the readiness gate", "daemonset", key)
		return
	}
	for _, node := range nodes {
		if gates(sg.eligibility, node, states[node.Name]) {
			sg.nodes[node.Name] = struct{}{}
		}
	}
	g.sets[key] = sg
	changed := false
	if old != nil {
		for node := range old.nodes {
			if _, still := sg.nodes[node]; !still {
				changed = g.setNode(node, key, false) || changed
			}
		}
	}
	for node := range sg.nodes {
		changed = g.setNode(node, key, true) || changed
	}
	if changed {
		g.publish()
	}
}

// syncNode recomputes one node for every gated set: on node creation,
// deletion, and label or taint changes (the only node fields eligibility
// reads besides the name).
func (g *gateCache) syncNode(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.sets) == 0 {
		return
	}
	node, err := g.cluster.nodes.Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		klog.ErrorS(err, "Cannot read node for the readiness gate", "node", name)
		return
	}
	changed := false
	if err != nil { // gone: a node that does not exist gates nothing
		for key := range g.sets {
			changed = g.setNode(name, key, false) || changed
		}
	} else {
		states, err := g.podStatesOn(name)
		if err != nil {
			klog.ErrorS(err, "Cannot list daemon pods for the readiness gate", "node", name)
			return
		}
		for key, sg := range g.sets {
			changed = g.setNode(name, key, gates(sg.eligibility, node, states[key])) || changed
		}
	}
	if changed {
		g.publish()
	}
}

// syncPair recomputes one gated set on one node, after an event on one of
// the set's pods there.
func (g *gateCache) syncPair(setKey, nodeName string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	sg := g.sets[setKey]
	if sg == nil {
		return
	}
	node, err := g.cluster.nodes.Get(nodeName)
	if err != nil && !apierrors.IsNotFound(err) {
		klog.ErrorS(err, "Cannot read node for the readiness gate", "node", nodeName)
		return
	}
	gated := false
	if err == nil {
		// Only everynode's kind has nodeReadinessGate.
		pods, err := g.cluster.daemonPodsOn(nodeName, setKey, placement.ControllerRef)
		if err != nil {
			klog.ErrorS(err, "Cannot list daemon pods for the readiness gate", "node", nodeName)
			return
		}
		var st podState
		for _, pod := range pods {
			st.add(pod)
		}
		gated = gates(sg.eligibility, node, st)
	}
	if g.setNode(nodeName, setKey, gated) {
		g.publish()
	}
}

// podStatesOn sums up, per set key, the daemon pods that target node.
func (g *gateCache) podStatesOn(node string) (map[string]podState, error) {
	objs, err := g.cluster.pods.ByIndex(index.DaemonPodsByNode, node)
	if err != nil {
		return nil, err
	}
	states := make(map[string]podState, len(objs))
	for _, obj := range objs {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			continue
		}
		ref := placement.ControllerRef(pod)
		if ref == nil {
			continue
		}
		key := index.SetKey(pod.Namespace, ref.Name)
		st := states[key]
		st.add(pod)
		states[key] = st
	}
	return states, nil
}

// setNode records whether set key gates node, in the set's own node set
// and in the per-node views, and reports whether the snapshot changed. Callers hold mu and publish once after their last
// change, so a set recomputed over 5,000 nodes copies the map once.
func (g *gateCache) setNode(node, key string, gated bool) bool {
	sg := g.sets[key]
	if sg != nil {
		if gated {
			sg.nodes[node] = struct{}{}
		} else {
			delete(sg.nodes, node)
		}
	}
	keys := g.byNode[node]
	i, found := slices.BinarySearch(keys, key)
	switch {
	case gated && !found:
		keys = slices.Insert(keys, i, key)
	case !gated && found:
		keys = slices.Delete(keys, i, i+1)
	default:
		return false
	}
	if len(keys) == 0 {
		delete(g.byNode, node)
		delete(g.reasons, node)
		return true
	}
	g.byNode[node] = keys
	g.reasons[node] = reasonGated(keys)
	return true
}

// publish replaces the snapshot with a copy of reasons. The copy is
// proportional to the gated nodes (BenchmarkGatePublish) and happens on
// informer events only,
// far less often than filter calls, which then need no lock at all.
func (g *gateCache) publish() {
	gatedNodes.Set(float64(len(g.reasons)))
	if len(g.reasons) == 0 {
		g.snapshot.Store(nil)
		return
	}
	snap := &gateSnapshot{reasons: maps.Clone(g.reasons)}
	for name := range snap.reasons {
		w, bit := bloomBit(name)
		snap.bloom[w] |= bit
	}
	g.snapshot.Store(snap)
}
