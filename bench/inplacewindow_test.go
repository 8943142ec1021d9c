package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The expected output is what bench/hack/inplace-window.py, which
// inplace-window replaces, printed for testdata/audit.log (without its
// torn line, which the script did not skip) over 12:01:00-12:01:30.
func TestInPlaceWindowCmd(t *testing.T) {
	const window = `pods patched 6, restarted by kwok after the patch 5
patch to stopped    p50 1.25 s  p90 1.52  max 1.52
stopped to running  p50 1.15 s  p90 1.63  max 1.63
patch to running    p50 2.45 s  p90 2.88  max 2.88
patched, not running, every 0.5 s: 1 2 2 2 2 1 2 2 2 2 2 1 1 1 1 1
patch after the latest restart: p50 0.05 s  p90 0.10
first patch 0.51 s into the window, last pod running 7.83 s after it
`
	tests := map[string]struct {
		args    []string
		want    string
		wantErr string
	}{
		"the update":        {args: []string{"testdata/audit.log", "2026-12-02T12:01:00Z", "2026-12-02T12:01:30Z"}, want: window},
		"in another zone":   {args: []string{"testdata/audit.log", "2026-12-02T13:01:00+01:00", "2026-12-02T13:01:30+01:00"}, want: window},
		"no update":         {args: []string{"testdata/audit.log", "2026-12-02T12:00:00Z", "2026-12-02T12:00:59Z"}, wantErr: "no pod patched by everynode and restarted by kwok"},
		"no zone":           {args: []string{"testdata/audit.log", "2026-12-02T12:01:00", "2026-12-02T12:01:30Z"}, wantErr: "RFC 3339"},
		"no such log":       {args: []string{"testdata/none.log", "2026-12-02T12:01:00Z", "2026-12-02T12:01:30Z"}, wantErr: "no such file"},
		"no window":         {args: []string{"testdata/audit.log"}, wantErr: errUsage.Error()},
		"more than the end": {args: []string{"testdata/audit.log", "2026-12-02T12:01:00Z", "2026-12-02T12:01:30Z", "x"}, wantErr: errUsage.Error()},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			err := inPlaceWindowCmd(tc.args, &out)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want one saying %q", err, tc.wantErr)
				}
				if usage := tc.wantErr == errUsage.Error(); usage != errors.Is(err, errUsage) {
					t.Errorf("error %v; a usage error: %v", err, usage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("output:\n%s\nwant:\n%s", out.String(), tc.want)
			}
		})
	}
}

// A pod restarted in place is one everynode patched in the window, timed
// from its first patch, that kwok then wrote the status of twice.
func TestInPlaceWindowRestarts(t *testing.T) {
	from := time.Date(2026, 12, 2, 12, 1, 0, 0, time.UTC)
	at := func(ms int) time.Time { return from.Add(time.Duration(ms) * time.Millisecond) }
	ev := func(verb, ua, name, sub string, done int) auditEvent {
		return auditEvent{Verb: verb, UserAgent: ua, RequestReceivedTimestamp: at(done - 5), StageTimestamp: at(done),
			ObjectRef: &auditObjectRef{Resource: "pods", Subresource: sub, Namespace: "bench", Name: name}}
	}
	const everynode, kwok = "everynode/v0.0.0 (linux/amd64)", "kwok-controller/v0.8.0"
	patch := func(done int) auditEvent { return ev("patch", everynode, "a", "", done) }
	status := func(verb string, done int) auditEvent { return ev(verb, kwok, "a", "status", done) }
	tests := map[string]struct {
		events  []auditEvent
		patched int
		want    []restart
	}{
		"patched, stopped, running": {
			events:  []auditEvent{patch(500), status("patch", 1700), status("update", 2900)},
			patched: 1, want: []restart{{at(500), at(1700), at(2900)}},
		},
		"kwok's writes out of order": {
			events:  []auditEvent{patch(500), status("patch", 2900), status("patch", 1700)},
			patched: 1, want: []restart{{at(500), at(1700), at(2900)}},
		},
		"the first patch counts": {
			events:  []auditEvent{patch(500), patch(800), status("patch", 1700), status("patch", 2900)},
			patched: 1, want: []restart{{at(500), at(1700), at(2900)}},
		},
		"a status write before the patch": {
			events:  []auditEvent{status("patch", 200), patch(500), status("patch", 1700), status("patch", 2900)},
			patched: 1, want: []restart{{at(500), at(1700), at(2900)}},
		},
		"stopped, not running yet": {
			events:  []auditEvent{patch(500), status("patch", 1700)},
			patched: 1,
		},
		"the patch before the window": {
			events:  []auditEvent{patch(-1), status("patch", 1700), status("patch", 2900)},
			patched: 0,
		},
		"running after the window": {
			events:  []auditEvent{patch(500), status("patch", 1700), status("patch", 30001)},
			patched: 1,
		},
		"a status write not kwok's": {
			events:  []auditEvent{patch(500), ev("patch", everynode, "a", "status", 1700), status("patch", 2900)},
			patched: 1,
		},
		"a read of the pod": {
			events:  []auditEvent{ev("get", everynode, "a", "", 500), status("patch", 1700), status("patch", 2900)},
			patched: 0,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newInPlaceWrites(from, at(30000))
			for _, e := range tc.events {
				w.add(e)
			}
			got := w.window()
			if got.patched != tc.patched || !reflect.DeepEqual(got.restarts, tc.want) {
				t.Errorf("patched %d, restarts %v; want %d, %v", got.patched, got.restarts, tc.patched, tc.want)
			}
		})
	}
}
