package soak

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"everynode.io/e2e/cluster"
)

// The faults, carried out on the harness's processes: everynode's two
// replicas (kill -9, SIGSTOP), kube-apiserver, etcd and kube-scheduler
// (restarts), everynode's CA (a rotation), its in-flight cap (a burst),
// and a set's revision (one that crash-loops).

// rotateAnnotation is certs.RotateAnnotation (not imported: it would pull
// cert-manager into this module).
const rotateAnnotation = "everynode.io/rotate-ca"

// fault carries out one fault and records how it went.
func (r *runner) fault(ctx context.Context, e Event) {
	rec := FaultRecord{Event: e, Start: time.Now()}
	r.rec.act(ActObs{Kind: ActFault, Name: string(e.Kind)})
	var err error
	switch e.Kind {
	case FaultLeaderKill, FaultFollowerKill:
		err = r.killReplica(ctx, e, &rec)
	case FaultLeaderStop, FaultFollowerStop:
		err = r.stopReplica(ctx, e, &rec)
	case FaultAPIServerRestart:
		rec.Target = "kube-apiserver"
		err = r.c.RestartAPIServer(ctx, e.For)
	case FaultEtcdRestart:
		rec.Target = "etcd"
		err = r.c.RestartEtcd(ctx, e.For)
	case FaultSchedulerRestart:
		rec.Target = "kube-scheduler"
		err = r.restartScheduler(ctx)
	case FaultCARotation:
		err = r.rotateCA(ctx, e, &rec)
	case FaultInFlightBurst:
		err = r.burst(ctx, e, &rec)
	case FaultCrashLoopRevision:
		spec := Catalog()[e.Set]
		rec.Target = "set " + spec.Name
		r.setLocks[e.Set].Lock()
		err = r.changeTemplate(ctx, spec, false, "crash-loop-"+strconv.Itoa(r.nextRev(spec.Name)))
		if err == nil {
			sleep(ctx, e.For)
			err = r.changeTemplate(ctx, spec, false, "")
		}
		r.setLocks[e.Set].Unlock()
	}
	if err != nil {
		rec.Err = err.Error()
	}
	rec.End = time.Now()
	r.rec.act(ActObs{Kind: ActFaultEnd, Name: string(e.Kind)})
	r.logf("%s %s: %s%s", fmtOffset(rec.Start.Sub(r.start)), e.Kind, rec.Target,
		map[bool]string{true: " (" + rec.Skipped + rec.Err + ")", false: ""}[rec.Skipped+rec.Err != ""])
	r.mu.Lock()
	r.faults = append(r.faults, rec)
	r.mu.Unlock()
}

// leaseHolderPID is the pid in the leader Lease's holder identity
// ("<hostname>_<pid>", cmd/everynode/leader.go), 0 when none holds it.
func (r *runner) leaseHolderPID(ctx context.Context) int {
	lease, err := r.kube.CoordinationV1().Leases(r.c.Namespace).Get(ctx, r.c.Release, metav1.GetOptions{})
	if err != nil {
		return 0
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	i := strings.LastIndex(holder, "_")
	pid, err := strconv.Atoi(holder[i+1:])
	if i < 0 || err != nil {
		return 0
	}
	return pid
}

func running(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// pickReplica is the replica that leads (leader) or the one that runs and
// does not; why says why there is none.
func (r *runner) pickReplica(ctx context.Context, leader bool) (n, pid int, why string) {
	holder := r.leaseHolderPID(ctx)
	for n := range 2 {
		pid, _ := r.c.PID(n)
		if !running(pid) {
			continue
		}
		if (pid == holder) == leader {
			return n, pid, ""
		}
	}
	if leader {
		return 0, 0, fmt.Sprintf("no running replica holds the Lease (holder pid %d)", holder)
	}
	return 0, 0, "no running replica without the Lease"
}

// holdReplica picks the fault's replica (the leader or a follower) and
// locks it against other faults; ok is false, with rec.Skipped saying
// why, when there is none to take. release unlocks it.
func (r *runner) holdReplica(ctx context.Context, leader bool, rec *FaultRecord) (n, pid int, release func(), ok bool) {
	n, pid, why := r.pickReplica(ctx, leader)
	if why != "" {
		rec.Skipped = why
		return 0, 0, nil, false
	}
	if !r.replicaLocks[n].TryLock() {
		rec.Skipped = fmt.Sprintf("replica %d is under another fault", n)
		return 0, 0, nil, false
	}
	rec.Target = fmt.Sprintf("replica %d (pid %d)", n, pid)
	return n, pid, r.replicaLocks[n].Unlock, true
}

func (r *runner) killReplica(ctx context.Context, e Event, rec *FaultRecord) error {
	n, pid, release, ok := r.holdReplica(ctx, e.Kind == FaultLeaderKill, rec)
	if !ok {
		return nil
	}
	defer release()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 %d: %w", pid, err)
	}
	sleep(ctx, e.For)
	return r.restartReplica(context.WithoutCancel(ctx), n)
}

// restartReplica starts replica n again, keeping the log the harness
// would truncate, retrying while the API is away (its token comes from
// the TokenRequest API) for up to five minutes.
func (r *runner) restartReplica(ctx context.Context, n int) error {
	if n > 0 {
		r.mu.Lock()
		r.logSeq++
		keep := filepath.Join(r.dir, fmt.Sprintf("everynode-%d.%03d.log", n, r.logSeq))
		r.mu.Unlock()
		if b, err := os.ReadFile(r.c.ReplicaLog(n)); err == nil {
			_ = os.WriteFile(keep, b, 0o644)
		}
	}
	return retry(ctx, 5*time.Minute, func(ctx context.Context) error {
		if n == 0 {
			return r.c.StartEverynode(ctx)
		}
		return r.c.StartReplica(ctx, n)
	})
}

func (r *runner) stopReplica(ctx context.Context, e Event, rec *FaultRecord) error {
	_, pid, release, ok := r.holdReplica(ctx, e.Kind == FaultLeaderStop, rec)
	if !ok {
		return nil
	}
	defer release()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP %d: %w", pid, err)
	}
	sleep(ctx, e.For)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("SIGCONT %d: %w", pid, err)
	}
	return nil
}

