package e2e

import (
	"bufio"
	"cmp"
	"crypto/tls"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	versioned "everynode.io/everynode/client/clientset/versioned"

	"everynode.io/e2e/cluster"
)

// A self-signed CA rotation under load (issue 30) fails no request. The
// harness runs everynode in self-signed mode and restarts kube-scheduler
// to read its extender caFile from the CA Secret's bundle, once, as
// kube-scheduler does. Then, while a load loop sends admission requests
// through kube-apiserver (server-side dry-run creates of sets: the
// mutating and the validating webhook, both failurePolicy Fail, so a
// failed call is a failed request) and the scheduler places replaced daemon pods
// through the extender, a rotation is asked for on the Secret. everynode
// promotes the CA it published a rotation ago and serves a certificate of
// it at once; kube-apiserver and kube-scheduler trust it already. Counted:
// requests and failures of the load loop, and kube-scheduler's "Skipping
// extender" lines (an ignorable extender that fails is skipped quietly).
func TestCARotationUnderLoad(t *testing.T) {
	step(t, harness.SetCertMode(bg, cluster.CertSelfSigned))
	t.Cleanup(func() { step(t, harness.SetCertMode(bg, cluster.CertExternalCA)) })
	waitForCAInBundles(t, releaseName+"-ca", "everynode to write its CA bundle into both configurations")

	ns := newNamespace(t)
	sel := map[string]string{scenarioLabel: "rotate-" + randSuffix()}
	createNodes(t, "rotate", 3, sel)
	load := newClient(t)

	before, err := scrape(t)
	if err != nil {
		t.Fatal(err)
	}
	schedulerLog := filepath.Join(harness.KwokDir(), "logs", "kube-scheduler.log")
	schedulerLogFrom := fileSize(t, schedulerLog)
	servedBefore := servedIssuer(t)

	// The admission load: server-side dry runs, nothing stored. One in four
	// a create, whose validation dry-runs the template as a pod (an API
	// call of everynode's, held to its --kube-api-qps); the others label
	// edits of a stored set (patches: the controller's status writes move
	// its resourceVersion), which skip that.
	stored := createSet(t, simpleSet(ns, "stored", sel))
	var sent, failed atomic.Int64
	var firstErrs sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			ds := simpleSet(ns, "", sel)
			ds.GenerateName = fmt.Sprintf("load-%d-", w)
			dryRun := []string{metav1.DryRunAll}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				if i%4 == 0 {
					_, err = load.EverynodeV1alpha1().DaemonSets(ns).Create(ctx(t), ds, metav1.CreateOptions{DryRun: dryRun})
				} else {
					_, err = load.EverynodeV1alpha1().DaemonSets(ns).Patch(ctx(t), stored.Name, types.MergePatchType,
						[]byte(`{"metadata":{"labels":{"load":"`+strconv.Itoa(i)+`"}}}`), metav1.PatchOptions{DryRun: dryRun})
				}
				sent.Add(1)
				if err != nil {
					failed.Add(1)
					firstErrs.LoadOrStore(err.Error(), true)
				}
			}
		})
	}
	// The scheduler load: daemon pods, two a second, each filtered through
	// the extender (kube-scheduler calls it for daemon pods only: they
	// carry the marker). A pod of the stored set is deleted, and the
	// controller makes its replacement.
	eventually(t, settle, "the stored set on its 3 nodes", func() (bool, string, error) {
		n := len(daemonPods(t, ns, "stored"))
		return n == 3, fmt.Sprintf("%d pods", n), nil
	})
	var podsMade atomic.Int64
	wg.Go(func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			pods := daemonPods(t, ns, "stored")
			if len(pods) == 0 {
				continue
			}
			p := pods[i%len(pods)]
			if err := kube.CoreV1().Pods(ns).Delete(ctx(t), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err == nil {
				podsMade.Add(1)
			}
		}
	})

	start := time.Now()
	time.Sleep(5 * time.Second)
	asked := time.Now()
	if _, err := kube.CoreV1().Secrets(releaseNamespace).Patch(ctx(t), releaseName+"-ca", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+rotateAnnotation+`":"e2e"}}}`), metav1.PatchOptions{}); err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	var servedAfter string
	eventually(t, settle, "everynode serving a certificate of a new CA", func() (bool, string, error) {
		servedAfter = servedIssuer(t)
		return servedAfter != servedBefore, "issuer " + servedAfter, nil
	})
	switched := time.Now()
	time.Sleep(10 * time.Second)
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)

	after, err := scrape(t)
	if err != nil {
		t.Fatal(err)
	}
	admission := 0.0
	for _, route := range []string{"/mutate/daemonset", "/validate/daemonset"} {
		admission += counterDelta(before, after, "everynode_http_request_duration_seconds_count", with(map[string]string{"route": route}))
	}
	// The callers shook hands again after the switch (everynode asks them
	// to, server/reconnect.go): otherwise their kept-alive connections
	// would not show whether they trust the new certificate.
	const reconnects = "everynode_https_reconnects_requested_total"
	apiserverReconnects := counterDelta(before, after, reconnects, with(map[string]string{"route": "/mutate/daemonset"})) +
		counterDelta(before, after, reconnects, with(map[string]string{"route": "/validate/daemonset"}))
	schedulerReconnects := counterDelta(before, after, reconnects, labelPrefix("route", "/extender/"))
	skipped := linesWith(t, schedulerLog, schedulerLogFrom, "Skipping extender")
	filters := counterDelta(before, after, "everynode_http_request_duration_seconds_count", with(map[string]string{"route": "/extender/filter"}))

	t.Logf("CA rotation under load: %d dry-run writes in %.1fs, %d failed; everynode answered %.0f admission requests (%.0f/s); "+
		"rotation asked %.1fs in, new certificate served %.1fs after; connections asked to reconnect: %.0f kube-apiserver's, %.0f kube-scheduler's; %d daemon pods replaced through %.0f extender filter calls, %d skipped",
		sent.Load(), elapsed.Seconds(), failed.Load(), admission, admission/elapsed.Seconds(),
		asked.Sub(start).Seconds(), switched.Sub(asked).Seconds(), apiserverReconnects, schedulerReconnects, podsMade.Load(), filters, len(skipped))
	for _, route := range []string{"/mutate/daemonset", "/validate/daemonset", "/extender/filter"} {
		t.Logf("  %s p99 %s", route, histogramQuantile(before, after, "everynode_http_request_duration_seconds", with(map[string]string{"route": route}), 0.99))
	}
	t.Logf("  served issuer %s, then %s", servedBefore, servedAfter)

	if n := failed.Load(); n > 0 {
		var msgs []string
		firstErrs.Range(func(k, _ any) bool { msgs = append(msgs, k.(string)); return len(msgs) < 3 })
		t.Errorf("%d of %d admission requests failed across the rotation; e.g. %s", n, sent.Load(), strings.Join(msgs, " | "))
	}
	if len(skipped) > 0 {
		t.Errorf("kube-scheduler skipped the extender %d times across the rotation; first: %s", len(skipped), skipped[0])
	}
	if apiserverReconnects == 0 || schedulerReconnects == 0 {
		t.Errorf("kube-apiserver (%.0f) or kube-scheduler (%.0f) was never asked to reconnect: the scenario shows nothing about its trust in the new certificate", apiserverReconnects, schedulerReconnects)
	}
	if filters == 0 {
		t.Errorf("the scheduler never called the extender: the scenario shows nothing about it")
	}
	// A precondition, not a performance figure: a rotation under a lighter
	// load than issue 30 asks for proves less than the scenario claims.
	if rate := admission / elapsed.Seconds(); rate < 200 {
		t.Errorf("the admission load reached %.0f requests/s, below the 200/s the scenario is for", rate)
	}
}

