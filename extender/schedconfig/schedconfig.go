// Package schedconfig renders the KubeSchedulerConfiguration that points
// kube-scheduler at everynode's extender: the `everynode scheduler-config`
// command prints it for an installation, and the e2e cluster and the
// chart's optional second scheduler use it.
//
// It is a pure function of its Options, so the command, the chart tests
// and the e2e setup render the same bytes.
package schedconfig

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulerv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"everynode.io/everynode/placement"
)

// The extender's verbs: kube-scheduler POSTs to URLPrefix + "/" + verb, so
// the server mounts the handlers at these paths under the prefix.
//
// Render names filter and preempt only. The prioritize route is still
// served, for configurations written before it was dropped: it answered an
// empty list for every ordinary pod, and a daemon pod is pinned to one
// node, so the verb cost a call per pod (and a timeout per pod while
// everynode hangs) for nothing.
const (
	FilterVerb     = "filter"
	PrioritizeVerb = "prioritize"
	PreemptVerb    = "preempt"
)

// Defaults applied to zero Options fields.
const (
	// DefaultHTTPTimeout bounds each extender call. The bound matters when
	// everynode hangs (SIGSTOP, a frozen node, CPU throttling): a dead
	// everynode refuses the connection at once, a hung one is waited for
	// this long, for every pod the extender is called for, one pod at a
	// time, before kube-scheduler ignores the (ignorable) extender. The
	// extender answers in milliseconds, so a second leaves it hundreds of
	// times that and several CFS quota periods of a throttled pod, while a
	// hang costs each daemon pod a fifth of kube-scheduler's own default.
	// A call cut short loses nothing the webhook's pin and the controller's
	// count do not guarantee.
	DefaultHTTPTimeout = time.Second
)

// Options describe an installation.
type Options struct {
	// URLPrefix is where the verbs live, e.g.
	// https://everynode.everynode-system.svc:443/extender. It must be https.
	URLPrefix string
	// CAData is the PEM bundle that signs the extender's serving
	// certificate, embedded as tlsConfig.caData. Set it or CAFile.
	CAData []byte
	// CAFile is the path, on kube-scheduler's host, of that bundle
	// (tlsConfig.caFile). Set it or CAData.
	CAFile string
	// ClientCertFile and ClientKeyFile, if set (both or neither), are the
	// client certificate kube-scheduler presents to the extender
	// (tlsConfig.certFile and keyFile), for an everynode started with
	// --client-ca-file.
	ClientCertFile, ClientKeyFile string
	// ServerName, if set, is the name checked against the serving
	// certificate instead of URLPrefix's host.
	ServerName string
	// HTTPTimeout is each call's timeout; zero means DefaultHTTPTimeout.
	HTTPTimeout time.Duration
	// DaemonResource, if set, is the extended resource daemon pods
	// request as a marker (everynode serve --daemon-resource; the
	// default is everynode.io/daemon). It goes into managedResources with
	// ignoredByScheduler, so kube-scheduler calls the extender for daemon
	// pods only and does not look for the resource on nodes. Empty: the
	// extender is called for every pod, for an everynode run with
	// --daemon-resource="".
	DaemonResource string
	// Kubeconfig is kube-scheduler's clientConnection.kubeconfig; empty
	// leaves it out (in-cluster config).
	Kubeconfig string
	// SchedulerName, if set, names the one profile, for a second scheduler
	// next to the default one. It also names that scheduler's leader
	// election lease: sharing the default "kube-scheduler" lease would
	// leave one of the two schedulers idle.
	SchedulerName string
	// LeaderElectionNamespace is the namespace of that lease; empty keeps
	// kube-scheduler's default (kube-system).
	LeaderElectionNamespace string
	// NoLeaderElection turns leader election off, for a single replica.
	NoLeaderElection bool
}

// document is the rendered configuration. The top level is local so that
// unset fields are left out instead of printed as zero values; the extender
// entry is upstream's own type, and the tests decode the whole output
// strictly into upstream's KubeSchedulerConfiguration.
type document struct {
	APIVersion       string                 `json:"apiVersion"`
	Kind             string                 `json:"kind"`
	ClientConnection *clientConnection      `json:"clientConnection,omitempty"`
	LeaderElection   *leaderElection        `json:"leaderElection,omitempty"`
	Profiles         []profile              `json:"profiles,omitempty"`
	Extenders        []schedulerv1.Extender `json:"extenders"`
}

type clientConnection struct {
	Kubeconfig string `json:"kubeconfig"`
}

type leaderElection struct {
	LeaderElect       bool   `json:"leaderElect"`
	ResourceName      string `json:"resourceName,omitempty"`
	ResourceNamespace string `json:"resourceNamespace,omitempty"`
}

type profile struct {
	SchedulerName string `json:"schedulerName"`
}