func (r *runner) restartScheduler(ctx context.Context) error {
	return retry(ctx, 3*time.Minute, func(ctx context.Context) error { return r.c.RestartScheduler(ctx, cluster.WithExtender) })
}

// servedIssuer is the issuer of the certificate replica 0 serves, "" if
// it does not answer.
func (r *runner) servedIssuer() string {
	d := &tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // reads the certificate, trusts nothing
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", "localhost:"+strconv.Itoa(r.c.Port))
	if err != nil {
		return ""
	}
	defer conn.Close()
	certs := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return ""
	}
	return certs[0].Issuer.CommonName
}

// rotateCA asks everynode to rotate its self-signed CA, waits up to For
// for replica 0 to serve a certificate of the new one, and then restarts
// kube-scheduler, which reads its extender CA file once: without it, the
// next rotation would promote a CA it never read.
func (r *runner) rotateCA(ctx context.Context, e Event, rec *FaultRecord) error {
	before := r.servedIssuer()
	deadline := time.Now().Add(e.For)
	patch := []byte(`{"metadata":{"annotations":{"` + rotateAnnotation + `":"soak-` + strconv.FormatInt(time.Now().UnixNano(), 10) + `"}}}`)
	if err := retry(ctx, time.Minute, func(ctx context.Context) error {
		_, err := r.kube.CoreV1().Secrets(r.c.Namespace).Patch(ctx, r.c.Release+"-ca", types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("ask for the rotation: %w", err)
	}
	after := before
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if i := r.servedIssuer(); i != "" && i != before {
			after = i
			break
		}
		sleep(ctx, time.Second)
	}
	rec.Target = fmt.Sprintf("issuer %q to %q", before, after)
	sleep(ctx, time.Until(deadline))
	if err := r.restartScheduler(ctx); err != nil {
		return err
	}
	if after == before {
		return fmt.Errorf("replica 0 still served a certificate of %q after %s", before, e.For)
	}
	return nil
}

// scrape reads replica n's /metrics.
func (r *runner) scrape(ctx context.Context, n int) (string, error) {
	return r.health(ctx, n, "/metrics")
}

// health GETs path from replica n's health address.
func (r *runner) health(ctx context.Context, n int, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", r.c.HealthPort+n, path), nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(b), err
}

// refusedTotal is everynode_http_requests_refused_total over both
// replicas (a replica that does not answer counts 0).
func (r *runner) refusedTotal(ctx context.Context) float64 {
	var sum float64
	for n := range 2 {
		if text, err := r.scrape(ctx, n); err == nil {
			sum += SumCounter(text, "everynode_http_requests_refused_total")
		}
	}
	return sum
}

// burst sends e.N callers' server-side dry-run creates of sets at once
// for e.For, through kube-apiserver and so through everynode's set
// webhooks, past its --max-in-flight. Refusals are expected (the
// webhooks fail closed); what must not happen is anything else breaking,
// which the invariants watch.
func (r *runner) burst(ctx context.Context, e Event, rec *FaultRecord) error {
	before := r.refusedTotal(ctx)
	var sent, capped, other atomic.Int64
	deadline := time.Now().Add(e.For)
	var wg sync.WaitGroup
	spec := Catalog()[1]
	for w := range e.N {
		wg.Go(func() {
			ds := spec.Everynode(SetNamespace, spec.Template("v1", 1))
			ds.Name, ds.GenerateName = "", fmt.Sprintf("burst-%d-", w)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				_, err := r.enBurst.EverynodeV1alpha1().DaemonSets(SetNamespace).Create(ctx, ds, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				sent.Add(1)
				switch {
				case err == nil:
				case errClass(err) == "everynode in-flight cap (429)":
					capped.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	refused := r.refusedTotal(ctx) - before
	rec.Target = fmt.Sprintf("%d callers: %d requests, %d refused by everynode's cap (429) as callers saw it, %.0f by its metric, %d other failures",
		e.N, sent.Load(), capped.Load(), refused, other.Load())
	r.admit("burst requests", int(sent.Load()))
	r.admit("burst requests refused by everynode's in-flight cap", int(capped.Load()))
	r.admit("burst requests failed otherwise", int(other.Load()))
	if refused <= 0 && capped.Load() == 0 {
		// Not everynode's failure but the soak's: the burst proved nothing.
		return fmt.Errorf("the burst never passed the in-flight cap of %d", InFlightCap)
	}
	return nil
}
