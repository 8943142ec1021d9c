package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/placement"
)

// Certificate modes of the HTTPS server.
const (
	certModeFile       = "file"
	certModeSelfSigned = "self-signed"
)

// serveOptions are the flags of `everynode serve`.
type serveOptions struct {
	kubeconfig   string
	kubeAPIQPS   float32
	kubeAPIBurst int

	secureAddr string
	healthAddr string
	profiling  bool
	http2      bool
	// maxInFlight caps the requests each HTTPS route serves at once.
	maxInFlight int
	// clientCAFile, when set, is the CA bundle client certificates must
	// chain to on the HTTPS port.
	clientCAFile string
	// startupTaint, when set, is the key of the NoSchedule taint new
	// nodes register with and the controller removes (controller/startup.go).
	startupTaint string
	// daemonResource is the extended resource daemon pods request as a
	// marker (placement.SetDaemonResource); empty: no marker.
	daemonResource string

	shutdownDelay        time.Duration
	shutdownDrainTimeout time.Duration

	certMode              string
	tlsCertFile           string
	tlsKeyFile            string
	caSecretName          string
	tlsDNSNames           []string
	webhookConfigurations []string

	namespace          string
	leaderElect        bool
	leaderElectionID   string
	leaseDuration      time.Duration
	renewDeadline      time.Duration
	retryPeriod        time.Duration
	controllerWorkers  int
	controllerUsername string
	schedulerName      string
	// webhookSkippedNamespaces is nil unless the flag is given; read it
	// through skippedNamespaces.
	webhookSkippedNamespaces []string

	takeover             bool
	takeoverProbeTimeout time.Duration
	takeoverRetry        time.Duration
	takeoverLockPolicy   string
}

func defaultServeOptions() *serveOptions {
	return &serveOptions{
		kubeAPIQPS:        50,
		kubeAPIBurst:      100,
		secureAddr:        ":8443",
		healthAddr:        ":8080",
		http2:             true,
		maxInFlight:       256,
		certMode:          certModeFile,
		namespace:         os.Getenv("POD_NAMESPACE"),
		leaderElect:       true,
		leaderElectionID:  "everynode",
		leaseDuration:     15 * time.Second,
		renewDeadline:     10 * time.Second,
		retryPeriod:       2 * time.Second,
		controllerWorkers: 4,
		daemonResource:    everynodev1alpha1.DefaultDaemonResource,

		takeoverProbeTimeout: 10 * time.Second,
		takeoverRetry:        30 * time.Second,
		takeoverLockPolicy:   "everynode-takeover-lock",

		// The delay covers the endpoints controller and kube-proxy
		// catching up with a terminating pod (a few seconds in a healthy
		// cluster); the drain covers the slowest call in flight, a webhook
		// (5-10 s timeouts) or extender call (5 s), with margin.
		shutdownDelay:        5 * time.Second,
		shutdownDrainTimeout: 20 * time.Second,
	}
}

