package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
	"everynode.io/everynode/placement/revision"

	"everynode.io/e2e/cluster"
)

// The fault scenarios of issue 37: what a leader failover, a kube-apiserver
// restart and an orphaning delete do to a set. Each watches for the one
// thing that must never happen, a node holding two live pods of a set, and
// counts pod creates in the kube-apiserver audit log (the harness's audit
// policy logs every pod create with its object).

// auditLog is the kube-apiserver audit log of the e2e cluster.
func auditLog() string {
	return filepath.Join(harness.KwokDir(), "logs", "audit.log")
}

// auditEvent is the part of an audit event the scenarios read.
type auditEvent struct {
	Stage      string                    `json:"stage"`
	Verb       string                    `json:"verb"`
	RequestURI string                    `json:"requestURI"`
	User       struct{ Username string } `json:"user"`
	ObjectRef  struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
	RequestObject   *struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	} `json:"requestObject"`
}

// readAudit calls fn for every completed request in the audit log.
func readAudit(t *testing.T, fn func(*auditEvent)) {
	t.Helper()
	f, err := os.Open(auditLog())
	if err != nil {
		t.Fatalf("the audit log (the harness's audit policy): %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Stage != "ResponseComplete" {
			continue
		}
		fn(&ev)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read the audit log: %v", err)
	}
}

// podCreates counts the successful daemon pod creates in ns since, per
// node and revision hash ("node@hash").
func podCreates(t *testing.T, ns string, since time.Time) map[string]int {
	t.Helper()
	out := map[string]int{}
	readAudit(t, func(ev *auditEvent) {
		// The set webhook's dry-run creates (a pod from the template)
		// are not pods.
		if ev.Verb != "create" || ev.ObjectRef.Resource != "pods" || ev.ObjectRef.Namespace != ns || strings.Contains(ev.RequestURI, "dryRun") ||
			ev.ResponseStatus.Code != 201 || ev.RequestReceived.Before(since) || ev.RequestObject == nil {
			return
		}
		m := ev.RequestObject.Metadata
		out[m.Annotations[everynodev1alpha1.AnnotationTargetNode]+"@"+m.Labels[revision.HashLabel]]++
	})
	return out
}

// twice returns the node@hash keys created more than once.
func twice(creates map[string]int) []string {
	var out []string
	for k, n := range creates {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s x%d", k, n))
		}
	}
	return out
}

// duplicateWatch samples the set's pods every 250 ms until stopped and
// remembers every moment a node held two live (not terminating) pods.
type duplicateWatch struct {
	stop    context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	samples int
	seen    []string
}

func watchForDuplicates(t *testing.T, ns, set string) *duplicateWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &duplicateWatch{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: everynodev1alpha1.LabelDaemonPod + "=true"})
			if err == nil {
				perNode := map[string][]string{}
				for _, p := range list.Items {
					if ref := metav1.GetControllerOf(&p); p.DeletionTimestamp == nil && ref != nil && ref.Name == set {
						node, _ := placement.TargetNode(&p)
						perNode[node] = append(perNode[node], p.Name)
					}
				}
				w.mu.Lock()
				w.samples++
				for node, pods := range perNode {
					if len(pods) > 1 {
						w.seen = append(w.seen, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), node, pods))
					}
				}
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(w.finish)
	return w
}

// finish stops sampling and returns the samples taken and the duplicates
// seen.
func (w *duplicateWatch) finish() {
	w.stop()
	<-w.done
}

func (w *duplicateWatch) check(t *testing.T) {
	t.Helper()
	w.finish()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.samples < 10 {
		t.Fatalf("only %d samples of the pods were taken; the check saw nothing", w.samples)
	}
	if len(w.seen) > 0 {
		t.Errorf("a node held two live pods of the set in %d of %d samples: %v", len(w.seen), w.samples, w.seen[:min(len(w.seen), 5)])
	}
	t.Logf("%d samples of the pods, no node with two live pods", w.samples)
}

