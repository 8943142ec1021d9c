package soak

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	versioned "everynode.io/everynode/client/clientset/versioned"
	"everynode.io/everynode/placement"

	"everynode.io/e2e/cluster"
)

// Options say what soak to run.
type Options struct {
	Seed     int64
	Duration time.Duration
	Nodes    int
	// Smoke marks the fixed-seed short run of `make soak-smoke`.
	Smoke bool
	// Out is where the report, its plot and the run's JSON go.
	Out string
	// Version is everynode's (git describe), for the report.
	Version string
	// Log receives progress lines.
	Log io.Writer
}

// runner is one soak under way.
type runner struct {
	c    *cluster.Cluster
	o    Options
	kube kubernetes.Interface
	en   versioned.Interface
	// enBurst is an unthrottled client for the in-flight burst.
	enBurst versioned.Interface
	rec     *recorder
	// dir keeps the run's records and the logs of replicas restarted.
	dir   string
	start time.Time

	setLocks     []sync.Mutex // by catalog index
	replicaLocks [2]sync.Mutex

	mu         sync.Mutex
	rev        map[string]int
	nodes      []nodeInfo
	busyNodes  map[string]bool
	nodeSeq    int
	plainSeq   int
	logSeq     int
	traffic    map[EventKind]*TrafficStats
	admission  map[string]int
	faults     []FaultRecord
	violations []Violation
	samples    []Sample
	bindWaits  []time.Duration
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.o.Log, format+"\n", args...)
}

func (r *runner) say(format string, args ...any) {
	fmt.Fprintf(r.o.Log, "\033[1m==> %s\033[0m\n", fmt.Sprintf(format, args...))
}

// Settings are the cluster's for a soak: no nodes of kwokctl's (the soak
// makes its own, labelled), kube-controller-manager without its
// DaemonSet controller and everynode with --takeover (so apps/v1 sets
// are everynode's too), and the lower in-flight cap the burst passes.
func Settings() cluster.Settings {
	return cluster.Settings{
		KCMControllers: "*,-daemonset-controller",
		EverynodeArgs: []string{"--takeover", "--takeover-probe-timeout=5s", "--takeover-retry=5s",
			fmt.Sprintf("--max-in-flight=%d", InFlightCap)},
		HelmArgs: []string{"--set", "takeover.enabled=true"},
	}
}

// ConvergeBound is how long the sets may take to converge after the
// release (invariant 4) on nodes nodes: three minutes, plus four seconds
// per step of the slowest set's full rollout (its desired nodes over its
// budget: a set of maxUnavailable 1 on a pool of 167 nodes takes 167
// steps). Four seconds a step is a delete, kwok's confirmation, a create,
// a binding and kwok's Ready on a loaded 2-core machine, with margin.
func ConvergeBound(nodes int) time.Duration {
	var worst int
	for _, s := range Catalog() {
		desired := nodes
		if s.Pool != "" {
			desired = (nodes + len(Pools) - 1) / len(Pools)
		}
		steps := 1
		if s.Rolling() {
			ds := s.Everynode(SetNamespace, s.Template("v1", 1))
			st := placement.UpdateStrategy(ds)
			surge, unavailable, err := st.Limits(desired)
			if err == nil {
				steps = int(math.Ceil(float64(desired) / float64(max(1, surge+unavailable))))
			}
		}
		worst = max(worst, steps)
	}
	return 3*time.Minute + time.Duration(worst)*4*time.Second
}

