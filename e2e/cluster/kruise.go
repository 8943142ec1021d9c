package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// OpenKruise's kruise-manager as a peer on the harness's cluster: the
// Advanced DaemonSet (apps.kruise.io/v1alpha1) beside everynode's and
// kube-controller-manager's, run on this host as everynode is, for the
// bench and the e2e check of its in-place update (e2e/kruise_test.go).
// `e2e/hack/tools.sh kruise` builds it (e2e/tools/kruise); its CRDs, its
// ClusterRole and its webhook entries are read from the same module at
// run time, never copied into the repo.

// KruiseNamespace is Kruise's own namespace (POD_NAMESPACE): its
// ServiceAccount lives there, and its webhook controller watches Secrets
// there.
const KruiseNamespace = "kruise-system"

// KruiseDaemonSets is the resource of Kruise's Advanced DaemonSet, for a
// dynamic client: the e2e module does not import Kruise's types (they
// pin Kubernetes v0.30).
var KruiseDaemonSets = schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1alpha1", Resource: "daemonsets"}

// kruiseGroups are the API groups of Kruise's own kinds. Only webhook
// entries whose rules stay inside them are registered: Kruise's manifest
// also has entries for pods, namespaces, Services, Ingresses, CRDs and
// apps/v1 workloads (deletion protection, the pod webhook), which would
// put kruise-manager in the path of everybody else's requests.
var kruiseGroups = []string{"apps.kruise.io", "policy.kruise.io"}

// KruiseOptions are what a caller may set of kruise-manager's run.
type KruiseOptions struct {
	// QPS and Burst are its client rate limit (--rest-config-qps,
	// --rest-config-burst). Zero: 50 and 100, everynode's defaults and
	// the bench profile's (Kruise's own are 30 and 50).
	QPS, Burst int
	// DaemonSetWorkers is --daemonset-workers; zero: Kruise's 3.
	DaemonSetWorkers int
	// Args are more flags, after the harness's (a later flag wins).
	Args []string
}

// KruiseOptions gives kruise-manager the profile's client rate limit, as
// EverynodeArgs gives everynode's and kube-controller-manager has it.
func (p BenchProfile) KruiseOptions() KruiseOptions {
	return KruiseOptions{QPS: p.QPS, Burst: p.Burst}
}

// Kruise is a running kruise-manager: its pid and where it listens on
// 127.0.0.1 (the webhook on every address: Kruise binds 0.0.0.0).
type Kruise struct {
	PID         int `json:"pid"`
	WebhookPort int `json:"webhookPort"`
	MetricsPort int `json:"metricsPort"`
	HealthPort  int `json:"healthPort"`
	PprofPort   int `json:"pprofPort"`
}

// MetricsURL is its Prometheus endpoint (controller-runtime's metrics).
func (k Kruise) MetricsURL() string { return fmt.Sprintf("http://127.0.0.1:%d/metrics", k.MetricsPort) }

func (c *Cluster) kruiseDir(name string) string { return filepath.Join(c.State, "kruise", name) }

// KruiseLog is kruise-manager's log.
func (c *Cluster) KruiseLog() string { return filepath.Join(c.Logs(), "kruise-manager.log") }

// KruiseModuleDir is the folder of Kruise's module in the module cache,
// downloaded if need be, at the version e2e/tools/kruise requires.
func (c *Cluster) KruiseModuleDir(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "github.com/openkruise/kruise")
	cmd.Dir = filepath.Join(c.Root, "e2e", "tools", "kruise")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download github.com/openkruise/kruise: %w\n%s", err, stderr.String())
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("go mod download github.com/openkruise/kruise: no Dir (%v %s)", err, mod.Error)
	}
	return mod.Dir, nil
}

// KruiseCRDs is the folder of Kruise's CRDs (18 files) in its module.
func (c *Cluster) KruiseCRDs(ctx context.Context) (string, error) {
	dir, err := c.KruiseModuleDir(ctx)
	return filepath.Join(dir, "config", "crd", "bases"), err
}