// leaseHolderPID is the pid in the leader Lease's holder identity
// ("<hostname>_<pid>", cmd/everynode/leader.go), 0 when none holds it.
func leaseHolderPID(t *testing.T) int {
	t.Helper()
	lease, err := kube.CoordinationV1().Leases(releaseNamespace).Get(ctx(t), releaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0
	}
	if err != nil {
		t.Logf("get the leader Lease: %v", err)
		return 0
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	i := strings.LastIndex(holder, "_")
	pid, err := strconv.Atoi(holder[i+1:])
	if i < 0 || err != nil {
		return 0
	}
	return pid
}

// replicaPID is the pid of everynode's replica n, which must be running.
func replicaPID(t *testing.T, n int) int {
	t.Helper()
	pid, err := harness.PID(n)
	step(t, err)
	if pid == 0 {
		t.Fatalf("everynode replica %d is not running", n)
	}
	return pid
}

// twoReplicas runs two everynode replicas sharing the Lease and returns
// their pids. Replica 1 leads: the harness's replica (the one the webhooks
// and kube-scheduler call) stops first, releasing the Lease, and comes
// back as the follower. The harness's single replica is back after the
// test.
func twoReplicas(t *testing.T) (leader, follower int) {
	t.Helper()
	step(t, harness.StopEverynode())
	step(t, harness.StartReplica(bg, 1))
	t.Cleanup(func() {
		step(t, harness.StopReplica(1))
		step(t, harness.StartEverynode(bg))
	})
	leader = replicaPID(t, 1)
	eventually(t, time.Minute, "replica 1 to lead", func() (bool, string, error) {
		holder := leaseHolderPID(t)
		return holder == leader, fmt.Sprintf("holder pid %d", holder), nil
	})
	step(t, harness.StartEverynode(bg))
	return leader, replicaPID(t, 0)
}

// rollingSet is a set over nodes that replaces one pod at a time, with no
// surge: a node must never hold two of its pods.
func rollingSet(ns string, sel map[string]string) *everynodev1alpha1.DaemonSet {
	return simpleSet(ns, "agent", sel)
}

func withImage(image string) func(*everynodev1alpha1.DaemonSet) {
	return func(ds *everynodev1alpha1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = image }
}

// updatedAtLeast waits until n pods of the set run the new template.
func updatedAtLeast(t *testing.T, ns string, n int32) {
	t.Helper()
	eventually(t, settle, fmt.Sprintf("%d updated pods", n), func() (bool, string, error) {
		st := getSet(t, ns, "agent").Status
		return st.UpdatedNumberScheduled >= n, fmt.Sprintf("%d updated", st.UpdatedNumberScheduled), nil
	})
}

// rollout is a rolling update under way: a set over its own nodes going
// from agent:v1 to agent:v2, one pod at a time with no surge, watched for
// duplicates from the moment the template changed.
type rollout struct {
	ns    string
	nodes []string
	start time.Time
	dups  *duplicateWatch
}

// startRollout makes n nodes and the set, waits for a pod on each, changes
// the image and returns once updated pods run it.
func startRollout(t *testing.T, prefix string, n int, updated int32) *rollout {
	t.Helper()
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: prefix + "-" + randSuffix()}
	nodes := createNodes(t, prefix, n, sel)
	createSet(t, rollingSet(ns, sel))
	eventually(t, settle, "a pod on each node", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, nil)
	})
	r := &rollout{ns: ns, nodes: nodes, start: time.Now(), dups: watchForDuplicates(t, ns, "agent")}
	updateSet(t, ns, "agent", withImage("registry.example/agent:v2"))
	updatedAtLeast(t, ns, updated)
	return r
}

// finish waits for the rollout to complete, then checks that no node ever
// held two live pods and none got a pod twice for one revision.
func (r *rollout) finish(t *testing.T) {
	t.Helper()
	eventually(t, 3*settle, "the rollout to finish", rolledOut(t, r.ns, "agent", r.nodes, "registry.example/agent:v2"))
	r.dups.check(t)
	creates := podCreates(t, r.ns, r.start)
	if d := twice(creates); len(d) > 0 {
		t.Errorf("pods created twice for one node and revision: %v", d)
	}
	t.Logf("%d pod creates during the rollout, none twice for one node and revision", len(creates))
}

