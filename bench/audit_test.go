package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestReadAuditKwokWatchesCut(t *testing.T) {
	line := func(ua, verb, resource, from, to string) string {
		return `{"kind":"Event","stage":"ResponseComplete","verb":"` + verb + `","userAgent":"` + ua +
			`","objectRef":{"resource":"` + resource + `","apiVersion":"v1"},"requestReceivedTimestamp":"2026-12-02T00:` + from +
			`Z","stageTimestamp":"2026-12-02T00:` + to + `Z"}`
	}
	log := strings.Join([]string{
		line("kwok-controller/v0.8.0 (linux/amd64)", "watch", "pods", "36:09.413", "36:16.257"),  // cut: 7 s
		line("kwok-controller/v0.8.0 (linux/amd64)", "watch", "pods", "21:16.074", "28:03.082"),  // timed out: 7 min
		line("kwok-controller/v0.8.0 (linux/amd64)", "watch", "nodes", "36:10.000", "36:12.000"), // not pods
		line("kwok-controller/v0.8.0 (linux/amd64)", "list", "pods", "36:11.000", "36:11.100"),   // not a watch
		line("kube-scheduler/v0.0.0 (linux/amd64)", "watch", "pods", "36:12.000", "36:13.000"),   // not kwok
		line("kwok-controller/v0.8.0 (linux/amd64)", "watch", "pods", "59:00.000", "59:05.000"),  // outside the window
	}, "\n") + "\n"
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	w, err := readAudit(path, 0, from, from.Add(50*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 12, 2, 0, 36, 9, 413000000, time.UTC)
	if len(w.kwokWatchesCut) != 1 || !w.kwokWatchesCut[0].Equal(want) {
		t.Errorf("kwokWatchesCut = %v, want [%v]", w.kwokWatchesCut, want)
	}
}

// A pod watch counts as cut when it ended before the timeout its client
// asked for, by its end time, whoever the client; watches that ran their
// course, watches of one pod or of other resources do not.
func TestReadAuditPodWatchesCut(t *testing.T) {
	line := func(ua, resource, uri, from, to string) string {
		return `{"kind":"Event","stage":"ResponseComplete","verb":"watch","userAgent":"` + ua +
			`","requestURI":"` + uri + `","objectRef":{"resource":"` + resource + `","apiVersion":"v1"},"requestReceivedTimestamp":"2026-12-02T00:` + from +
			`Z","stageTimestamp":"2026-12-02T00:` + to + `Z"}`
	}
	const pods = "/api/v1/pods?allowWatchBookmarks=true\u0026resourceVersion=5\u0026timeoutSeconds=%d\u0026watch=true"
	uri := func(timeout int) string { return fmt.Sprintf(pods, timeout) }
	log := strings.Join([]string{
		line("everynode/v0.0.0 (linux/amd64)", "pods", uri(500), "05:00.000", "12:00.000"),          // cut after 7 of 8m20s, started before the window
		line("kube-scheduler/v0.0.0 (linux/amd64)", "pods", uri(400), "10:00.000", "16:40.000"),     // ran its course
		line("kube-scheduler/v0.0.0 (linux/amd64)", "pods", uri(400), "12:00.000", "12:30.000"),     // cut
		line("kube-scheduler/v0.0.0 (linux/amd64)", "nodes", uri(400), "12:00.000", "12:30.000"),    // not pods
		line("kwok-controller/v0.8.0", "pods", "/api/v1/pods?watch=true", "12:00.000", "12:05.000"), // no timeout asked: not judged
		line("everynode/v0.0.0 (linux/amd64)", "pods", uri(500), "55:00.000", "55:10.000"),          // outside the window
		"{torn",
	}, "\n") + "\n"
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 12, 2, 0, 10, 0, 0, time.UTC)
	w, err := readAudit(path, 0, from, from.Add(30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	want := []watchCut{
		{watcher: "everynode", ended: time.Date(2026, 12, 2, 0, 12, 0, 0, time.UTC)},
		{watcher: "kube-scheduler", ended: time.Date(2026, 12, 2, 0, 12, 30, 0, time.UTC)},
	}
	if !reflect.DeepEqual(w.podWatchesCut, want) {
		t.Errorf("podWatchesCut = %v, want %v", w.podWatchesCut, want)
	}
}

// budgetUse must see a controller at its QPS as leaving nothing unused,
// count a pause only for the time the bucket sat full, and split every
// phase into parts that add up to its length.
func TestBudgetUse(t *testing.T) {
	from := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return from.Add(time.Duration(s * float64(time.Second))) }
	req := func(s float64) auditRequest {
		return auditRequest{at: at(s), verb: "create", resource: "pods", code: 201}
	}
	const qps, burst = 10, 10
	adds := func(name string, u budget, phase float64) {
		t.Helper()
		if sum := float64(u.requests-burst)/qps + u.idle + u.unspent + u.tail; math.Abs(sum-phase) > 1e-9 {
			t.Errorf("%s: parts add up to %v s, phase is %v s (%+v)", name, sum, phase, u)
		}
	}
	var steady []auditRequest
	// Burst 10 at once, then 1 every 0.1 s (QPS 10) for 5 s.
	for range 10 {
		steady = append(steady, req(0))
	}
	for i := 1; i <= 50; i++ {
		steady = append(steady, req(float64(i)/10))
	}
	u := budgetUse(steady, from, at(6), qps, burst)
	if u.requests != 60 || u.byWhat["create pods"] != 60 || math.Abs(u.idle) > 1e-9 || math.Abs(u.unspent) > 1e-9 || math.Abs(u.tail-1) > 1e-9 {
		t.Errorf("at the QPS: %+v; want 60 requests, idle 0, unspent 0, tail 1", u)
	}
	adds("at the QPS", u, 6)
	// The same with a 3 s pause after 2 s: the request due at 2.1 s comes
	// at 5.1 s, and the bucket, empty at 2.0 s and full again at 3.0 s,
	// sat full for 2.1 s; it stays nearly full after (one request a refill),
	// and 9 tokens are left unspent at the end. Given out of order, as the
	// log is.
	var paused []auditRequest
	for i := len(steady) - 1; i >= 0; i-- {
		r := steady[i]
		if r.at.After(at(2)) {
			r.at = r.at.Add(3 * time.Second)
		}
		paused = append(paused, r)
	}
	u = budgetUse(paused, from, at(9), qps, burst)
	if math.Abs(u.idle-2.1) > 1e-9 || math.Abs(u.unspent-0.9) > 1e-9 || math.Abs(u.tail-1) > 1e-9 {
		t.Errorf("with a 3 s pause: %+v; want idle 2.1, unspent 0.9, tail 1", u)
	}
	adds("with a 3 s pause", u, 9)
	// A last small batch after a wait that did not fill the bucket: 20
	// requests at once, then 3 more 0.5 s later. The bucket refilled 5
	// tokens and the batch used 3: 0.2 s unspent, none idle.
	var batch []auditRequest
	for range 20 {
		batch = append(batch, req(0))
	}
	// The first 10 came from the burst; the next 10 took a second at the QPS.
	for i := range 10 {
		batch[10+i] = req(float64(i+1) / 10)
	}
	for range 3 {
		batch = append(batch, req(1.5))
	}
	u = budgetUse(batch, from, at(2), qps, burst)
	if math.Abs(u.idle) > 1e-9 || math.Abs(u.unspent-0.2) > 1e-9 || math.Abs(u.tail-0.5) > 1e-9 {
		t.Errorf("a small last batch: %+v; want idle 0, unspent 0.2, tail 0.5", u)
	}
	adds("a small last batch", u, 2)
	// A status write after the last pod request is counted by kind but
	// not in the parts: the phase waited on the pods, not on it.
	withStatus := append(slices.Clone(steady), auditRequest{at: at(5.5), verb: "update", resource: "daemonsets.apps/status", code: 200})
	u = budgetUse(withStatus, from, at(6), qps, burst)
	if u.requests != 60 || u.byWhat["update daemonsets.apps/status"] != 1 || math.Abs(u.tail-1) > 1e-9 {
		t.Errorf("a status write after the last pod request: %+v; want 60 requests, tail 1", u)
	}
	adds("a status write after the last pod request", u, 6)
	// Requests outside the phase do not count; none in it: NaN.
	if u := budgetUse(steady, at(10), at(20), qps, burst); u.requests != 0 || !math.IsNaN(u.idle) {
		t.Errorf("no requests in the phase: %+v, want none and NaN", u)
	}
}

// Each controller's requests are told apart by user agent: Kruise's
// manager sends its own name bare from most of its clients and with its
// controller's name from the DaemonSet controller's.
func TestClientOf(t *testing.T) {
	for ua, want := range map[string]string{
		"kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/abc/system:serviceaccount:kube-system:daemon-set-controller": clientKCM,
		"everynode/v0.1.0 (linux/amd64)":       clientEverynode,
		"kube-scheduler/v1.37.2 (linux/amd64)": clientScheduler,
		"kruise-manager":                       clientKruise,
		"kruise-manager/daemonset-controller":  clientKruise,
		"kruise-manager-other/v1":              clientOther,
		"kwok-controller/v0.8.0":               clientOther,
	} {
		if got := clientOf(ua); got != want {
			t.Errorf("clientOf(%q) = %q, want %q", ua, got, want)
		}
	}
	if !slices.Contains(controllerClients, kruise.client) {
		t.Errorf("Kruise's requests are not kept one by one: %v", controllerClients)
	}
}