// StartKruise (re)starts kruise-manager against the cluster and waits
// until its DaemonSet controller runs. Before it starts: its CRDs, all
// of them (its field indexes and discovery expect every kind: each
// missing one costs ~15 s of retries at start); its ServiceAccount with
// its own ClusterRole (config/rbac/role.yaml), so its requests are its
// own in the audit log; a serving certificate for 127.0.0.1 from the
// harness's CA; and the two webhook configurations it insists on
// (it exits after 20 s without them), with Kruise's own entries only,
// by URL.
func (c *Cluster) StartKruise(ctx context.Context, o KruiseOptions) (Kruise, error) {
	if err := c.StopKruise(ctx); err != nil {
		return Kruise{}, err
	}
	if _, err := os.Stat(c.Tool("kruise-manager")); err != nil {
		return Kruise{}, fmt.Errorf("no kruise-manager in %s: build it with `e2e/hack/tools.sh kruise`", c.Bin())
	}
	mod, err := c.KruiseModuleDir(ctx)
	if err != nil {
		return Kruise{}, err
	}
	c.say("starting kruise-manager (log: %s)", c.KruiseLog())
	crds := filepath.Join(mod, "config", "crd", "bases")
	if err := c.run(ctx, true, c.Tool("kubectl"), "--kubeconfig", c.Kubeconfig(), "apply", "--server-side", "-f", crds); err != nil {
		return Kruise{}, err
	}
	if err := c.run(ctx, true, c.Tool("kubectl"), "--kubeconfig", c.Kubeconfig(), "wait", "--for=condition=Established", "--timeout=60s", "-f", crds); err != nil {
		return Kruise{}, err
	}
	if err := c.kruiseIdentity(ctx, filepath.Join(mod, "config", "rbac", "role.yaml")); err != nil {
		return Kruise{}, err
	}
	ports, err := freePorts(4)
	if err != nil {
		return Kruise{}, err
	}
	k := Kruise{WebhookPort: ports[0], MetricsPort: ports[1], HealthPort: ports[2], PprofPort: ports[3]}
	ca, err := c.kruiseCerts()
	if err != nil {
		return Kruise{}, err
	}
	if err := c.kruiseWebhooks(ctx, filepath.Join(mod, "config", "webhook", "manifests.yaml"), k.WebhookPort, ca); err != nil {
		return Kruise{}, err
	}
	if err := os.MkdirAll(c.kruiseDir("log"), 0o755); err != nil {
		return Kruise{}, err
	}
	env := append(os.Environ(),
		"POD_NAMESPACE="+KruiseNamespace,
		// A host makes Kruise write its certificates to WEBHOOK_CERT_DIR
		// (not to a Secret) and keep the webhooks' URLs.
		"WEBHOOK_HOST=127.0.0.1",
		"WEBHOOK_PORT="+strconv.Itoa(k.WebhookPort),
		"WEBHOOK_CERT_DIR="+c.kruiseDir("certs"),
		// Kruise replaces certificates that expire within 6 months
		// (CERTS_RENEW_BEFORE's default), with a CA of its own; the
		// harness's CA lives a year from the checkout's first run, so
		// only a few days' margin is asked for. Kruise reads "1d" as 7
		// hours (util.GetRenewBeforeTime), short either way.
		"CERTS_RENEW_BEFORE=1d")
	if err := os.WriteFile(c.KruiseLog(), nil, 0o644); err != nil {
		return Kruise{}, err
	}
	pid, err := startDetachedEnv(c.Root, c.KruiseLog(), c.kruiseArgs(o, k), env)
	if err != nil {
		return Kruise{}, err
	}
	k.PID = pid
	if err := writePID(c.kruiseDir("kruise-manager.pid"), pid); err != nil {
		return k, err
	}
	b, _ := json.Marshal(k)
	if err := os.WriteFile(c.kruiseDir("kruise.json"), b, 0o644); err != nil {
		return k, err
	}
	if err := c.waitKruise(ctx, k); err != nil {
		// Not left half up with its webhooks registered.
		return k, errors.Join(err, c.StopKruise(context.WithoutCancel(ctx)))
	}
	return k, nil
}