// Two replicas share the Lease; the leader is killed (SIGKILL, no release)
// in the middle of a rolling update over 24 nodes. The other replica,
// which serves the webhooks throughout, takes over once the Lease expires
// and finishes the rollout, and no node ever holds two live pods or gets
// a pod of one revision twice.
func TestLeaderKilledMidRollout(t *testing.T) {
	leader, follower := twoReplicas(t)

	r := startRollout(t, "failover", 24, 4)
	if err := syscall.Kill(leader, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the leader: %v", err)
	}
	killed := time.Now()
	lease, err := kube.CoordinationV1().Leases(releaseNamespace).Get(ctx(t), releaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the leader Lease: %v", err)
	}
	eventually(t, time.Minute, "the follower to take the Lease", func() (bool, string, error) {
		holder := leaseHolderPID(t)
		return holder == follower, fmt.Sprintf("holder pid %d", holder), nil
	})
	took := time.Since(killed)
	// The dead leader's last renewal plus the lease duration is when the
	// Lease expired in the leader's terms; client-go's follower takes it at
	// most 4.4 retry periods later (it sees a renewal up to one jittered
	// poll late, and takes the Lease up to one poll after that; README). Logged, not asserted: timing
	// on a shared machine is for the note, not for a test.
	if lease.Spec.RenewTime != nil && lease.Spec.LeaseDurationSeconds != nil {
		expired := lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
		t.Logf("takeover: the follower holds the Lease %.1fs after the leader was killed, %.1fs after the Lease expired (last renewal + %ds)",
			took.Seconds(), killed.Add(took).Sub(expired).Seconds(), *lease.Spec.LeaseDurationSeconds)
	} else {
		t.Logf("takeover: the follower holds the Lease %.1fs after the leader was killed", took.Seconds())
	}
	r.finish(t)
}

// Deleting a set with --cascade=orphan completes at once (its revisions
// can be orphaned: canonical data), and the same set made again adopts
// every pod and revision: no pod created, none replaced, no new revision,
// no rolling update.
func TestOrphanAndRecreate(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "orphan-" + randSuffix()}
	nodes := createNodes(t, "orphan", 3, sel)
	createSet(t, rollingSet(ns, sel))
	eventually(t, settle, "a pod on each node", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, nil)
	})
	// Two revisions, so history is part of what is handed over.
	updateSet(t, ns, "agent", withImage("registry.example/agent:v2"))
	eventually(t, settle, "the rollout to finish", rolledOut(t, ns, "agent", nodes, "registry.example/agent:v2"))
	before := map[string]string{} // pod name -> UID
	for _, p := range daemonPods(t, ns, "agent") {
		before[p.Name] = string(p.UID)
	}
	old := getSet(t, ns, "agent")

	err := everynode.EverynodeV1alpha1().DaemonSets(ns).Delete(ctx(t), "agent", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the orphaning delete to complete", func() (bool, string, error) {
		_, err := everynode.EverynodeV1alpha1().DaemonSets(ns).Get(ctx(t), "agent", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, "still there (Terminating, finalizer orphan)", err
	})
	revs, err := kube.AppsV1().ControllerRevisions(ns).List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(revs.Items) != 2 {
		t.Fatalf("%d revisions left after the orphaning delete, want 2", len(revs.Items))
	}

	recreated := time.Now()
	dups := watchForDuplicates(t, ns, "agent")
	again := rollingSet(ns, sel)
	withImage("registry.example/agent:v2")(again)
	ds := createSet(t, again)
	eventually(t, settle, "the new set to adopt every pod and revision", func() (bool, string, error) {
		pods := daemonPods(t, ns, "agent")
		revs, err := kube.AppsV1().ControllerRevisions(ns).List(ctx(t), metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		owned := 0
		for _, r := range revs.Items {
			if ref := metav1.GetControllerOf(&r); ref != nil && ref.UID == ds.UID {
				owned++
			}
		}
		return len(pods) == len(nodes) && owned == 2, fmt.Sprintf("%d pods and %d of %d revisions adopted", len(pods), owned, len(revs.Items)), nil
	})
	never(t, quietly, "a pod created or replaced after the adoption", func() (bool, string, error) {
		pods := daemonPods(t, ns, "agent")
		if len(pods) != len(before) {
			return true, fmt.Sprintf("%d pods, want %d", len(pods), len(before)), nil
		}
		for _, p := range pods {
			if before[p.Name] != string(p.UID) {
				return true, "pod " + p.Name + " is new", nil
			}
		}
		return false, "", nil
	})
	dups.check(t)
	if c := podCreates(t, ns, recreated); len(c) != 0 {
		t.Errorf("pod creates after the set was made again: %v", c)
	}
	st := getSet(t, ns, "agent").Status
	if st.UpdatedNumberScheduled != int32(len(nodes)) || st.UpdateRevision != old.Status.UpdateRevision {
		t.Errorf("status: %d updated, update revision %s; want %d and the old set's %s (no rolling update)",
			st.UpdatedNumberScheduled, st.UpdateRevision, len(nodes), old.Status.UpdateRevision)
	}
}

