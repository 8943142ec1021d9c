package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStartProfiles(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/ok/debug/pprof/profile" && r.URL.Query().Get("seconds") == "2":
			_, _ = w.Write([]byte("profile of " + r.URL.Path))
		default:
			http.Error(w, "forbidden", http.StatusForbidden)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	targets := []profileTarget{
		httpProfile("good", srv.Client(), srv.URL+"/ok"),
		httpProfile("refused", srv.Client(), srv.URL+"/no"),
	}
	errs := startProfiles(t.Context(), targets, dir, "everynode-r1-w2", 2).wait()

	got, err := os.ReadFile(filepath.Join(dir, "everynode-r1-w2-good.pprof"))
	if err != nil || string(got) != "profile of /ok/debug/pprof/profile" {
		t.Errorf("good profile = %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "everynode-r1-w2-refused.pprof")); !os.IsNotExist(err) {
		t.Errorf("a refused profile was written (stat: %v)", err)
	}
	if len(errs) != 1 || !strings.HasPrefix(errs[0], "refused: ") || !strings.Contains(errs[0], "403") {
		t.Errorf("errors = %q, want the refused target's 403", errs)
	}
}