// Run runs a soak on the cluster c names: it makes the cluster, runs the
// schedule of o.Seed over o.Duration, releases the sets, waits for them
// to converge, checks the audit log and writes the report. The error
// says whether an invariant broke; the result is there either way, once
// the schedule ran.
func Run(ctx context.Context, c *cluster.Cluster, o Options) (*Result, error) {
	if o.Log == nil {
		o.Log = os.Stdout
	}
	sched := Generate(o.Seed, o.Duration)
	r := &runner{c: c, o: o, dir: filepath.Join(c.State, "soak"), setLocks: make([]sync.Mutex, len(Catalog())),
		rev: map[string]int{}, busyNodes: map[string]bool{}, traffic: map[EventKind]*TrafficStats{}, admission: map[string]int{}}
	for _, k := range append(slices.Clone(FaultKinds), TrafficKinds...) {
		if !k.IsFault() {
			r.traffic[k] = &TrafficStats{Errors: map[string]int{}}
		}
	}
	for k, n := range sched.Counts() {
		if st := r.traffic[k]; st != nil {
			st.Scheduled = n
		}
	}
	res := &Result{Seed: o.Seed, Duration: o.Duration, Nodes: o.Nodes, Smoke: o.Smoke, Version: o.Version, Schedule: sched}
	r.say("soak: seed %d, %s, %d nodes; replay with: %s", o.Seed, o.Duration, o.Nodes, (&Result{Seed: o.Seed, Duration: o.Duration, Nodes: o.Nodes, Smoke: o.Smoke}).Replay())
	fmt.Fprint(o.Log, sched.Describe())
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, err
	}

	setupStart := time.Now()
	if err := r.setup(ctx); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	res.Setup = time.Since(setupStart)

	r.start = time.Now()
	res.Start = r.start
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	sampling.Go(func() { r.sample(sampleCtx) })
	r.say("running the schedule: %d events over %s", len(sched.Events), o.Duration)
	r.runSchedule(ctx, sched)
	res.End = time.Now()

	interrupted := ctx.Err()
	var conv Convergence
	if interrupted == nil {
		conv = r.releaseAndConverge(ctx)
	}
	stopSampling()
	sampling.Wait()

	n, err := r.rec.close()
	if err != nil {
		r.logf("writing the records: %v", err)
	}
	res.Records = n
	res.Faults = r.faults
	slices.SortFunc(res.Faults, func(a, b FaultRecord) int { return a.Start.Compare(b.Start) })
	res.Traffic, res.Admission, res.Converge = r.traffic, r.admission, conv
	if len(r.bindWaits) > 0 {
		w := slices.Clone(r.bindWaits)
		slices.Sort(w)
		res.Admission[fmt.Sprintf("ordinary pod batches bound, median %s, max %s", w[len(w)/2].Round(100*time.Millisecond), w[len(w)-1].Round(100*time.Millisecond))] = len(w)
	}
	res.Trends = Trends(r.samples)

	// The violations: the watches', the traffic's (admission), the
	// convergence's, the audit log's, the growth's.
	vs := r.rec.violations()
	vs = append(vs, r.violations...)
	if interrupted == nil && conv.Converged.IsZero() {
		vs = append(vs, Violation{At: time.Now(), Invariant: InvConvergence,
			Message: fmt.Sprintf("the sets did not converge within %s of the release", conv.Bound), Objects: conv.NotConverged})
	}
	events, err := ReadAuditFiles(AuditFiles(c.AuditLog()), setupStart)
	if err != nil {
		r.logf("reading the audit log: %v", err)
	}
	auditVs, sum := CheckAudit(events, everynodeUser(c))
	vs = append(vs, auditVs...)
	res.Audit = sum
	vs = append(vs, CheckGrowth(res.Trends)...)
	slices.SortStableFunc(vs, func(a, b Violation) int { return a.At.Compare(b.At) })
	res.Violations = vs

	if err := r.write(res); err != nil {
		r.logf("writing the report: %v", err)
	}
	if interrupted != nil {
		return res, fmt.Errorf("interrupted at +%s (the report is partial; %d violations so far): %w",
			res.End.Sub(res.Start).Round(time.Second), len(vs), interrupted)
	}
	if len(vs) > 0 {
		fmt.Fprintf(o.Log, "\n%d invariant violations. Seed %d; replay: %s\n\nfault timeline:\n%s\nviolations:\n", len(vs), o.Seed, res.Replay(), res.Timeline())
		for _, v := range vs {
			fmt.Fprintf(o.Log, "  +%s %s\n", v.At.Sub(res.Start).Round(time.Second), v)
		}
		return res, fmt.Errorf("%d invariant violations (seed %d)", len(vs), o.Seed)
	}
	r.say("no invariant broken; the sets converged %s after the last fault", conv.Took().Round(time.Second))
	return res, nil
}

func everynodeUser(c *cluster.Cluster) string {
	return "system:serviceaccount:" + c.Namespace + ":" + c.Release
}