// everynodeRequests counts everynode's requests that reached the API
// server in [from, to).
func everynodeRequests(t *testing.T, from, to time.Time) int {
	t.Helper()
	user := "system:serviceaccount:" + releaseNamespace + ":" + releaseName
	n := 0
	readAudit(t, func(ev *auditEvent) {
		if ev.User.Username == user && !ev.RequestReceived.Before(from) && ev.RequestReceived.Before(to) {
			n++
		}
	})
	return n
}

// kube-apiserver stops for 5 s in the middle of a rolling update over 20
// nodes. everynode's watches break and its requests fail; once the API
// server is back it resyncs, finishes the rollout, makes no node hold two
// pods, and does not spin: its request rate in the minute after recovery
// is logged and bounded (a hot loop would send thousands).
func TestAPIServerRestartMidRollout(t *testing.T) {
	r := startRollout(t, "apirestart", 20, 3)
	step(t, harness.RestartAPIServer(bg, 5*time.Second))
	recovered := time.Now()
	r.finish(t)

	if wait := time.Until(recovered.Add(time.Minute)); wait > 0 {
		time.Sleep(wait)
	}
	n := everynodeRequests(t, recovered, recovered.Add(time.Minute))
	t.Logf("everynode sent %d requests in the minute after kube-apiserver came back (%.1f/s), rollout included", n, float64(n)/60)
	// The rollout's own work is about 3 requests per node plus status
	// writes; a sync loop that spins on an error sends its requests
	// without end.
	if n > 600 {
		t.Errorf("%d requests in the minute after recovery: everynode is spinning", n)
	}
}

// burstBound creates n ordinary pods at once (no daemon label, so no
// everynode webhook sees them, and no marker resource, so kube-scheduler
// configured by everynode scheduler-config does not call the extender for
// them) on the nodes sel selects, and returns how long it took until every
// one was bound. The pods are deleted before it returns.
func burstBound(t *testing.T, ns, prefix string, n int, sel map[string]string) time.Duration {
	t.Helper()
	lbl := map[string]string{"burst": prefix}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%02d", prefix, i), Namespace: ns, Labels: lbl},
				Spec: corev1.PodSpec{
					NodeSelector:                  sel,
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers:                    []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}},
				},
			}
			if _, err := kube.CoreV1().Pods(ns).Create(ctx(t), pod, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create the %s burst: %v", prefix, err)
	}
	var took time.Duration
	eventually(t, settle, fmt.Sprintf("the %d pods of the %s burst to be bound", n, prefix), func() (bool, string, error) {
		list, err := kube.CoreV1().Pods(ns).List(ctx(t), metav1.ListOptions{LabelSelector: "burst=" + prefix})
		if err != nil {
			return false, "", err
		}
		bound := 0
		for i := range list.Items {
			if list.Items[i].Spec.NodeName != "" {
				bound++
			}
		}
		took = time.Since(start)
		return bound == n, fmt.Sprintf("%d of %d bound", bound, n), nil
	})
	if err := kube.CoreV1().Pods(ns).DeleteCollection(ctx(t), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
		metav1.ListOptions{LabelSelector: "burst=" + prefix}); err != nil {
		t.Fatalf("delete the %s burst: %v", prefix, err)
	}
	return took
}