// kruiseArgs are kruise-manager's flags.
func (c *Cluster) kruiseArgs(o KruiseOptions, k Kruise) []string {
	qps, burst := o.QPS, o.Burst
	if qps == 0 {
		qps, burst = 50, 100
	}
	args := []string{c.Tool("kruise-manager"),
		"--kubeconfig", c.kruiseDir("kubeconfig"),
		// One replica: nothing to elect, and no Lease writes in the
		// audit log.
		"--enable-leader-election=false",
		// PodWebhook off: Kruise's pod webhook would see every pod
		// created in the cluster, everynode's and upstream's included;
		// with it off Kruise also turns off the gates that depend on it
		// (WorkloadSpread, PodUnavailableBudgetDeleteGate, ...).
		// KruiseDaemon off: there is no kruise-daemon on kwok nodes, and
		// the NodeImage controller would make an object per node; off,
		// Kruise turns off what needs the daemon (image pre-download,
		// InPlaceUpdateEnvFromMetadata, PodProbeMarkerGate, ...).
		"--feature-gates=PodWebhook=false,KruiseDaemon=false",
		fmt.Sprintf("--metrics-addr=127.0.0.1:%d", k.MetricsPort),
		fmt.Sprintf("--health-probe-addr=127.0.0.1:%d", k.HealthPort),
		fmt.Sprintf("--pprof-addr=127.0.0.1:%d", k.PprofPort),
		// Deletion-protection decisions are logged there; its default,
		// /log, is not writable by everyone.
		"--protection-log-path=" + c.kruiseDir("log"),
		fmt.Sprintf("--rest-config-qps=%d", qps), fmt.Sprintf("--rest-config-burst=%d", burst)}
	if o.DaemonSetWorkers > 0 {
		args = append(args, fmt.Sprintf("--daemonset-workers=%d", o.DaemonSetWorkers))
	}
	return append(args, o.Args...)
}

// waitKruise waits for kruise-manager's /readyz (its webhook controller
// has written the certificates and configurations and its webhook
// serves), then for its DaemonSet controller's workers: Kruise starts
// its controllers only after its own webhook answers, a few seconds
// after /readyz.
func (c *Cluster) waitKruise(ctx context.Context, k Kruise) error {
	probe := &http.Client{Timeout: 5 * time.Second}
	get := func(ctx context.Context, url string) (string, bool) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := probe.Do(req)
		if err != nil {
			return "", false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), resp.StatusCode == http.StatusOK
	}
	fmt.Fprint(c.Log, "waiting for kruise-manager's DaemonSet controller")
	// controller-runtime sets this gauge once a controller's caches have
	// synced and its workers start.
	const started = `controller_runtime_max_concurrent_reconciles{controller="daemonset-controller"}`
	err := c.poll(ctx, "kruise-manager's DaemonSet controller", time.Second, 2*time.Minute, func(ctx context.Context) (bool, error) {
		if !alive(k.PID) {
			return false, errors.New("kruise-manager exited")
		}
		if _, ok := get(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", k.HealthPort)); !ok {
			return false, nil
		}
		metrics, ok := get(ctx, k.MetricsURL())
		return ok && strings.Contains(metrics, started), nil
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, tail(c.KruiseLog(), 20))
	}
	fmt.Fprintln(c.Log, " running")
	return nil
}

// StopKruise stops kruise-manager and deletes its webhook
// configurations, whose failurePolicy Fail would otherwise refuse every
// write to Kruise's kinds while it is down. Not running is not an error.
func (c *Cluster) StopKruise(ctx context.Context) error {
	if err := stopPIDFile(c.kruiseDir("kruise-manager.pid")); err != nil {
		return err
	}
	_ = os.Remove(c.kruiseDir("kruise.json"))
	kube, err := c.Client()
	if err != nil {
		return err
	}
	adm := kube.AdmissionregistrationV1()
	errs := []error{
		adm.MutatingWebhookConfigurations().Delete(ctx, kruiseMutating, metav1.DeleteOptions{}),
		adm.ValidatingWebhookConfigurations().Delete(ctx, kruiseValidating, metav1.DeleteOptions{}),
	}
	for i, err := range errs {
		if apierrors.IsNotFound(err) {
			errs[i] = nil
		}
	}
	return errors.Join(errs...)
}

// RunningKruise is the kruise-manager StartKruise started, if it runs.
func (c *Cluster) RunningKruise() (Kruise, bool) {
	var k Kruise
	b, err := os.ReadFile(c.kruiseDir("kruise.json"))
	if err != nil || json.Unmarshal(b, &k) != nil || !alive(k.PID) {
		return Kruise{}, false
	}
	return k, true
}