// setup makes the cluster: the control plane with the soak's audit
// policy, the chart with takeover, everynode's two replicas in
// self-signed mode (the CA rotation needs it), the nodes and the 20 sets,
// and waits for the sets' first rollout.
func (r *runner) setup(ctx context.Context) error {
	c := r.c
	policy := filepath.Join(r.dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(AuditPolicy(everynodeUser(c))), 0o644); err != nil {
		return err
	}
	if err := c.UpControlPlane(ctx, Settings(), cluster.UpOptions{AuditPolicy: policy}); err != nil {
		return err
	}
	if err := c.InstallEverynode(ctx); err != nil {
		return err
	}
	if err := c.SetCertMode(ctx, cluster.CertSelfSigned); err != nil {
		return err
	}
	if err := c.StartReplica(ctx, 1); err != nil {
		return err
	}
	// The harness's admin client, made once here: the faults restart
	// replicas from several goroutines.
	if _, err := c.Client(); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return err
	}
	cfg.UserAgent = UserAgent + "/" + cmp.Or(r.o.Version, "dev")
	cfg.QPS, cfg.Burst = 100, 200
	// The dry-run sets copy the catalog's selectors, and every answer
	// warns of the overlap; the warnings say nothing the soak checks.
	cfg.WarningHandler = rest.NoWarnings{}
	if r.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if r.en, err = versioned.NewForConfig(cfg); err != nil {
		return err
	}
	burst := *cfg
	burst.QPS, burst.Burst = -1, 0
	if r.enBurst, err = versioned.NewForConfig(&burst); err != nil {
		return err
	}
	r.say("waiting for everynode to take over apps/v1 DaemonSets")
	if err := retry(ctx, 2*time.Minute, func(ctx context.Context) error {
		for n := range 2 {
			if text, err := r.scrape(ctx, n); err == nil && SumCounter(text, "everynode_takeover_active") == 1 {
				return nil
			}
		}
		return errors.New("everynode_takeover_active is not 1 on either replica")
	}); err != nil {
		return err
	}

	for _, ns := range []string{SetNamespace, PlainNamespace} {
		_, err := r.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	r.say("making %d kwok nodes", r.o.Nodes)
	if err := r.makeNodes(ctx); err != nil {
		return err
	}
	rec, err := newRecorder(filepath.Join(r.dir, fmt.Sprintf("records-seed%d.jsonl", r.o.Seed)))
	if err != nil {
		return err
	}
	r.rec = rec
	if err := rec.watch(ctx, r.kube, r.en); err != nil {
		return err
	}
	r.say("making the 20 sets")
	for _, s := range Catalog() {
		r.rec.act(ActObs{Kind: ActCreateSet, Set: s.Name})
		if err := retry(ctx, 2*time.Minute, func(ctx context.Context) error { return r.createSet(ctx, s) }); err != nil {
			return fmt.Errorf("set %s: %w", s.Name, err)
		}
	}
	bound := ConvergeBound(r.o.Nodes)
	r.say("waiting up to %s for the sets' first rollout", bound)
	made := time.Now()
	_, slowest, missing := r.waitConverged(ctx, bound, made)
	if len(missing) > 0 {
		return fmt.Errorf("the sets' first rollout did not finish within %s: %s", bound, strings.Join(missing, "; "))
	}
	r.logf("first rollout done; last: %s", slowest)
	return nil
}

