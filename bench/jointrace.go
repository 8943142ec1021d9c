package main

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// `bench join-trace AUDIT_LOG BENCH_LOG`: where a join's pods spend the
// time after they are made, pod by pod, from kube-apiserver's audit log of
// a bench cluster kept with KEEP_CLUSTER=1
// (.e2e/kwok/clusters/everynode-bench/logs/audit.log) and the bench's own
// output (its "N nodes join (wave i of n)" lines).
//
// Per system it prints the p50, p90 and mean of: kube-scheduler's binding
// (its POST's latency at kube-apiserver), kwok's reaction (binding stored
// -> kwok's first status patch of the pod received: the watch event's way
// to kwok, kwok's queue and its work), that patch's latency, and the
// controller's pod creates (admission included). A join's pods are the
// bindings in namespace bench within joinWindow of a wave's start; the
// bench log gives that start to the second, in its clock read as UTC on
// the audit log's first day, so the last table (kwok's reaction by the
// binding's offset into its wave) is approximate.

// joinWindow is how soon after its wave's start a joined pod is bound.
const joinWindow = 5 * time.Second

// waveStart is a join wave's start as the bench log gives it.
type waveStart struct {
	// clock is the time of day, to the second.
	clock  time.Duration
	system string
}

var waveLine = regexp.MustCompile(`^(\d\d):(\d\d):(\d\d) \[[AB] (\w+) r\d+\] \d+ nodes join \(wave`)

// readWaveStarts reads the join waves' starts from the bench's output.
func readWaveStarts(r io.Reader) ([]waveStart, error) {
	var out []waveStart
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := waveLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		d, err := time.ParseDuration(m[1] + "h" + m[2] + "m" + m[3] + "s")
		if err != nil {
			return nil, err
		}
		out = append(out, waveStart{clock: d, system: m[4]})
	}
	return out, sc.Err()
}

// span is one request: when kube-apiserver received it, and when it was
// done (its stage timestamp).
type span struct{ received, done time.Time }

// joinPods is what the trace keeps of the audit log: per pod of namespace
// bench, its binding and kwok's first status patch, and every pod create.
type joinPods struct {
	// day is the day (UTC) of the first event about a pod of bench.
	day     time.Time
	bound   []string // by first binding, the order of the trace's systems
	binding map[string]span
	patch   map[string]span
	creates []span
}

func newJoinPods() *joinPods {
	return &joinPods{binding: map[string]span{}, patch: map[string]span{}}
}

func (j *joinPods) add(e auditEvent) {
	o := e.ObjectRef
	if o == nil || o.Resource != "pods" || o.Namespace != benchNamespace {
		return
	}
	s := span{e.RequestReceivedTimestamp.UTC(), e.StageTimestamp.UTC()}
	if j.day.IsZero() {
		j.day = time.Date(s.received.Year(), s.received.Month(), s.received.Day(), 0, 0, 0, 0, time.UTC)
	}
	switch {
	case o.Subresource == "binding" && e.Verb == "create":
		if _, ok := j.binding[o.Name]; !ok {
			j.bound = append(j.bound, o.Name)
		}
		j.binding[o.Name] = s
	case o.Subresource == "status" && e.Verb == "patch" && strings.Contains(e.UserAgent, "kwok"):
		if _, ok := j.patch[o.Name]; !ok {
			j.patch[o.Name] = s
		}
	case o.Subresource == "" && e.Verb == "create":
		j.creates = append(j.creates, s)
	}
}

// joinedPod is one pod of a join, in milliseconds: its binding's offset
// from the wave's start, the binding's latency, kwok's reaction to it and
// kwok's patch's latency.
type joinedPod struct {
	name                               string
	offset, binding, reaction, patched float64
}

// joinTrace is the trace of the join waves by system.
type joinTrace struct {
	systems []string // in order of their first pod bound
	pods    map[string][]joinedPod
	// creates are the latencies (ms) of the pod creates in the waves.
	creates map[string][]float64
}

