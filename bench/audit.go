package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Clients as told apart by user agent in the audit log. kwokctl gives
// kube-controller-manager, kube-scheduler and kwok one admin identity, so the
// user name would not do.
const (
	clientKCM       = "kube-controller-manager"
	clientEverynode = "everynode"
	clientScheduler = "kube-scheduler"
	// clientKruise is kruise-manager: "kruise-manager" for most of its
	// clients, "kruise-manager/daemonset-controller" for its DaemonSet
	// controller's own (pods, events, status).
	clientKruise = "kruise-manager"
	clientOther  = "other"
)

// controllerClients are the clients whose requests readAudit keeps one by
// one (auditWindow.requests).
var controllerClients = []string{clientKCM, clientEverynode, clientKruise}

func clientOf(userAgent string) string {
	for _, c := range []string{clientKCM, clientEverynode, clientScheduler} {
		if strings.HasPrefix(userAgent, c+"/") {
			return c
		}
	}
	if userAgent == clientKruise || strings.HasPrefix(userAgent, clientKruise+"/") {
		return clientKruise
	}
	return clientOther
}

// auditEvent is the part of an audit.k8s.io/v1 Event the benchmark reads.
type auditEvent struct {
	Verb           string          `json:"verb"`
	UserAgent      string          `json:"userAgent"`
	RequestURI     string          `json:"requestURI"`
	ObjectRef      *auditObjectRef `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
}

// auditObjectRef is what a request was about.
type auditObjectRef struct {
	Resource    string `json:"resource"`
	Subresource string `json:"subresource"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	APIGroup    string `json:"apiGroup"`
}

func (e auditEvent) resource() string {
	if e.ObjectRef == nil {
		return "-"
	}
	r := e.ObjectRef.Resource
	if e.ObjectRef.APIGroup != "" {
		r += "." + e.ObjectRef.APIGroup
	}
	if e.ObjectRef.Subresource != "" {
		r += "/" + e.ObjectRef.Subresource
	}
	return r
}

// auditWindow is what the audit log says about one span of time.
type auditWindow struct {
	// byClient counts requests per client; byVerbResource per client, then
	// "verb resource".
	byClient       map[string]int
	byVerbResource map[string]map[string]int
	// bindings are the times kube-scheduler bound a pod (pods/binding create).
	bindings []time.Time
	// kwokWatchesCut are the start times of kwok's watches of all pods
	// that ended within a minute (kube-apiserver ends them after 5-10
	// minutes otherwise). While kwok catches up on a new watch it makes
	// fewer pods Ready, so the phase runs partly at kwok's pace (unpatched
	// kwok replayed every pod from resourceVersion 0 and was cut again;
	// see README.md and RESULTS.md). The report flags the runs where it
	// happened.
	kwokWatchesCut []time.Time
	// podWatchesCut are the watches of pods (collections) that ended,
	// within [from, to], before the timeout their client asked for: the
	// ones kube-apiserver closed because the client did not keep up. Told
	// apart by client, as apiserver_terminated_watchers_total is not.
	podWatchesCut []watchCut
	// requests are each controller's requests (controllerClients), for
	// budgetUse and the counts by phase.
	requests map[string][]auditRequest
}

// auditRequest is one request of a controller: when kube-apiserver
// received it, what it was, and its HTTP code.
type auditRequest struct {
	at             time.Time
	verb, resource string
	code           int
}

// what names the request as "verb resource", with " (code)" when it was
// refused (a refused request costs a token too).
func (r auditRequest) what() string {
	if r.code >= 400 {
		return fmt.Sprintf("%s %s (%d)", r.verb, r.resource, r.code)
	}
	return r.verb + " " + r.resource
}

// podWork reports whether r is one a phase's pods wait on: a create or a
// delete of a pod (refused ones included).
func (r auditRequest) podWork() bool {
	return r.resource == "pods" && (r.verb == "create" || r.verb == "delete")
}

// kwokWatchCut reports whether e is the end of one of kwok's watches of
// pods (a collection, not one pod by name) that lasted less than a
// minute. The audit policy logs only ResponseComplete, so a watch shows
// up once it has ended.
func kwokWatchCut(e auditEvent) bool {
	return strings.HasPrefix(e.UserAgent, "kwok-controller/") && e.Verb == "watch" &&
		e.ObjectRef != nil && e.ObjectRef.Resource == "pods" && e.ObjectRef.Name == "" &&
		e.StageTimestamp.Sub(e.RequestReceivedTimestamp) < time.Minute
}

// watchCut is one pod watch that ended before its timeout.
type watchCut struct {
	// watcher is the client's product name, the user agent up to its
	// first "/" (kube-scheduler, kwok-controller, everynode, ...).
	watcher string
	// ended is when kube-apiserver ended it.
	ended time.Time
}

// podWatchCut reports whether e is a watch of pods (a collection) that
// ended at least a second before the timeoutSeconds its client asked for.
// client-go's reflectors ask for 5-10 minutes; the watch cache ends a
// watch early when its client falls behind (and when kube-apiserver stops,
// which a run does not see). A watch without timeoutSeconds is not judged.
func podWatchCut(e auditEvent) (watchCut, bool) {
	if e.Verb != "watch" || e.ObjectRef == nil || e.ObjectRef.Resource != "pods" || e.ObjectRef.Name != "" {
		return watchCut{}, false
	}
	u, err := url.Parse(e.RequestURI)
	if err != nil {
		return watchCut{}, false
	}
	timeout, err := strconv.Atoi(u.Query().Get("timeoutSeconds"))
	if err != nil || timeout <= 0 {
		return watchCut{}, false
	}
	lasted := e.StageTimestamp.Sub(e.RequestReceivedTimestamp)
	if lasted >= time.Duration(timeout)*time.Second-time.Second {
		return watchCut{}, false
	}
	watcher, _, _ := strings.Cut(e.UserAgent, "/")
	return watchCut{watcher: watcher, ended: e.StageTimestamp}, true
}