func (o *serveOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "Path to a kubeconfig. Empty: $KUBECONFIG, then the in-cluster service account.")
	fs.Float32Var(&o.kubeAPIQPS, "kube-api-qps", o.kubeAPIQPS, "Queries per second to the API server, sustained (client-side rate limit). The controller spends it on pods first: Normal events and status writes that only move counts use what pod work leaves.")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", o.kubeAPIBurst, "Queries to the API server allowed in a burst above --kube-api-qps.")

	fs.StringVar(&o.secureAddr, "secure-addr", o.secureAddr, "HTTPS listen address of the webhook and extender routes.")
	fs.StringVar(&o.healthAddr, "health-addr", o.healthAddr, "Plain-HTTP listen address of /healthz, /readyz and /metrics.")
	fs.BoolVar(&o.profiling, "profiling", o.profiling, "Serve /debug/pprof on the health address.")
	fs.DurationVar(&o.shutdownDelay, "shutdown-delay", o.shutdownDelay, "On SIGTERM, how long to keep serving the webhooks and the extender with /readyz failing, before the listeners close: the time endpoints and kube-proxy take to stop routing to this replica. 0: close at once.")
	fs.DurationVar(&o.shutdownDrainTimeout, "shutdown-drain-timeout", o.shutdownDrainTimeout, "After --shutdown-delay, how long requests already in flight may take to finish before they are cut. 0: cut them at once.")
	fs.StringVar(&o.startupTaint, "startup-taint", o.startupTaint, "Key of a NoSchedule taint nodes register with (kubelet --register-with-taints, node pool taints): daemon pods tolerate it, and the controller removes it from a node once every set with nodeReadinessGate that runs there has a Ready pod. The readiness gate for clusters whose scheduler cannot call the extender. Empty: off.")
	fs.StringVar(&o.daemonResource, "daemon-resource", o.daemonResource, "Extended resource every daemon pod requests one of, as a marker: kube-scheduler configured by `everynode scheduler-config` (managedResources, ignoredByScheduler) then calls the extender for daemon pods only, so a hung everynode cannot slow anyone else's pods. No node advertises it and the kubelet drops it, so it costs nothing. The scheduler must ignore it, or daemon pods stay Pending with \"Insufficient <name>\" (the set says so in its conditions). Empty: no marker, for a scheduler configured before it; only then can ordinary pods reach the extender's nodeReadinessGate.")
	fs.StringVar(&o.clientCAFile, "client-ca-file", o.clientCAFile, "PEM CA bundle: when set, every caller of the webhook and extender port must present a client certificate it signed (configure kube-apiserver's webhook kubeconfig and kube-scheduler's extender tlsConfig to send one; README). Read at start.")
	fs.IntVar(&o.maxInFlight, "max-in-flight", o.maxInFlight, "Requests each webhook and extender route serves at once; more get 429 with Retry-After at once (the caller's failure policy applies). 0: no cap.")
	fs.BoolVar(&o.http2, "http2", o.http2, "Offer HTTP/2 on the HTTPS listener besides HTTP/1.1. kube-apiserver sends concurrent webhook calls over one HTTP/2 connection; over HTTP/1.1 it keeps only 25 idle connections and opens a new TLS connection for every call beyond them.")

	fs.StringVar(&o.certMode, "cert-mode", o.certMode, `Where the serving certificate comes from: "file" (--tls-cert-file and --tls-key-file, reloaded when they change) or "self-signed" (a CA kept in the Secret --ca-secret-name, injected into --webhook-configurations).`)
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", o.tlsCertFile, "PEM certificate (chain) of the HTTPS server, for --cert-mode=file.")
	fs.StringVar(&o.tlsKeyFile, "tls-key-file", o.tlsKeyFile, "PEM private key of the HTTPS server, for --cert-mode=file.")
	fs.StringVar(&o.caSecretName, "ca-secret-name", o.caSecretName, "Secret in --namespace that holds the CA, for --cert-mode=self-signed; created when missing.")
	fs.StringSliceVar(&o.tlsDNSNames, "tls-dns-names", o.tlsDNSNames, "DNS names of the serving certificate, for --cert-mode=self-signed (e.g. everynode.everynode-system.svc).")
	fs.StringSliceVar(&o.webhookConfigurations, "webhook-configurations", o.webhookConfigurations, "Names of the Validating/MutatingWebhookConfigurations whose caBundle everynode writes, for --cert-mode=self-signed.")

	fs.StringVar(&o.namespace, "namespace", o.namespace, "Namespace of everynode itself (leader election Lease, CA Secret). Default: $POD_NAMESPACE.")
	fs.BoolVar(&o.leaderElect, "leader-elect", o.leaderElect, "Run the controller only in the replica that holds the Lease; all replicas serve webhooks and the extender.")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", o.leaderElectionID, "Name of the leader election Lease.")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", o.leaseDuration, "How long a non-leader waits after it last saw the Lease renewed before taking over. A dead leader is replaced at most lease-duration + 4.4 x retry-period after its last renewal (client-go waits a retry-period plus up to 120% of it between polls: one poll to see the last renewal, one to take the expired Lease).")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", o.renewDeadline, "How long the leader retries renewing before it gives up leadership.")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", o.retryPeriod, "Wait between tries to acquire or renew the Lease.")
	fs.IntVar(&o.controllerWorkers, "controller-workers", o.controllerWorkers, "DaemonSets synced in parallel.")
	fs.StringVar(&o.controllerUsername, "controller-username", o.controllerUsername, "The only identity allowed to create daemon pods (e.g. system:serviceaccount:everynode-system:everynode). Empty: everynode's own identity, asked of the API server at start.")
	fs.StringSliceVar(&o.webhookSkippedNamespaces, "webhook-skipped-namespaces", o.webhookSkippedNamespaces, "Namespaces the everynode webhooks' namespaceSelector leaves out (the chart passes its list). A set there with nodeOverrides, which only the set webhook checks, gets the WebhooksSkipped condition and a Warning event. Default: kube-system, kube-node-lease and --namespace.")
	fs.BoolVar(&o.takeover, "takeover", o.takeover, "Also reconcile apps/v1 DaemonSets, with the same controller, as kube-controller-manager's DaemonSet controller would; that controller must be off (kube-controller-manager --controllers=*,-daemonset-controller). everynode checks first and waits while another DaemonSet controller runs (--takeover-probe-timeout). Without it nothing touches apps/v1.")
	fs.DurationVar(&o.takeoverProbeTimeout, "takeover-probe-timeout", o.takeoverProbeTimeout, "How long another DaemonSet controller gets to observe everynode's probe DaemonSet (everynode-takeover-probe in --namespace) before everynode concludes none runs and takes over. Raise it where kube-controller-manager's queue is long.")
	fs.DurationVar(&o.takeoverRetry, "takeover-retry", o.takeoverRetry, "With --takeover, how often everynode checks again while another DaemonSet controller runs.")
	fs.StringVar(&o.takeoverLockPolicy, "takeover-lock-policy", o.takeoverLockPolicy, "With --takeover, the ValidatingAdmissionPolicy (the chart's) that denies kube-controller-manager's DaemonSet controller every write to apps/v1 DaemonSets, their revisions and pods; everynode binds it while it reconciles them and unbinds it when it stops. everynode does not take over while the policy is missing. Empty: no lock (the probe alone).")
	fs.StringVar(&o.schedulerName, "scheduler-name", o.schedulerName, "If set, daemon pods are given this schedulerName (a second kube-scheduler configured with the everynode extender).")
}