// trace puts the pods into the waves that start at starts. A pod counts
// if it was bound within joinWindow of a wave's start and kwok patched it
// after its binding was stored.
func (j *joinPods) trace(starts []waveStart) joinTrace {
	t := joinTrace{pods: map[string][]joinedPod{}, creates: map[string][]float64{}}
	type wave struct {
		start  time.Time
		system string
	}
	waves := make([]wave, 0, len(starts))
	for _, s := range starts {
		waves = append(waves, wave{j.day.Add(s.clock), s.system})
	}
	waveOf := func(at time.Time) (wave, bool) {
		for _, w := range waves {
			if !at.Before(w.start) && !at.After(w.start.Add(joinWindow)) {
				return w, true
			}
		}
		return wave{}, false
	}
	ms := func(from, to time.Time) float64 { return to.Sub(from).Seconds() * 1000 }
	for _, name := range j.bound {
		b := j.binding[name]
		w, ok := waveOf(b.received)
		p, patched := j.patch[name]
		if !ok || !patched || p.received.Before(b.done) {
			continue
		}
		if _, seen := t.pods[w.system]; !seen {
			t.systems = append(t.systems, w.system)
		}
		t.pods[w.system] = append(t.pods[w.system], joinedPod{name: name,
			offset: ms(w.start, b.received), binding: ms(b.received, b.done), reaction: ms(b.done, p.received), patched: ms(p.received, p.done)})
	}
	for _, c := range j.creates {
		if w, ok := waveOf(c.received); ok {
			t.creates[w.system] = append(t.creates[w.system], ms(c.received, c.done))
		}
	}
	return t
}

// joinOffsetStep and joinOffsetSteps bucket the bindings by their offset
// into the wave: 250 ms steps, the last holding all from 3 s on.
const (
	joinOffsetStep  = 250.0
	joinOffsetSteps = 12
)

func (t joinTrace) write(w io.Writer) {
	line := func(label string, xs []float64, extra string) {
		fmt.Fprintf(w, "  %-42s p50 %6.1f ms  p90 %6.1f  mean %6.1f%s\n", label, atRank(xs, .5), atRank(xs, .9), mean(xs), extra)
	}
	figure := func(rows []joinedPod, f func(joinedPod) float64) []float64 {
		out := make([]float64, 0, len(rows))
		for _, r := range rows {
			out = append(out, f(r))
		}
		return out
	}
	for _, s := range t.systems {
		rows := t.pods[s]
		fmt.Fprintln(w, s, len(rows), "pods")
		line("binding latency", figure(rows, func(r joinedPod) float64 { return r.binding }), "")
		line("kwok reaction (bound -> patch received)", figure(rows, func(r joinedPod) float64 { return r.reaction }), "")
		line("kwok patch latency", figure(rows, func(r joinedPod) float64 { return r.patched }), "")
		if made := t.creates[s]; len(made) > 0 {
			line("controller pod create latency", made, fmt.Sprintf("  (%d)", len(made)))
		}
	}
	fmt.Fprintln(w, "kwok reaction by the binding's offset from the wave start, to the second (p50 ms, n)")
	for _, s := range t.systems {
		by := map[int][]float64{}
		for _, r := range t.pods[s] {
			k := min(int(r.offset/joinOffsetStep), joinOffsetSteps)
			by[k] = append(by[k], r.reaction)
		}
		var cells []string
		for _, k := range slices.Sorted(maps.Keys(by)) {
			cells = append(cells, fmt.Sprintf("%.2fs:%.0f(%d)", float64(k)*joinOffsetStep/1000, atRank(by[k], .5), len(by[k])))
		}
		fmt.Fprintln(w, s, strings.Join(cells, " "))
	}
}

// joinTraceCmd is `bench join-trace AUDIT_LOG BENCH_LOG`.
func joinTraceCmd(args []string, w io.Writer) error {
	if len(args) != 2 {
		return errUsage
	}
	bl, err := os.Open(args[1])
	if err != nil {
		return err
	}
	defer bl.Close()
	starts, err := readWaveStarts(bl)
	if err != nil {
		return fmt.Errorf("%s: %w", args[1], err)
	}
	if len(starts) == 0 {
		return fmt.Errorf("%s: no \"nodes join (wave\" line", args[1])
	}
	al, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer al.Close()
	j := newJoinPods()
	if err := scanAudit(al, j.add); err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	if j.day.IsZero() {
		return fmt.Errorf("%s: no request about a pod of namespace %s", args[0], benchNamespace)
	}
	j.trace(starts).write(w)
	return nil
}
