package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"everynode.io/everynode/placement"
)

// tracker watches the benchmark's daemon pods, whichever controller made
// them, and remembers when each (node, image) was first seen available. Both
// systems are observed through the same watch, so the watch's own delay
// cancels out in the ratio.
type tracker struct {
	mu   sync.Mutex
	pods map[string]*corev1.Pod // by UID
	// firstAvailable: "node|image" -> time first seen available.
	firstAvailable map[string]time.Time
	// firstSeen and firstBound: "node|image" -> when a pod for that node
	// (by its pinning) was first seen, and first seen bound to a node: with
	// firstAvailable they split a node join into controller, scheduler and
	// kubelet (kwok) time.
	firstSeen, firstBound map[string]time.Time
	// seen: every pod UID seen since the last reset (pods made), with the
	// "node|image" it was made for.
	seen map[string]string
	// goneAt: image -> when a pod of it last stopped being live (terminating
	// or deleted), since the last reset.
	goneAt map[string]time.Time
	// boundAt: pod UID -> when it was first seen bound, for stalled.
	// touched: the pods touchStalled has touched, and how many of them
	// since the last reset.
	boundAt      map[string]time.Time
	touched      map[string]bool
	touchedSince int
}

func newTracker() *tracker {
	t := &tracker{pods: map[string]*corev1.Pod{}, boundAt: map[string]time.Time{}, touched: map[string]bool{}}
	t.resetSeen()
	return t
}

// start runs a pod informer on the namespace and label selector and waits
// for its cache.
func (t *tracker) start(ctx context.Context, cs kubernetes.Interface, namespace, selector string) error {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	inf := f.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { t.observe(o) },
		UpdateFunc: func(_, o any) { t.observe(o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if p, ok := o.(*corev1.Pod); ok {
				t.mu.Lock()
				delete(t.pods, string(p.UID))
				delete(t.boundAt, string(p.UID))
				delete(t.touched, string(p.UID))
				t.markGone(p, time.Now())
				t.mu.Unlock()
			}
		},
	})
	if err != nil {
		return fmt.Errorf("adding pod handler: %w", err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("pod informer did not sync")
	}
	return nil
}

func (t *tracker) observe(o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pods[string(p.UID)] = p
	if p.DeletionTimestamp != nil {
		t.markGone(p, now)
	}
	key, ok := t.seen[string(p.UID)]
	if !ok {
		node, _ := placement.TargetNode(p)
		key = node + "|" + image(p)
		t.seen[string(p.UID)] = key
	}
	if _, ok := t.firstSeen[key]; !ok {
		t.firstSeen[key] = now
	}
	if _, ok := t.firstBound[key]; !ok && p.Spec.NodeName != "" {
		t.firstBound[key] = now
	}
	if _, ok := t.boundAt[string(p.UID)]; !ok && p.Spec.NodeName != "" {
		t.boundAt[string(p.UID)] = now
	}
	if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && serving(p, now) {
		k := p.Spec.NodeName + "|" + image(p)
		if _, ok := t.firstAvailable[k]; !ok {
			t.firstAvailable[k] = now
		}
	}
}

// markGone records that a pod stopped being live; t.mu must be held.
func (t *tracker) markGone(p *corev1.Pod, at time.Time) {
	if _, ok := t.seen[string(p.UID)]; ok {
		t.goneAt[image(p)] = at
	}
}

// doneAt returns when the state wait found complete was reached, to the
// precision of the watch events rather than of wait's polling: the last
// node's first available pod of img and, for an update, the last pod of
// another image going away.
func (t *tracker) doneAt(img string, update bool) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var last time.Time
	for k, at := range t.firstAvailable {
		if strings.HasSuffix(k, "|"+img) && at.After(last) {
			last = at
		}
	}
	if update {
		for i, at := range t.goneAt {
			if i != img && at.After(last) {
				last = at
			}
		}
	}
	return last
}

