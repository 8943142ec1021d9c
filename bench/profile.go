package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// profiles takes CPU profiles of the cluster's processes over one join wave
// (--profile-joins), so where each system's wave spends the machine's CPU
// can be compared function by function (bench/README.md says how). It is a
// diagnostic: the profiler's sampling and the serving of each profile cost
// the processes a little CPU, the same in both systems' waves, and the
// run's figures say it was on.
type profiles struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []string
}

// profileTarget is one process's /debug/pprof/profile and the client that
// may read it.
type profileTarget struct {
	name string
	get  func(ctx context.Context, seconds int) ([]byte, error)
}

// profileTargets lists what --profile-joins profiles: kube-apiserver (through
// the admin client), kube-scheduler (its secure port, the admin certificate),
// everynode (next to its /metrics), and any --profile-url.
func (m *meters) profileTargets() []profileTarget {
	t := []profileTarget{{"kube-apiserver", func(ctx context.Context, s int) ([]byte, error) {
		return m.cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", fmt.Sprint(s)).Timeout(0).DoRaw(ctx)
	}}}
	if u, ok := strings.CutSuffix(m.c.everynodeMetrics, "/metrics"); ok {
		t = append(t, httpProfile("everynode", m.plain, u))
	}
	if u, ok := strings.CutSuffix(m.c.schedulerMetrics, "/metrics"); ok && m.sched != nil {
		t = append(t, httpProfile("kube-scheduler", m.sched, u))
	}
	for _, nu := range m.c.profileURLs {
		name, u, _ := strings.Cut(nu, "=")
		t = append(t, httpProfile(name, m.plain, u))
	}
	return t
}

// httpProfile reads base/debug/pprof/profile with client c (whose timeout,
// 30 s, bounds a profile of a few seconds well).
func httpProfile(name string, c *http.Client, base string) profileTarget {
	return profileTarget{name, func(ctx context.Context, s int) ([]byte, error) {
		return fetch(ctx, c, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, s))
	}}
}

// startProfiles asks every target for a profile of the next `seconds`
// seconds, each written to dir/<prefix>-<process>.pprof once it comes.
func startProfiles(ctx context.Context, targets []profileTarget, dir, prefix string, seconds int) *profiles {
	p := &profiles{}
	for _, t := range targets {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			b, err := t.get(ctx, seconds)
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, prefix+"-"+t.name+".pprof"), b, 0o644)
			}
			if err != nil {
				p.mu.Lock()
				p.errs = append(p.errs, fmt.Sprintf("%s: %v", t.name, err))
				p.mu.Unlock()
			}
		}()
	}
	return p
}

// wait returns once every profile has been written or has failed, with the
// failures (a profile missing from a wave is reported, not fatal).
func (p *profiles) wait() []string {
	p.wg.Wait()
	return p.errs
}