// validate checks the flags without touching the network or the cluster,
// so a mistake fails fast with a one-line message.
func (o *serveOptions) validate() error {
	var errs []error
	for _, a := range []struct{ flag, addr string }{{"--secure-addr", o.secureAddr}, {"--health-addr", o.healthAddr}} {
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want host:port", a.flag, a.addr))
		}
	}
	if o.secureAddr == o.healthAddr {
		errs = append(errs, errors.New("--secure-addr and --health-addr must differ"))
	}
	for _, d := range []struct {
		flag string
		d    time.Duration
	}{{"--shutdown-delay", o.shutdownDelay}, {"--shutdown-drain-timeout", o.shutdownDrainTimeout}} {
		if d.d < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %v", d.flag, d.d))
		}
	}
	if o.startupTaint != "" {
		if msgs := validation.IsQualifiedName(o.startupTaint); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--startup-taint %q is not a taint key: %s", o.startupTaint, strings.Join(msgs, "; ")))
		}
	}
	if err := placement.ValidateDaemonResource(o.daemonResource); err != nil {
		errs = append(errs, fmt.Errorf("--daemon-resource %w", err))
	}
	if o.maxInFlight < 0 {
		errs = append(errs, fmt.Errorf("--max-in-flight must not be negative (0 turns the cap off), got %d", o.maxInFlight))
	}
	if o.kubeAPIQPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be positive, got %v", o.kubeAPIQPS))
	}
	if o.kubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be at least 1, got %d", o.kubeAPIBurst))
	}
	switch o.certMode {
	case certModeFile:
		if o.tlsCertFile == "" || o.tlsKeyFile == "" {
			errs = append(errs, errors.New("--cert-mode=file needs --tls-cert-file and --tls-key-file"))
		}
	case certModeSelfSigned:
		if o.caSecretName == "" {
			errs = append(errs, errors.New("--cert-mode=self-signed needs --ca-secret-name"))
		}
		if len(o.tlsDNSNames) == 0 {
			errs = append(errs, errors.New("--cert-mode=self-signed needs --tls-dns-names"))
		}
		if o.namespace == "" {
			errs = append(errs, errors.New("--cert-mode=self-signed needs --namespace (or $POD_NAMESPACE)"))
		}
	default:
		errs = append(errs, fmt.Errorf("--cert-mode %q: want %q or %q", o.certMode, certModeFile, certModeSelfSigned))
	}
	if o.leaderElect {
		if o.namespace == "" {
			errs = append(errs, errors.New("--leader-elect needs --namespace (or $POD_NAMESPACE)"))
		}
		if o.leaderElectionID == "" {
			errs = append(errs, errors.New("--leader-election-id must not be empty"))
		}
		if !(o.leaseDuration > o.renewDeadline && o.renewDeadline > o.retryPeriod && o.retryPeriod > 0) {
			errs = append(errs, errors.New("leader election wants lease-duration > renew-deadline > retry-period > 0"))
		}
	}
	if o.takeover {
		if o.namespace == "" {
			errs = append(errs, errors.New("--takeover needs --namespace (or $POD_NAMESPACE) for its probe DaemonSet"))
		}
		if o.takeoverProbeTimeout <= 0 || o.takeoverRetry <= 0 {
			errs = append(errs, errors.New("--takeover-probe-timeout and --takeover-retry must be positive"))
		}
	}
	if o.controllerWorkers < 1 {
		errs = append(errs, fmt.Errorf("--controller-workers must be at least 1, got %d", o.controllerWorkers))
	}
	if o.controllerUsername != "" && strings.TrimSpace(o.controllerUsername) != o.controllerUsername {
		errs = append(errs, errors.New("--controller-username must not have surrounding spaces"))
	}
	if len(errs) == 0 {
		return nil
	}
	// One line, as the issue and every operator reading a pod log want.
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return usageError{errors.New(strings.Join(msgs, "; "))}
}

// skippedNamespaces is --webhook-skipped-namespaces, or without it the
// namespaces the chart's webhooks always skip: kube-system,
// kube-node-lease and everynode's own.
func (o *serveOptions) skippedNamespaces() []string {
	if o.webhookSkippedNamespaces != nil {
		return o.webhookSkippedNamespaces
	}
	ns := []string{"kube-system", "kube-node-lease"}
	if o.namespace != "" {
		ns = append(ns, o.namespace)
	}
	return ns
}
