package soak

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	versioned "everynode.io/everynode/client/clientset/versioned"
	enformers "everynode.io/everynode/client/informers/externalversions"
	"everynode.io/everynode/placement"
)

// recorder turns what the informers see, and what the soak does, into
// records: each is fed to the checker and appended to a JSON-lines file,
// under one lock, so both see one order.
type recorder struct {
	mu      sync.Mutex
	checker *Checker
	file    *os.File
	out     *bufio.Writer
	n       int
	// readySince is when each pod (by UID) turned Ready as seen here;
	// seen says it was seen before, so that a pod first listed already
	// Ready keeps its condition's time.
	readySince map[string]time.Time
	seen       map[string]bool
	// readyLTT is the Ready condition's lastTransitionTime last seen: a
	// new one on a pod still Ready says it was not Ready in between (a
	// watch broken by a kube-apiserver restart shows only the end).
	readyLTT map[string]time.Time
	// serving is each node's last recorded state: a node is recorded
	// when it changes, not at every heartbeat.
	serving map[string]string
	// closed: the run is over; the informers may still call.
	closed bool
	// relistUntil: records until then are taken for a relist's. An
	// informer without resync calls its update handler with an unchanged
	// object only in a relist, and a relist delivers its objects in one
	// burst; each such call extends the window.
	relistUntil time.Time
}

// relistWindow is how long after the last sign of a relist the records
// are taken for its.
const relistWindow = 2 * time.Second

// sawRelist notes a sign of a relist: an update with an unchanged
// resourceVersion, or a delete the watch missed.
func (r *recorder) sawRelist() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.relistUntil = time.Now().Add(relistWindow)
}

func newRecorder(path string) (*recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	r := newRecorderTo(f)
	r.file = f
	return r, nil
}

// newRecorderTo is a recorder writing to w (close does not close it).
func newRecorderTo(w io.Writer) *recorder {
	return &recorder{checker: NewChecker(), out: bufio.NewWriterSize(w, 1<<20),
		readySince: map[string]time.Time{}, seen: map[string]bool{}, readyLTT: map[string]time.Time{}, serving: map[string]string{}}
}

// record stamps o with the time and feeds it on.
func (r *recorder) record(o Obs) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recordLocked(o)
}

func (r *recorder) recordLocked(o Obs) {
	if r.closed {
		return
	}
	o.At = time.Now()
	r.checker.Observe(o)
	_ = WriteObs(r.out, o)
	r.n++
}

// act records something the soak is about to do.
func (r *recorder) act(a ActObs) { r.record(Obs{Act: &a}) }

// violations are the checker's so far.
func (r *recorder) violations() []Violation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.checker.Violations()
}

func (r *recorder) close() (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if err := r.out.Flush(); err != nil || r.file == nil {
		return r.n, err
	}
	return r.n, r.file.Close()
}

// watch starts the informers of the soak's pods, sets of both kinds,
// revisions and nodes, and returns once their caches are filled.
func (r *recorder) watch(ctx context.Context, kube kubernetes.Interface, en versioned.Interface) error {
	inNS := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(SetNamespace))
	nodes := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = NodeLabel + "=true"
	}))
	ens := enformers.NewSharedInformerFactoryWithOptions(en, 0, enformers.WithNamespace(SetNamespace))

	handlers := []struct {
		inf cache.SharedIndexInformer
		fn  func(Op, any)
	}{
		{inNS.Core().V1().Pods().Informer(), r.pod},
		{inNS.Apps().V1().DaemonSets().Informer(), r.appsSet},
		{inNS.Apps().V1().ControllerRevisions().Informer(), r.revision},
		{ens.Everynode().V1alpha1().DaemonSets().Informer(), r.everynodeSet},
		{nodes.Core().V1().Nodes().Informer(), r.node},
	}
	for _, h := range handlers {
		fn := h.fn
		if _, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { fn(OpAdd, obj) },
			UpdateFunc: func(old, obj any) {
				if o, n := resourceVersion(old), resourceVersion(obj); o != "" && o == n {
					r.sawRelist()
				}
				fn(OpUpdate, obj)
			},
			DeleteFunc: func(obj any) {
				if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					r.sawRelist()
					obj = t.Obj
				}
				fn(OpDelete, obj)
			},
		}); err != nil {
			return err
		}
	}
	for _, f := range []interface{ Start(<-chan struct{}) }{inNS, nodes, ens} {
		f.Start(ctx.Done())
	}
	for _, h := range handlers {
		if !cache.WaitForCacheSync(ctx.Done(), h.inf.HasSynced) {
			return fmt.Errorf("the soak's informers did not sync")
		}
	}
	return nil
}