// everynode hangs (SIGSTOP) for 30 s, longer than any of its webhook
// timeouts (issue 54). Other people's pods are created (no everynode
// webhook sees them) and scheduled as fast as with no extender at all:
// they request no daemon-pod marker, so kube-scheduler, whose extender
// entry names the marker in managedResources, never calls everynode for
// them. The bound: a burst of 50 ordinary pods while everynode hangs is
// bound within 1.5 times the same burst through a kube-scheduler with no
// extender configured, measured in the same test, plus one second for a
// loaded machine (before the marker, every pod waited for the
// extender's filter and prioritize timeouts: 10 s a pod). Daemon pods
// carry the marker, stay on their own nodes, and a node that joins
// meanwhile gets its daemon pod once everynode runs again (SIGCONT).
func TestEverynodeHangs(t *testing.T) {
	const burst = 50
	ns := newNamespace(t)
	other := newNamespace(t)
	sel := map[string]string{scenarioLabel: "hang-" + randSuffix()}
	nodes := createNodes(t, "hang", 2, sel)
	createSet(t, simpleSet(ns, "agent", sel))
	eventually(t, settle, "a pod on each node", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, nil)
	})
	marker := corev1.ResourceName(everynodev1alpha1.DefaultDaemonResource)
	for _, p := range daemonPods(t, ns, "agent") {
		c := p.Spec.Containers[0].Resources
		if q, ok := c.Requests[marker]; !ok || q.Value() != 1 {
			t.Errorf("daemon pod %s requests %v, want one %s", p.Name, c.Requests, marker)
		}
	}

	// The yardstick: the same burst with no extender configured at all.
	step(t, harness.RestartScheduler(bg, cluster.WithoutExtender))
	restored := false
	restore := func() {
		if !restored {
			restored = true
			step(t, harness.RestartScheduler(bg, cluster.WithExtender))
		}
	}
	t.Cleanup(restore)
	none := burstBound(t, other, "none", burst, sel)
	restore()
	before, err := scrape(t)
	step(t, err)
	up := burstBound(t, other, "up", burst, sel)
	after, err := scrape(t)
	step(t, err)
	if calls := counterDelta(before, after, "everynode_http_request_duration_seconds_count", labelPrefix("route", "/extender/")); calls != 0 {
		t.Errorf("the extender was called %.0f times for %d ordinary pods: the scheduler should call it for daemon pods only", calls, burst)
	}

	pid := replicaPID(t, 0)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	stopped := time.Now()
	hung := burstBound(t, other, "hung", burst, sel)
	joined := createNodes(t, "hang", 1, sel)
	if wait := time.Until(stopped.Add(30 * time.Second)); wait > 0 {
		time.Sleep(wait)
	}
	resume()
	t.Logf("%d ordinary pods bound in %.1fs with no extender, %.1fs with everynode up, %.1fs with everynode stopped",
		burst, none.Seconds(), up.Seconds(), hung.Seconds())
	// The constant is for a loaded machine, not the bound: the bursts take
	// under a second here, where a busy machine's jitter is of that size;
	// a pod that waits for the extender at all costs its 1 s timeout, 50 s
	// for the burst (before the marker: 10 s a pod).
	const slack = time.Second
	if limit := none*3/2 + slack; hung > limit {
		t.Errorf("with everynode stopped %d ordinary pods took %s to be bound, against %s with no extender: more than 1.5x + %s (%s)", burst, hung, none, slack, limit)
	}
	all := append(nodes, joined...)
	eventually(t, settle, "the set to converge after SIGCONT", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", all, nil)
	})
	for _, p := range daemonPods(t, ns, "agent") {
		if target := p.Annotations[everynodev1alpha1.AnnotationTargetNode]; p.Spec.NodeName != target {
			t.Errorf("daemon pod %s is on node %q, made for %q", p.Name, p.Spec.NodeName, target)
		}
	}
}

