package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// `bench inplace-window AUDIT_LOG START END`: what bounds an in-place
// update, from kube-apiserver's audit log of a bench cluster kept with
// KEEP_CLUSTER=1 (.e2e/kwok/clusters/everynode-bench/logs/audit.log).
// START and END are the update's window (RFC 3339), from the bench's
// "rolling update of the image" and "update N s" lines.
//
// Per pod: everynode's image patch, then kwok's two status writes after it
// (kubelet-step, e2e/kwok: the container waiting with the new image, then
// running and ready). It prints how long each step took, how many pods
// were patched but not running again over time (at maxUnavailable the
// budget bounds the update, below it the client QPS or the controller),
// and how soon after a pod ran again everynode sent its next patch: the
// controller's own share of each wave while the budget bounds the update.
//
// For the ungated variant only: with the gate, everynode's gate writes and
// kwok's Ready flip (kubelet-ready) come between, and "running" is not yet
// available.

// inPlaceWrites is what the window keeps of the audit log: per pod,
// everynode's first patch of it and kwok's status writes, each at the time
// kube-apiserver was done with it, within [from, to].
type inPlaceWrites struct {
	from, to time.Time
	patched  map[string]time.Time
	kwok     map[string][]time.Time
}

func newInPlaceWrites(from, to time.Time) *inPlaceWrites {
	return &inPlaceWrites{from: from, to: to, patched: map[string]time.Time{}, kwok: map[string][]time.Time{}}
}

func (w *inPlaceWrites) add(e auditEvent) {
	t, o := e.StageTimestamp, e.ObjectRef
	if t.Before(w.from) || t.After(w.to) || o == nil || o.Resource != "pods" || (e.Verb != "patch" && e.Verb != "update") {
		return
	}
	switch {
	case strings.HasPrefix(e.UserAgent, "everynode/") && o.Subresource == "":
		if _, ok := w.patched[o.Name]; !ok {
			w.patched[o.Name] = t
		}
	case strings.HasPrefix(e.UserAgent, "kwok") && o.Subresource == "status":
		w.kwok[o.Name] = append(w.kwok[o.Name], t)
	}
}

// restart is one pod's way back: everynode's patch, then kwok's first
// status write after it (stopped) and its second (running).
type restart struct{ patched, stopped, running time.Time }

// inPlaceWindow is the window's pods restarted in place.
type inPlaceWindow struct {
	from time.Time
	// patched counts the pods everynode patched; restarts are those kwok
	// wrote twice after, by patch time.
	patched  int
	restarts []restart
}

func (w *inPlaceWrites) window() inPlaceWindow {
	out := inPlaceWindow{from: w.from, patched: len(w.patched)}
	for name, tp := range w.patched {
		var after []time.Time
		for _, t := range w.kwok[name] {
			if !t.Before(tp) {
				after = append(after, t)
			}
		}
		slices.SortFunc(after, time.Time.Compare)
		if len(after) >= 2 {
			out.restarts = append(out.restarts, restart{tp, after[0], after[1]})
		}
	}
	slices.SortFunc(out.restarts, func(a, b restart) int {
		return cmp.Or(a.patched.Compare(b.patched), a.stopped.Compare(b.stopped), a.running.Compare(b.running))
	})
	return out
}

// inPlaceSample is how often the window counts the pods not running.
const inPlaceSample = 500 * time.Millisecond

func (iw inPlaceWindow) write(w io.Writer) error {
	rows := iw.restarts
	if len(rows) == 0 {
		return errors.New("no pod patched by everynode and restarted by kwok in that window")
	}
	fmt.Fprintf(w, "pods patched %d, restarted by kwok after the patch %d\n", iw.patched, len(rows))
	steps := []struct {
		what     string
		from, to func(restart) time.Time
	}{
		{"patch to stopped", func(r restart) time.Time { return r.patched }, func(r restart) time.Time { return r.stopped }},
		{"stopped to running", func(r restart) time.Time { return r.stopped }, func(r restart) time.Time { return r.running }},
		{"patch to running", func(r restart) time.Time { return r.patched }, func(r restart) time.Time { return r.running }},
	}
	for _, s := range steps {
		xs := make([]float64, 0, len(rows))
		for _, r := range rows {
			xs = append(xs, s.to(r).Sub(s.from(r)).Seconds())
		}
		fmt.Fprintf(w, "%-19s p50 %.2f s  p90 %.2f  max %.2f\n", s.what, atRank(xs, .5), atRank(xs, .9), atRank(xs, 1))
	}
	running := make([]time.Time, 0, len(rows))
	for _, r := range rows {
		running = append(running, r.running)
	}
	slices.SortFunc(running, time.Time.Compare)
	first, last := rows[0].patched, running[len(running)-1]
	var samples []string
	for t := first; !t.After(last); t = t.Add(inPlaceSample) {
		n := 0
		for _, r := range rows {
			if !r.patched.After(t) && t.Before(r.running) {
				n++
			}
		}
		samples = append(samples, strconv.Itoa(n))
	}
	fmt.Fprintln(w, "patched, not running, every 0.5 s:", strings.Join(samples, " "))
	var react []float64
	for _, r := range rows {
		// The latest pod running again by this patch, if any.
		i := sort.Search(len(running), func(i int) bool { return running[i].After(r.patched) }) - 1
		if i >= 0 {
			react = append(react, r.patched.Sub(running[i]).Seconds())
		}
	}
	if len(react) > 0 {
		fmt.Fprintf(w, "patch after the latest restart: p50 %.2f s  p90 %.2f\n", atRank(react, .5), atRank(react, .9))
	}
	fmt.Fprintf(w, "first patch %.2f s into the window, last pod running %.2f s after it\n", first.Sub(iw.from).Seconds(), last.Sub(first).Seconds())
	return nil
}

// inPlaceWindowCmd is `bench inplace-window AUDIT_LOG START END`.
func inPlaceWindowCmd(args []string, w io.Writer) error {
	if len(args) != 3 {
		return errUsage
	}
	var window [2]time.Time
	for i, s := range args[1:] {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return fmt.Errorf("%q is no RFC 3339 time: %w", s, err)
		}
		window[i] = t
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	writes := newInPlaceWrites(window[0], window[1])
	if err := scanAudit(f, writes.add); err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	return writes.window().write(w)
}