func (r *runner) createSet(ctx context.Context, s SetSpec) error {
	var err error
	if s.Kind == KindApps {
		_, err = r.kube.AppsV1().DaemonSets(SetNamespace).Create(ctx, s.Apps(SetNamespace, s.Template("v1", 0)), metav1.CreateOptions{})
	} else {
		_, err = r.en.EverynodeV1alpha1().DaemonSets(SetNamespace).Create(ctx, s.Everynode(SetNamespace, s.Template("v1", 0)), metav1.CreateOptions{})
	}
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// makeNodes makes o.Nodes nodes, eight at a time, and waits for them
// to be Ready.
func (r *runner) makeNodes(ctx context.Context) error {
	names := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range 8 {
		wg.Go(func() {
			for i := range names {
				name, pool := fmt.Sprintf("soak-%04d", i), Pools[i%len(Pools)]
				if err := retry(ctx, time.Minute, func(ctx context.Context) error { return r.makeNode(ctx, name, pool) }); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range r.o.Nodes {
		names <- i
		r.nodes = append(r.nodes, nodeInfo{name: fmt.Sprintf("soak-%04d", i), pool: Pools[i%len(Pools)]})
	}
	close(names)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return retry(ctx, 5*time.Minute+time.Duration(r.o.Nodes)*200*time.Millisecond, func(ctx context.Context) error {
		list, err := r.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: NodeLabel + "=true", ResourceVersion: "0"})
		if err != nil {
			return err
		}
		ready := 0
		for i := range list.Items {
			if ok, _ := nodeServing(&list.Items[i]); ok {
				ready++
			}
		}
		if ready < r.o.Nodes {
			return fmt.Errorf("%d of %d nodes Ready", ready, r.o.Nodes)
		}
		return nil
	})
}

// runSchedule starts each event at its time and waits for them all.
func (r *runner) runSchedule(ctx context.Context, s Schedule) {
	var wg sync.WaitGroup
	next := time.Now()
	for i, e := range s.Events {
		sleep(ctx, time.Until(r.start.Add(e.At)))
		if ctx.Err() != nil {
			break
		}
		if time.Now().After(next) {
			r.logf("%s: %d of %d events started", fmtOffset(time.Since(r.start)), i, len(s.Events))
			next = time.Now().Add(time.Minute)
		}
		wg.Go(func() {
			if e.Kind.IsFault() {
				r.fault(ctx, e)
			} else {
				r.doTraffic(ctx, e)
			}
		})
	}
	wg.Wait()
}

// sample reads both replicas' RSS and goroutines every SampleEvery.
func (r *runner) sample(ctx context.Context) {
	tick := time.NewTicker(SampleEvery)
	defer tick.Stop()
	for {
		for n := range 2 {
			pid, err := r.c.PID(n)
			if err != nil || !running(pid) {
				continue // being restarted (its pid file half written)
			}
			text, err := r.scrape(ctx, n)
			if err != nil {
				continue // down or stopped: a gap in the line
			}
			rss, gor, err := ParseProcessMetrics(text)
			if err != nil {
				continue
			}
			r.mu.Lock()
			r.samples = append(r.samples, Sample{At: time.Now(), Replica: n, PID: pid, RSS: rss, Goroutines: gor})
			r.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// setStatus is a set's status as a SetObs, from the API.
func (r *runner) setStatus(ctx context.Context, s SetSpec) (*SetObs, error) {
	if s.Kind == KindApps {
		ds, err := r.kube.AppsV1().DaemonSets(SetNamespace).Get(ctx, s.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &SetObs{Name: s.Name, Generation: ds.Generation, ObservedGeneration: ds.Status.ObservedGeneration,
			Desired: ds.Status.DesiredNumberScheduled, Updated: ds.Status.UpdatedNumberScheduled, Available: ds.Status.NumberAvailable}, nil
	}
	ds, err := r.en.EverynodeV1alpha1().DaemonSets(SetNamespace).Get(ctx, s.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return &SetObs{Name: s.Name, Generation: ds.Generation, ObservedGeneration: ds.Status.ObservedGeneration,
		Desired: ds.Status.DesiredNumberScheduled, Updated: ds.Status.UpdatedNumberScheduled, Available: ds.Status.NumberAvailable,
		UpdateRevision: ds.Status.UpdateRevision}, nil
}

// waitConverged polls the sets every 5 s until they have all converged
// at once, for at most bound; it returns when, the last set to get
// there (and when, after from), and what the ones that did not say.
func (r *runner) waitConverged(ctx context.Context, bound time.Duration, from time.Time) (time.Time, string, []string) {
	first := map[string]time.Time{}
	deadline := time.Now().Add(bound)
	var missing []string
	for {
		missing = nil
		for _, s := range Catalog() {
			st, err := r.setStatus(ctx, s)
			switch {
			case err != nil:
				missing = append(missing, fmt.Sprintf("%s: %v", s.Name, err))
				delete(first, s.Name)
			case !st.Converged():
				missing = append(missing, fmt.Sprintf("%s: generation %d observed %d, desired %d updated %d available %d",
					s.Name, st.Generation, st.ObservedGeneration, st.Desired, st.Updated, st.Available))
				delete(first, s.Name)
			default:
				if _, ok := first[s.Name]; !ok {
					first[s.Name] = time.Now()
				}
			}
		}
		if len(missing) == 0 {
			slowest, at := "", time.Time{}
			for name, t := range first {
				if t.After(at) {
					slowest, at = name, t
				}
			}
			return time.Now(), fmt.Sprintf("%s, %s after the release", slowest, at.Sub(from).Round(time.Second)), nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Time{}, "", missing
		}
		sleep(ctx, 5*time.Second)
	}
}

// releaseAndConverge lets every set go after the last fault: a new good
// template (clears a bad image and a rollout that stopped itself),
// partition, canary and pause lifted, the old pods of OnDelete sets
// deleted; then waits for every set to converge (invariant 4).
func (r *runner) releaseAndConverge(ctx context.Context) Convergence {
	conv := Convergence{Bound: ConvergeBound(r.o.Nodes)}
	for _, f := range r.faults {
		if f.End.After(conv.LastFaultEnd) {
			conv.LastFaultEnd = f.End
		}
	}
	r.say("releasing the sets")
	for i, s := range Catalog() {
		r.setLocks[i].Lock()
		// A set the traffic failed to make again (its delete outlasted
		// the wait, or the API stayed away) is made here: its absence is
		// the soak's doing, not the controller's, and the report says so.
		if _, err := r.setStatus(ctx, s); apierrors.IsNotFound(err) {
			r.logf("release: %s is missing; making it again", s.Name)
			r.rec.act(ActObs{Kind: ActCreateSet, Set: s.Name})
			r.admit("sets the traffic left missing, made again at the release", 1)
			if err := retry(ctx, 2*time.Minute, func(ctx context.Context) error { return r.createSet(ctx, s) }); err != nil {
				r.logf("release %s: %v", s.Name, err)
			}
		}
		n := r.nextRev(s.Name)
		image := s.Image(fmt.Sprintf("v%d", n))
		var err error
		if s.Kind == KindApps {
			err = r.changeApps(ctx, s, func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = image })
		} else {
			err = r.changeEverynode(ctx, s, func(ds *everynodev1alpha1.DaemonSet) {
				ds.Spec.Template.Spec.Containers[0].Image = image
				if ru := ds.Spec.UpdateStrategy.RollingUpdate; ru != nil {
					ru.Paused, ru.NodeSelector = false, nil
					if ru.Partition != nil {
						ru.Partition = ptr0()
					}
				}
			})
		}
		if err != nil {
			r.logf("release %s: %v", s.Name, err)
		}
		r.setLocks[i].Unlock()
	}
	// OnDelete sets: once the controller made the new revision, their
	// old pods go, as a user rolls them.
	for i, s := range Catalog() {
		if !s.OnDelete {
			continue
		}
		r.setLocks[i].Lock()
		err := retry(ctx, 2*time.Minute, func(ctx context.Context) error {
			if st, err := r.setStatus(ctx, s); err != nil || st.ObservedGeneration < st.Generation {
				return fmt.Errorf("generation not observed yet (%v)", err)
			}
			return r.deleteOldPods(ctx, s, -1)
		})
		if err != nil {
			r.logf("release %s: %v", s.Name, err)
		}
		r.setLocks[i].Unlock()
	}
	conv.Released = time.Now()
	r.say("waiting up to %s for every set to converge", conv.Bound)
	conv.Converged, conv.Slowest, conv.NotConverged = r.waitConverged(ctx, conv.Bound, conv.Released)
	return conv
}

func ptr0() *intstr.IntOrString {
	v := intstr.FromInt32(0)
	return &v
}

// write puts the report, the plot and the run as JSON in o.Out.
func (r *runner) write(res *Result) error {
	if err := os.MkdirAll(r.o.Out, 0o755); err != nil {
		return err
	}
	stem := fmt.Sprintf("soak-%s-seed%d-%dnodes-%s", res.Start.UTC().Format("20060102-1504"), res.Seed, res.Nodes, res.Duration)
	if res.Smoke {
		stem = "smoke-" + stem
	}
	var windows []Window
	for _, f := range res.Faults {
		if f.Skipped == "" && !f.End.IsZero() {
			windows = append(windows, Window{From: f.Start, To: f.End, What: string(f.Event.Kind) + " " + f.Target})
		}
	}
	svg := Plot(r.samples, res.Start, windows, fmt.Sprintf("seed %d, %d nodes", res.Seed, res.Nodes))
	if err := os.WriteFile(filepath.Join(r.o.Out, stem+".svg"), svg, 0o644); err != nil {
		return err
	}
	res.Plot = stem + ".svg"
	if err := os.WriteFile(filepath.Join(r.o.Out, stem+".md"), []byte(res.Markdown()), 0o644); err != nil {
		return err
	}
	b, err := json.MarshalIndent(struct {
		*Result
		Samples []Sample `json:"samples"`
	}{res, r.samples}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.o.Out, stem+".json"), b, 0o644); err != nil {
		return err
	}
	r.say("report: %s (records of the watches: %s)", filepath.Join(r.o.Out, stem+".md"), r.rec.file.Name())
	return nil
}