func (r *recorder) pod(op Op, obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Labels[SetLabel] == "" {
		return
	}
	o := &PodObs{Op: op, Name: p.Name, UID: string(p.UID), Set: p.Labels[SetLabel], Hash: p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey],
		Terminating: p.DeletionTimestamp != nil, Finished: p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed}
	if ref := metav1.GetControllerOf(p); ref != nil {
		o.OwnerUID = string(ref.UID)
	}
	o.Node = p.Annotations[everynodev1alpha1.AnnotationTargetNode]
	if o.Node == "" {
		o.Node = p.Spec.NodeName
	}
	var ready *corev1.PodCondition
	for i := range p.Status.Conditions {
		switch c := &p.Status.Conditions[i]; {
		case c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue:
			ready = c
		case c.Type == everynodev1alpha1.ConditionInPlaceUpdateReady && c.Status == corev1.ConditionFalse:
			o.GateClosed = true
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	o.Listed = time.Now().Before(r.relistUntil)
	uid := string(p.UID)
	switch {
	case op == OpDelete:
		delete(r.readySince, uid)
		delete(r.seen, uid)
		delete(r.readyLTT, uid)
	case ready == nil:
		r.readySince[uid] = time.Time{}
	case r.readySince[uid].IsZero() || !ready.LastTransitionTime.Time.Equal(r.readyLTT[uid]):
		// Turned Ready now (or again: a new transition time), or was
		// Ready when first listed.
		since := time.Now()
		if !r.seen[uid] && !ready.LastTransitionTime.IsZero() {
			since = ready.LastTransitionTime.Time
		}
		r.readySince[uid] = since
		r.readyLTT[uid] = ready.LastTransitionTime.Time
	}
	if op != OpDelete {
		r.seen[uid] = true
		o.ReadySince = r.readySince[uid]
	}
	r.recordLocked(Obs{Pod: o})
}

func (r *recorder) everynodeSet(op Op, obj any) {
	ds, ok := obj.(*everynodev1alpha1.DaemonSet)
	if !ok {
		return
	}
	st := placement.UpdateStrategy(ds)
	r.record(Obs{Set: &SetObs{Op: op, Name: ds.Name, UID: string(ds.UID), Kind: KindEverynode,
		Generation: ds.Generation, ObservedGeneration: ds.Status.ObservedGeneration,
		Desired: ds.Status.DesiredNumberScheduled, Updated: ds.Status.UpdatedNumberScheduled, Available: ds.Status.NumberAvailable,
		UpdateRevision: ds.Status.UpdateRevision, OnDelete: !st.RollingUpdate(),
		MaxSurge: st.MaxSurge.String(), MaxUnavailable: st.MaxUnavailable.String(), MinReadySeconds: ds.Spec.MinReadySeconds,
		Deleting: ds.DeletionTimestamp != nil}})
}

func (r *recorder) appsSet(op Op, obj any) {
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok || ds.Labels[SetLabel] == "" {
		return
	}
	o := &SetObs{Op: op, Name: ds.Name, UID: string(ds.UID), Kind: KindApps,
		Generation: ds.Generation, ObservedGeneration: ds.Status.ObservedGeneration,
		Desired: ds.Status.DesiredNumberScheduled, Updated: ds.Status.UpdatedNumberScheduled, Available: ds.Status.NumberAvailable,
		MaxSurge: "0", MaxUnavailable: "1", MinReadySeconds: ds.Spec.MinReadySeconds, Deleting: ds.DeletionTimestamp != nil}
	if ds.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
		o.OnDelete = true
	} else if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		if ru.MaxSurge != nil {
			o.MaxSurge = ru.MaxSurge.String()
		}
		if ru.MaxUnavailable != nil {
			o.MaxUnavailable = ru.MaxUnavailable.String()
		}
	}
	r.record(Obs{Set: o})
}

func (r *recorder) revision(op Op, obj any) {
	cr, ok := obj.(*appsv1.ControllerRevision)
	if !ok {
		return
	}
	o := &RevObs{Op: op, Name: cr.Name, Set: cr.Labels[SetLabel], Hash: cr.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]}
	if o.Set == "" {
		o.Set = setOf(cr.Name)
	}
	if ref := metav1.GetControllerOf(cr); ref != nil {
		o.OwnerUID = string(ref.UID)
	}
	if o.Set == "" {
		return
	}
	r.record(Obs{Rev: o})
}

// nodeServing is whether a node takes part in rollouts, why not, and
// since when as the node says: the lifecycle rule of placement (no set of
// the soak changes it), and Ready.
func nodeServing(n *corev1.Node) (bool, string, time.Time) {
	l := placement.Lifecycle{UnreachableAfter: placement.DefaultUnreachableAfterSeconds * time.Second}
	if ph := l.Classify(n, time.Now()); ph.Class != placement.NodeServing {
		return false, ph.Class.String() + ": " + ph.Reason, ph.Since
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return true, "", time.Time{}
			}
			return false, "not Ready", c.LastTransitionTime.Time
		}
	}
	return false, "not Ready", time.Time{}
}

func (r *recorder) node(op Op, obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	serving, why, since := nodeServing(n)
	if op == OpDelete {
		serving, why, since = false, "deleted", time.Time{}
	}
	state := fmt.Sprintf("%t %s", serving, why)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.serving[n.Name] == state && op != OpDelete {
		return
	}
	r.serving[n.Name] = state
	r.recordLocked(Obs{Node: &NodeObs{Op: op, Name: n.Name, Serving: serving, Why: why, Since: since}})
}

// resourceVersion is obj's, "" when it has none.
func resourceVersion(obj any) string {
	if m, err := meta.Accessor(obj); err == nil {
		return m.GetResourceVersion()
	}
	return ""
}
