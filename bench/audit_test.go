package main

import (
	"os"
	"path/filepath"
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