// Render returns the KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1)
// for o as YAML, or an error naming the first invalid option.
func Render(o Options) ([]byte, error) {
	ext, err := extender(o)
	if err != nil {
		return nil, err
	}
	doc := document{
		APIVersion: schedulerv1.SchemeGroupVersion.String(),
		Kind:       "KubeSchedulerConfiguration",
		Extenders:  []schedulerv1.Extender{ext},
	}
	if o.Kubeconfig != "" {
		doc.ClientConnection = &clientConnection{Kubeconfig: o.Kubeconfig}
	}
	switch {
	case o.NoLeaderElection:
		doc.LeaderElection = &leaderElection{LeaderElect: false}
	case o.SchedulerName != "" || o.LeaderElectionNamespace != "":
		doc.LeaderElection = &leaderElection{LeaderElect: true, ResourceName: o.SchedulerName, ResourceNamespace: o.LeaderElectionNamespace}
	}
	if o.SchedulerName != "" {
		doc.Profiles = []profile{{SchedulerName: o.SchedulerName}}
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("render scheduler configuration: %w", err)
	}
	header := "# kube-scheduler configuration with the everynode extender (everynode scheduler-config).\n"
	return append([]byte(header), out...), nil
}

// extender validates o and builds the extenders entry.
func extender(o Options) (schedulerv1.Extender, error) {
	prefix, err := urlPrefix(o.URLPrefix)
	if err != nil {
		return schedulerv1.Extender{}, err
	}
	tls := &schedulerv1.ExtenderTLSConfig{ServerName: o.ServerName}
	switch {
	case len(o.CAData) > 0 && o.CAFile != "":
		return schedulerv1.Extender{}, errors.New("give the CA as data or as a file, not both")
	case len(o.CAData) > 0:
		if err := checkCA(o.CAData); err != nil {
			return schedulerv1.Extender{}, err
		}
		tls.CAData = o.CAData
	case o.CAFile != "":
		tls.CAFile = o.CAFile
	default:
		return schedulerv1.Extender{}, errors.New("a CA (data or file) is required: kube-scheduler must verify the extender's certificate")
	}
	if (o.ClientCertFile == "") != (o.ClientKeyFile == "") {
		return schedulerv1.Extender{}, errors.New("a client certificate needs both its file and its key file")
	}
	tls.CertFile, tls.KeyFile = o.ClientCertFile, o.ClientKeyFile
	timeout := o.HTTPTimeout
	switch {
	case timeout < 0:
		return schedulerv1.Extender{}, fmt.Errorf("HTTP timeout %s is negative", timeout)
	case timeout == 0:
		timeout = DefaultHTTPTimeout
	}
	var managed []schedulerv1.ExtenderManagedResource
	if o.DaemonResource != "" {
		if err := placement.ValidateDaemonResource(o.DaemonResource); err != nil {
			return schedulerv1.Extender{}, fmt.Errorf("daemon resource %w", err)
		}
		// Only pods that request it are sent to the extender, and no node
		// has it: NodeResourcesFit must not look for it.
		managed = []schedulerv1.ExtenderManagedResource{{Name: o.DaemonResource, IgnoredByScheduler: true}}
	}
	return schedulerv1.Extender{
		URLPrefix:        prefix,
		FilterVerb:       FilterVerb,
		PreemptVerb:      PreemptVerb,
		ManagedResources: managed,
		EnableHTTPS:      true,
		TLSConfig:        tls,
		HTTPTimeout:      metav1.Duration{Duration: timeout},
		// Node names in and out: the extender has its own node cache, and
		// full Node objects for 5,000 nodes would cost megabytes per call.
		NodeCacheCapable: true,
		// The webhook pins daemon pods and the controller counts them: an
		// extender outage must slow nothing down but the gate.
		Ignorable: true,
	}, nil
}

// urlPrefix checks that raw is an https URL with a host and nothing the
// scheduler would mangle, and drops a trailing slash (the scheduler adds
// its own before the verb).
func urlPrefix(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("the extender URL prefix is required, e.g. https://everynode.everynode-system.svc:443/extender")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("extender URL prefix %q: %w", raw, err)
	}
	switch {
	case u.Scheme != "https":
		return "", fmt.Errorf("extender URL prefix %q: scheme must be https, the extender serves TLS only", raw)
	case u.Host == "":
		return "", fmt.Errorf("extender URL prefix %q has no host", raw)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return "", fmt.Errorf("extender URL prefix %q: no user, query or fragment allowed", raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

// checkCA makes sure data holds at least one parsable PEM certificate and
// nothing else, so a wrong file (a key, a kubeconfig) fails here rather
// than as a TLS error in kube-scheduler's log.
func checkCA(data []byte) error {
	found := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			if strings.TrimSpace(string(rest)) != "" {
				return errors.New("CA data holds something other than PEM certificates")
			}
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("CA data holds a PEM %q block, want CERTIFICATE", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("CA data: %w", err)
		}
		found++
	}
	if found == 0 {
		return errors.New("CA data holds no PEM certificate")
	}
	return nil
}
