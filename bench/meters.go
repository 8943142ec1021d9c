package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"time"

	"k8s.io/client-go/kubernetes"
)

// meters reads the /metrics pages and processes the benchmark compares.
type meters struct {
	c     config
	cs    kubernetes.Interface
	plain *http.Client
	sched *http.Client
}

func newMeters(c config, cs kubernetes.Interface) (*meters, error) {
	m := &meters{c: c, cs: cs, plain: &http.Client{Timeout: 30 * time.Second}}
	if c.schedulerMetrics != "" {
		cert, err := tls.LoadX509KeyPair(c.clientCert, c.clientKey)
		if err != nil {
			return nil, fmt.Errorf("loading client cert for kube-scheduler metrics: %w", err)
		}
		// kube-scheduler serves a self-signed certificate on loopback.
		m.sched = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}}} //nolint:gosec // loopback, self-signed
	}
	return m, nil
}

// check fails early when a meter is unreachable rather than after an hour.
func (m *meters) check(ctx context.Context) error {
	if _, err := m.apiserver(ctx); err != nil {
		return err
	}
	if _, err := m.everynode(ctx); err != nil {
		return err
	}
	for _, f := range []string{m.c.kcmPIDFile, m.c.everynodePIDFile} {
		pid, err := readPID(f)
		if err != nil {
			return err
		}
		if _, err := cpuSeconds(pid); err != nil {
			return fmt.Errorf("reading /proc of pid %d (%s): %w", pid, f, err)
		}
	}
	if m.c.auditLog == "" {
		logf("warning: no --audit-log: API requests per client will be missing")
	}
	return nil
}

func (m *meters) apiserver(ctx context.Context) (scrape, error) {
	b, err := m.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	s, err := parseMetrics(b)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	return s, nil
}

// watchersClosed reads kube-apiserver's apiserver_terminated_watchers_total
// by resource: the watches its watch cache ended because their client did
// not take events as fast as they came (the cacher waits at most 100 ms,
// refilled at 50 ms a second, for a full watcher before it closes it). A
// watch closed so is replayed by the client's reflector from a new list, so
// a phase in which kwok's pod watch was closed ran at kwok's pace. Nil on
// error: the figure is then left out, not the run.
func (m *meters) watchersClosed(ctx context.Context) map[string]float64 {
	s, err := m.apiserver(ctx)
	if err != nil {
		logf("warning: %v", err)
		return nil
	}
	return watchersClosedIn(s)
}

// watchersClosedIn is watchersClosed from a scrape already made; nil if
// there is none.
func watchersClosedIn(s scrape) map[string]float64 {
	if s == nil {
		return nil
	}
	return s.sumBy(terminatedWatchers, nil, "resource")
}

const terminatedWatchers = "apiserver_terminated_watchers_total"

func (m *meters) everynode(ctx context.Context) (scrape, error) {
	return get(ctx, m.plain, m.c.everynodeMetrics)
}

// scheduler returns nil (not an error) when kube-scheduler's metrics are not
// configured or not reachable: that figure is then left blank.
func (m *meters) scheduler(ctx context.Context) scrape {
	if m.sched == nil {
		return nil
	}
	s, err := get(ctx, m.sched, m.c.schedulerMetrics)
	if err != nil {
		logf("warning: %v", err)
		return nil
	}
	return s
}

// get reads a /metrics page.
func get(ctx context.Context, c *http.Client, url string) (scrape, error) {
	b, err := fetch(ctx, c, url)
	if err != nil {
		return nil, err
	}
	s, err := parseMetrics(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return s, nil
}

// fetch GETs url with c and returns the body of a 200 answer; any other
// status is an error that quotes the start of the body.
func fetch(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: status %d: %w", url, resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, b)
	}
	return b, nil
}

// snapshot is every meter at one instant.
type snapshot struct {
	at                          time.Time
	apiserver, everynode, sched scrape
	auditOffset                 int64
}

func (m *meters) snapshot(ctx context.Context) snapshot {
	s := snapshot{at: time.Now(), auditOffset: auditOffset(m.c.auditLog)}
	var err error
	if s.apiserver, err = m.apiserver(ctx); err != nil {
		logf("warning: %v", err)
	}
	if s.everynode, err = m.everynode(ctx); err != nil {
		logf("warning: %v", err)
	}
	s.sched = m.scheduler(ctx)
	return s
}

// rssSampler polls a process's VmRSS until stopped and keeps the peak: VmHWM
// would be the peak since the process started, i.e. over all earlier runs.
type rssSampler struct {
	stop chan struct{}
	done chan float64
}

func sampleRSS(pid int) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan float64, 1)}
	go func() {
		var peak float64
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			if rss, _, err := memBytes(pid); err == nil && rss > peak {
				peak = rss
			}
			select {
			case <-s.stop:
				s.done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) peak() float64 {
	close(s.stop)
	return <-s.done
}