// auditOffset is the current end of the log: reading from there later yields
// only the requests made after now.
func auditOffset(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readAudit reads the events from offset on, keeping those received in
// [from, to].
func readAudit(path string, offset int64, from, to time.Time) (auditWindow, error) {
	w := auditWindow{byClient: map[string]int{}, byVerbResource: map[string]map[string]int{}, requests: map[string][]auditRequest{}}
	f, err := os.Open(path)
	if err != nil {
		return w, fmt.Errorf("opening audit log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return w, fmt.Errorf("seeking audit log: %w", err)
	}
	err = scanAudit(f, func(e auditEvent) {
		// A cut watch counts by its end: one cut in the window may have
		// started long before it.
		if cut, ok := podWatchCut(e); ok && !cut.ended.Before(from) && !cut.ended.After(to) {
			w.podWatchesCut = append(w.podWatchesCut, cut)
		}
		if e.RequestReceivedTimestamp.Before(from) || e.RequestReceivedTimestamp.After(to) {
			return
		}
		c := clientOf(e.UserAgent)
		w.byClient[c]++
		if w.byVerbResource[c] == nil {
			w.byVerbResource[c] = map[string]int{}
		}
		r := auditRequest{at: e.RequestReceivedTimestamp, verb: e.Verb, resource: e.resource()}
		if e.ResponseStatus != nil {
			r.code = e.ResponseStatus.Code
		}
		w.byVerbResource[c][r.what()]++
		if slices.Contains(controllerClients, c) {
			w.requests[c] = append(w.requests[c], r)
		}
		if c == clientScheduler && e.Verb == "create" && e.resource() == "pods/binding" {
			w.bindings = append(w.bindings, e.RequestReceivedTimestamp)
		}
		if kwokWatchCut(e) {
			w.kwokWatchesCut = append(w.kwokWatchesCut, e.RequestReceivedTimestamp)
		}
	})
	if err != nil {
		return w, fmt.Errorf("reading audit log: %w", err)
	}
	return w, nil
}

// scanAudit calls f with each event of the audit log in r, in the log's
// order, and skips the lines that are no event: the log is read while
// kube-apiserver writes it, so its first and last lines may be cut short.
func scanAudit(r io.Reader, f func(auditEvent)) error {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			var e auditEvent
			if json.Unmarshal(line, &e) == nil {
				f(e)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// budget is one phase [from, to] as the controller's client rate limiter
// saw it (budgetUse), up to its last pod request (a create or delete of a
// pod: the requests the phase waits on; status writes and events may
// follow). Its parts add up to the phase:
//
//	to - from = (requests - burst) / qps + idle + unspent + tail
//
// so a gap between two systems in a phase bound by the QPS is put where it
// is: more requests before the last pod request, QPS left unused while
// there were requests to make (idle), budget left over at the last pod
// request (unspent), or a longer wait after it (tail).
type budget struct {
	// requests the controller made from the phase's start up to and
	// including its last pod request.
	requests int
	// idle: seconds the token bucket sat full before the last pod request,
	// that is, client QPS the controller left unused while it still had
	// requests to make. This includes the wait for its first request.
	idle float64
	// unspent: the tokens left in the bucket at the last pod request, in
	// seconds of QPS: budget refilled while the controller waited (for
	// pods to go, say) and never used before the phase's last pod request.
	unspent float64
	// tail: from the last pod request to the end of the phase (the last
	// pods turning Ready).
	tail float64
	// byWhat counts all the phase's requests, those after the last pod
	// request too, by "verb resource" (and " (code)" when refused).
	byWhat map[string]int
}

// budgetUse splits a phase [from, to] as the controller's client rate
// limiter saw it, from the times its requests reached kube-apiserver: a
// token bucket of qps and burst, full at from. A phase bound by the client
// QPS alone has idle near 0, and then the requests' count, unspent and the
// tail decide its length; anything else (a wait for the API server, the
// scheduler, kwok or the controller's own syncs) shows as idle. Its
// durations are NaN if the controller made no pod request in the phase.
func budgetUse(requests []auditRequest, from, to time.Time, qps float64, burst int) budget {
	// The log is in order of completion, not arrival.
	var in []auditRequest
	u := budget{byWhat: map[string]int{}}
	for _, r := range requests {
		if !r.at.Before(from) && !r.at.After(to) {
			in = append(in, r)
			u.byWhat[r.what()]++
		}
	}
	slices.SortStableFunc(in, func(a, b auditRequest) int { return a.at.Compare(b.at) })
	last := -1
	for i, r := range in {
		if r.podWork() {
			last = i
		}
	}
	if last < 0 {
		u.idle, u.unspent, u.tail = math.NaN(), math.NaN(), math.NaN()
		return u
	}
	in = in[:last+1]
	u.requests = len(in)
	tokens, prev := float64(burst), from
	var lost float64
	for _, r := range in {
		tokens += r.at.Sub(prev).Seconds() * qps
		if tokens > float64(burst) {
			lost += tokens - float64(burst)
			tokens = float64(burst)
		}
		tokens--
		prev = r.at
	}
	u.idle, u.unspent, u.tail = lost/qps, tokens/qps, to.Sub(prev).Seconds()
	return u
}
