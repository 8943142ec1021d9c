package extender

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"

	everynodeinformers "everynode.io/everynode/client/informers/externalversions/everynode/v1alpha1"
	"everynode.io/everynode/index"
	"everynode.io/everynode/placement"
)

// PathPrefix is where the extender's routes live on the HTTPS server:
// kube-scheduler's urlPrefix is the server's URL followed by it, and it
// calls urlPrefix + "/" + verb.
const PathPrefix = "/extender"

// Extender answers kube-scheduler's extender calls from informer caches.
// Build it with New and hand its Routes to the server.
type Extender struct {
	cluster *cluster
	gate    *gateCache

	// syncedFuncs report whether the informers and this extender's event
	// handlers have seen their initial lists; synced latches their
	// conjunction so a request checks one atomic once caches are warm.
	syncedFuncs []cache.InformerSynced
	synced      atomic.Bool
}

// New returns an Extender reading the given shared informers, the same ones
// the controller uses. Call it before the informer factories start: it adds
// the index package's pod indexes and registers the event handlers that
// maintain the readiness-gate snapshot.
func New(sets everynodeinformers.DaemonSetInformer, nodes coreinformers.NodeInformer, pods coreinformers.PodInformer) (*Extender, error) {
	if sets == nil || nodes == nil || pods == nil {
		return nil, errors.New("extender: DaemonSet, Node and Pod informers are all required")
	}
	if err := index.AddPodIndexers(pods.Informer()); err != nil {
		return nil, fmt.Errorf("extender: %w", err)
	}
	e := newExtender(&cluster{
		nodes: nodes.Lister(),
		sets:  sets.Lister(),
		pods:  pods.Informer().GetIndexer(),
	})
	setReg, err := sets.Informer().AddEventHandler(e.setHandler())
	if err != nil {
		return nil, fmt.Errorf("extender: watch DaemonSets: %w", err)
	}
	nodeReg, err := nodes.Informer().AddEventHandler(e.nodeHandler())
	if err != nil {
		return nil, fmt.Errorf("extender: watch nodes: %w", err)
	}
	podReg, err := pods.Informer().AddEventHandler(e.podHandler())
	if err != nil {
		return nil, fmt.Errorf("extender: watch pods: %w", err)
	}
	e.syncedFuncs = []cache.InformerSynced{
		sets.Informer().HasSynced, nodes.Informer().HasSynced, pods.Informer().HasSynced,
		setReg.HasSynced, nodeReg.HasSynced, podReg.HasSynced,
	}
	return e, nil
}

// TakeOver makes the daemon pods of apps/v1 DaemonSets everynode's too
// (`everynode serve --takeover`): the filter holds them to their set as it
// holds everynode's. Call it before the informers start.
func (e *Extender) TakeOver(apps appsinformers.DaemonSetInformer) {
	e.cluster.appsSets = apps.Lister()
	e.syncedFuncs = append(e.syncedFuncs, apps.Informer().HasSynced)
}

// newExtender builds an Extender over caches that are already filled (for
// tests), so it reports itself synced until New sets syncedFuncs.
func newExtender(c *cluster) *Extender {
	return &Extender{cluster: c, gate: newGateCache(c)}
}

// HasSynced reports whether the caches are filled and the gate snapshot is
// built. Until then every verb answers 503, which an ignorable extender's
// scheduler treats as "skip this extender": better than rejecting daemon
// pods because their node is not in the cache yet. Wire it into /readyz.
func (e *Extender) HasSynced() bool {
	if e.synced.Load() {
		return true
	}
	for _, synced := range e.syncedFuncs {
		if !synced() {
			return false
		}
	}
	e.synced.Store(true)
	return true
}

// Routes returns the extender's routes, path to handler: one per verb under
// PathPrefix.
func (e *Extender) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		PathPrefix + "/" + verbFilter:     e.FilterHandler(),
		PathPrefix + "/" + verbPrioritize: e.PrioritizeHandler(),
		PathPrefix + "/" + verbPreempt:    e.PreemptHandler(),
	}
}

// FilterHandler serves the filter verb: ExtenderArgs in,
// ExtenderFilterResult out.
func (e *Extender) FilterHandler() http.Handler { return e.handler(verbFilter, e.serveFilter) }

// PrioritizeHandler serves the prioritize verb: ExtenderArgs in,
// HostPriorityList out.
func (e *Extender) PrioritizeHandler() http.Handler {
	return e.handler(verbPrioritize, e.servePrioritize)
}

// PreemptHandler serves the preempt verb: ExtenderPreemptionArgs in,
// ExtenderPreemptionResult out.
func (e *Extender) PreemptHandler() http.Handler { return e.handler(verbPreempt, e.servePreempt) }

// setHandler resyncs a set's gate on any change; syncSet itself skips
// status-only updates.
func (e *Extender) setHandler() cache.ResourceEventHandler {
	sync := func(obj interface{}) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			e.gate.syncSet(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { sync(obj) },
		UpdateFunc: func(_, obj interface{}) { sync(obj) },
		DeleteFunc: sync,
	}
}

// nodeHandler resyncs a node when something eligibility reads changed:
// heartbeat and status updates, most node events, cost nothing.
func (e *Extender) nodeHandler() cache.ResourceEventHandler {
	sync := func(obj interface{}) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			e.gate.syncNode(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { sync(obj) },
		UpdateFunc: func(oldObj, newObj interface{}) {
			oldNode, ok1 := oldObj.(*corev1.Node)
			newNode, ok2 := newObj.(*corev1.Node)
			if ok1 && ok2 && !placement.NodeChangeMatters(oldNode, newNode) {
				return
			}
			sync(newObj)
		},
		DeleteFunc: sync,
	}
}

// podHandler resyncs the (set, node) pairs a daemon pod event touches.
// Other pods, the vast majority, are dropped by one label lookup.
func (e *Extender) podHandler() cache.ResourceEventHandler {
	sync := func(obj interface{}) {
		if setKey, node, ok := gatePair(obj); ok {
			e.gate.syncPair(setKey, node)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { sync(obj) },
		UpdateFunc: func(oldObj, newObj interface{}) {
			oldKey, oldNode, oldOK := gatePair(oldObj)
			newKey, newNode, newOK := gatePair(newObj)
			if oldOK && (!newOK || oldKey != newKey || oldNode != newNode) {
				e.gate.syncPair(oldKey, oldNode)
			}
			if newOK {
				e.gate.syncPair(newKey, newNode)
			}
		},
		DeleteFunc: sync,
	}
}

// gatePair returns the set key and target node of a daemon pod, unwrapping
// the tombstone of a missed deletion.
func gatePair(obj interface{}) (setKey, node string, ok bool) {
	if tomb, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
		obj = tomb.Obj
	}
	pod, isPod := obj.(*corev1.Pod)
	if !isPod || !placement.IsDaemonPod(pod) {
		return "", "", false
	}
	ref := placement.ControllerRef(pod)
	if ref == nil {
		return "", "", false
	}
	node, ok = placement.TargetNode(pod)
	return index.SetKey(pod.Namespace, ref.Name), node, ok
}