// serving reports whether a pod is available and each of its containers
// runs the image of its spec: a pod updated in place stays Ready for the
// moment between the patch and the kubelet stopping the old container, and
// must not count as running the new image then.
func serving(p *corev1.Pod, now time.Time) bool {
	if !placement.IsPodAvailable(p, 0, now) {
		return false
	}
	for _, c := range p.Spec.Containers {
		ok := false
		for _, s := range p.Status.ContainerStatuses {
			ok = ok || (s.Name == c.Name && s.Image == c.Image)
		}
		if !ok {
			return false
		}
	}
	return true
}

func image(p *corev1.Pod) string {
	if len(p.Spec.Containers) == 0 {
		return ""
	}
	return p.Spec.Containers[0].Image
}

// resetSeen starts counting pods made afresh (one run).
func (t *tracker) resetSeen() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seen = map[string]string{}
	t.goneAt = map[string]time.Time{}
	t.firstAvailable = map[string]time.Time{}
	t.firstSeen = map[string]time.Time{}
	t.firstBound = map[string]time.Time{}
	t.touchedSince = 0
}

func (t *tracker) podsMade() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.seen)
}

// createdSince counts the live pods created at or after since (to the
// second, the precision of creationTimestamp): podsMade counts every pod
// seen since resetSeen, which for an update in place is every pod it
// patched.
func (t *tracker) createdSince(since time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.pods {
		if !p.CreationTimestamp.Time.Before(since.Truncate(time.Second)) {
			n++
		}
	}
	return n
}

// extraPods returns, for each "node|image" that got more than one pod since
// the last reset, how many it got: a controller that made one pod per node
// and revision leaves this empty.
func (t *tracker) extraPods() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	count := map[string]int{}
	for _, k := range t.seen {
		count[k]++
	}
	for k, n := range count {
		if n < 2 {
			delete(count, k)
		}
	}
	return count
}

// state counts, over the live (not terminating) pods: all of them, the nodes
// with an available pod of img, and the pods of another image; and the
// pods still terminating (deleted, not yet gone from the API).
type state struct {
	live, availableNodes, old, terminating int
}

func (t *tracker) state(img string) state {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	var s state
	nodes := map[string]bool{}
	for _, p := range t.pods {
		if p.DeletionTimestamp != nil {
			s.terminating++
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		s.live++
		if image(p) != img {
			s.old++
			continue
		}
		if p.Spec.NodeName != "" && serving(p, now) {
			nodes[p.Spec.NodeName] = true
		}
	}
	s.availableNodes = len(nodes)
	return s
}

// count sorts the live (not terminating, not finished) pods with classify,
// which answers 0, 1 or 2, and returns how many answered 1 and 2.
func (t *tracker) count(classify func(p *corev1.Pod, now time.Time) int) (ones, twos int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	for _, p := range t.pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		switch classify(p, now) {
		case 1:
			ones++
		case 2:
			twos++
		}
	}
	return ones, twos
}

// availableTimes returns, for the nodes given (all when nil), when each first
// had an available pod of img.
func (t *tracker) availableTimes(img string, nodes map[string]bool) map[string]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return byNode(t.firstAvailable, img, nodes)
}

// podTimes is when a node's pod of one image was first seen, first seen
// bound, and first seen available.
type podTimes struct{ seen, bound, available time.Time }

// stageTimes returns podTimes for the nodes given that have all three.
func (t *tracker) stageTimes(img string, nodes map[string]bool) map[string]podTimes {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen, bound := byNode(t.firstSeen, img, nodes), byNode(t.firstBound, img, nodes)
	out := map[string]podTimes{}
	for n, av := range byNode(t.firstAvailable, img, nodes) {
		s, ok1 := seen[n]
		b, ok2 := bound[n]
		if ok1 && ok2 {
			out[n] = podTimes{seen: s, bound: b, available: av}
		}
	}
	return out
}

// byNode picks, from a "node|image" map, the entries of img for the nodes
// given (all when nil), keyed by node.
func byNode(m map[string]time.Time, img string, nodes map[string]bool) map[string]time.Time {
	out := map[string]time.Time{}
	for k, at := range m {
		i := strings.LastIndexByte(k, '|')
		if i < 0 {
			continue
		}
		if n := k[:i]; k[i+1:] == img && (nodes == nil || nodes[n]) {
			out[n] = at
		}
	}
	return out
}
