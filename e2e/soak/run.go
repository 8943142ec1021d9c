package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

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
	// heapKept is when each replica process's heap profile was last kept
	// (sample's goroutine only).
	heapKept  map[int]time.Time
	bindWaits []time.Duration
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

// runSchedule starts each event at its time and waits for them all.
func (r *runner) runSchedule(ctx context.Context, s Schedule) {
	// Traffic still retrying TrafficGrace after the schedule's end is cut:
	// the release makes every set whole again (unpaused, made again if
	// missing), and each step of the traffic that must not be left half
	// done (a node cut off, a pod batch to clean up) runs on a context
	// without this cancellation. The faults keep ctx: each must end.
	trafficCtx, cut := context.WithCancelCause(ctx)
	defer cut(nil)
	stop := time.AfterFunc(time.Until(r.start.Add(s.Duration+TrafficGrace)), func() { cut(errTrafficCut) })
	defer stop.Stop()
	var wg sync.WaitGroup
	next := time.Now()
	for i, e := range s.Events {
		sleep(ctx, time.Until(r.start.Add(e.At)))
		if ctx.Err() != nil {
			break
		}
		if time.Now().After(next) {
			// The watches' checker runs as the records come: a violation
			// shows here within the minute, not only in the report.
			r.logf("%s: %d of %d events started, %d violations so far", fmtOffset(time.Since(r.start)), i, len(s.Events), len(r.rec.violations()))
			next = time.Now().Add(time.Minute)
		}
		wg.Go(func() {
			if e.Kind.IsFault() {
				r.fault(ctx, e)
			} else {
				r.doTraffic(trafficCtx, e)
			}
		})
	}
	wg.Wait()
}

// TrafficGrace is how long traffic may go on past the schedule's end: an
// undo retrying through a fault near the end ran 23 s past a smoke's
// 3-minute schedule, holding the release back.
const TrafficGrace = 10 * time.Second

// errTrafficCut is the cause of the traffic's context once TrafficGrace
// is over; a failure that follows from it is counted as cut, not as the
// cluster's doing.
var errTrafficCut = errors.New("traffic cut at the schedule's end")

// sample reads both replicas' RSS, goroutines and heap every SampleEvery.
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
			m, err := ParseProcessMetrics(text)
			if err != nil {
				continue
			}
			r.mu.Lock()
			r.samples = append(r.samples, Sample{At: time.Now(), Replica: n, PID: pid, RSS: m.RSS, Goroutines: m.Goroutines, HeapInUse: m.HeapInUse})
			r.mu.Unlock()
			r.keepHeapProfile(ctx, n, pid)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// keepHeapProfile saves replica n's heap profile (pid's first, then one
// every HeapProfileEvery) beside the run's records, so that a climbing
// heap in use can be read by what holds it: go tool pprof -diff_base
// <first> <last>.
func (r *runner) keepHeapProfile(ctx context.Context, n, pid int) {
	if r.heapKept == nil {
		r.heapKept = map[int]time.Time{}
	}
	if last, ok := r.heapKept[pid]; ok && time.Since(last) < HeapProfileEvery {
		return
	}
	prof, err := r.health(ctx, n, "/debug/pprof/heap")
	if err != nil {
		return // down or stopped; the next sample tries again
	}
	r.heapKept[pid] = time.Now()
	name := fmt.Sprintf("heap-seed%d-r%d-pid%d-%s.pb.gz", r.o.Seed, n, pid, time.Now().UTC().Format("150405"))
	_ = os.WriteFile(filepath.Join(r.dir, name), []byte(prof), 0o644)
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