// rotateAnnotation is certs.RotateAnnotation (not imported: it would pull
// cert-manager into this module).
const rotateAnnotation = "everynode.io/rotate-ca"

// newClient is a client of its own, unthrottled, for load.
func newClient(t *testing.T) versioned.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	return versioned.NewForConfigOrDie(cfg)
}

// servedIssuer is the issuer's name of the certificate everynode serves.
func servedIssuer(t *testing.T) string {
	t.Helper()
	addr := "localhost:" + cmp.Or(os.Getenv("EVERYNODE_PORT"), "18443")
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the certificate, trusts nothing
	if err != nil {
		t.Fatalf("dial everynode: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Issuer.CommonName
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// linesWith returns the lines of path after offset from that contain s.
func linesWith(t *testing.T, path string, offset int64, s string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// histogramQuantile is PromQL's histogram_quantile over the increase of
// a histogram between two scrapes, as a text with the bucket it fell in.
func histogramQuantile(before, after metrics, name string, sel selector, q float64) string {
	b := before.buckets(name, sel)
	type bucket struct{ le, n float64 }
	var buckets []bucket
	for le, n := range after.buckets(name, sel) {
		buckets = append(buckets, bucket{le, n - b[le]})
	}
	slices.SortFunc(buckets, func(x, y bucket) int { return cmp.Compare(x.le, y.le) })
	if len(buckets) == 0 || buckets[len(buckets)-1].n == 0 {
		return "(no requests)"
	}
	total := buckets[len(buckets)-1].n
	rank := q * total
	prevLE, prevN := 0.0, 0.0
	for _, bk := range buckets {
		if bk.n >= rank {
			if math.IsInf(bk.le, 1) {
				return fmt.Sprintf("> %gs (%.0f requests)", prevLE, total)
			}
			// Linear inside the bucket, as histogram_quantile.
			v := prevLE + (bk.le-prevLE)*(rank-prevN)/math.Max(bk.n-prevN, 1)
			return fmt.Sprintf("%.1f ms (bucket <= %g s, %.0f requests)", v*1000, bk.le, total)
		}
		prevLE, prevN = bk.le, bk.n
	}
	return "?"
}