// Upgrading everynode over sets whose revisions an older everynode stored
// in struct order: the new everynode stores each again in canonical form
// (same name, number and hash label), touches no pod, starts no rolling
// update, and the set can then be deleted with --cascade=orphan.
func TestUpgradeOverLegacyRevisions(t *testing.T) {
	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "upgrade-" + randSuffix()}
	nodes := createNodes(t, "upgrade", 2, sel)
	createSet(t, rollingSet(ns, sel))
	eventually(t, settle, "a pod on each node", func() (bool, string, error) {
		return podsOnNodes(t, ns, "agent", nodes, nil)
	})
	before := map[string]string{}
	for _, p := range daemonPods(t, ns, "agent") {
		before[p.Name] = string(p.UID)
	}
	hash := getSet(t, ns, "agent").Status.UpdateRevision

	// The old everynode is stopped and its revision rewritten as it wrote
	// them: data is immutable, so delete and create.
	step(t, harness.StopEverynode())
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			step(t, harness.StartEverynode(bg))
		}
	})
	revs, err := kube.AppsV1().ControllerRevisions(ns).List(ctx(t), metav1.ListOptions{})
	if err != nil || len(revs.Items) != 1 {
		t.Fatalf("revisions: %v, %v; want one", revs, err)
	}
	rev := revs.Items[0]
	var data struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(rev.Data.Raw, &data); err != nil {
		t.Fatal(err)
	}
	legacy, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if revision.IsCanonical(legacy) {
		t.Fatalf("the struct encoding %s is canonical; the scenario tests nothing", legacy)
	}
	if err := kube.AppsV1().ControllerRevisions(ns).Delete(ctx(t), rev.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rev.ResourceVersion, rev.UID, rev.CreationTimestamp, rev.ManagedFields = "", "", metav1.Time{}, nil
	rev.Data.Raw = legacy
	if _, err := kube.AppsV1().ControllerRevisions(ns).Create(ctx(t), &rev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	step(t, harness.StartEverynode(bg))
	restarted = true
	eventually(t, settle, "the revision stored again in canonical form", func() (bool, string, error) {
		got, err := kube.AppsV1().ControllerRevisions(ns).Get(ctx(t), rev.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if !revision.IsCanonical(got.Data.Raw) {
			return false, "data still in struct order", nil
		}
		if got.Revision != rev.Revision || got.Labels[revision.HashLabel] != hash || metav1.GetControllerOf(got) == nil {
			return true, "", fmt.Errorf("revision %s came back as number %d, hash %s, owner %v", got.Name, got.Revision, got.Labels[revision.HashLabel], metav1.GetControllerOf(got))
		}
		return true, "", nil
	})
	never(t, quietly, "a pod replaced after the upgrade", func() (bool, string, error) {
		pods := daemonPods(t, ns, "agent")
		for _, p := range pods {
			if before[p.Name] != string(p.UID) {
				return true, "pod " + p.Name + " is new", nil
			}
		}
		return len(pods) != len(before), fmt.Sprintf("%d pods", len(pods)), nil
	})
	if st := getSet(t, ns, "agent").Status; st.UpdateRevision != hash {
		t.Errorf("update revision %s after the upgrade, want %s", st.UpdateRevision, hash)
	}
	err = everynode.EverynodeV1alpha1().DaemonSets(ns).Delete(ctx(t), "agent", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the orphaning delete to complete", func() (bool, string, error) {
		_, err := everynode.EverynodeV1alpha1().DaemonSets(ns).Get(ctx(t), "agent", metav1.GetOptions{})
		return apierrors.IsNotFound(err), "still there (Terminating, finalizer orphan)", nil
	})
}

// The leader hangs (SIGSTOP) past its Lease in the middle of a rollout and
// wakes up (SIGCONT) after the follower took over. It must find that it
// lost the Lease, stop its controller and stay up as a follower, still
// serving (upstream's controllers exit instead); the new leader finishes
// the rollout, and no node ever holds two live pods.
func TestLeaderPausedPastItsLease(t *testing.T) {
	leader, follower := twoReplicas(t)

	r := startRollout(t, "paused", 20, 4)
	if err := syscall.Kill(leader, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(leader, syscall.SIGCONT) })
	eventually(t, time.Minute, "the follower to take the Lease", func() (bool, string, error) {
		holder := leaseHolderPID(t)
		return holder == follower, fmt.Sprintf("holder pid %d", holder), nil
	})
	time.Sleep(2 * time.Second) // the new leader at work
	if err := syscall.Kill(leader, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	r.finish(t)

	logPath := harness.ReplicaLog(1)
	eventually(t, time.Minute, "the old leader to say it stopped its controller and rejoined", func() (bool, string, error) {
		b, err := os.ReadFile(logPath)
		if err != nil {
			return false, "", err
		}
		return strings.Contains(string(b), "rejoining the election"), "not in " + logPath + " yet", nil
	})
	// It said so; now it must still be there (the old behaviour exited
	// right after losing the Lease).
	time.Sleep(time.Second)
	if err := syscall.Kill(leader, 0); err != nil {
		t.Fatalf("the old leader is gone after losing the Lease (%v); it must stay up as a follower", err)
	}
	if holder := leaseHolderPID(t); holder != follower {
		t.Errorf("Lease holder pid %d after the old leader woke up, want the new leader %d", holder, follower)
	}
	health := fmt.Sprintf("http://127.0.0.1:%d/readyz", harness.HealthPort+1)
	resp, err := http.Get(health)
	if err != nil {
		t.Fatalf("the old leader's %s: %v", health, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the old leader's /readyz answers %d, want 200: it keeps serving as a follower", resp.StatusCode)
	}
}
