package schedconfig

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	schedulerv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func readCA(t *testing.T) []byte {
	t.Helper()
	ca, err := os.ReadFile(filepath.Join("testdata", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// TestRenderGolden pins the rendered bytes (the e2e cluster and the docs
// use these files) and decodes them strictly into upstream's
// KubeSchedulerConfiguration, so a misspelled field fails here, not in
// kube-scheduler.
func TestRenderGolden(t *testing.T) {
	ca := readCA(t)
	tests := map[string]struct {
		opts  Options
		check func(t *testing.T, cfg *schedulerv1.KubeSchedulerConfiguration)
	}{
		"scheduler-config.yaml": {
			opts: Options{
				URLPrefix:      "https://everynode.everynode-system.svc:443/extender/",
				CAFile:         "/etc/kubernetes/everynode/ca.crt",
				Kubeconfig:     "/etc/kubernetes/scheduler.conf",
				DaemonResource: "everynode.io/daemon",
				// everynode run with --client-ca-file.
				ClientCertFile: "/etc/kubernetes/everynode/client.crt",
				ClientKeyFile:  "/etc/kubernetes/everynode/client.key",
			},
			check: func(t *testing.T, cfg *schedulerv1.KubeSchedulerConfiguration) {
				if cfg.ClientConnection.Kubeconfig != "/etc/kubernetes/scheduler.conf" {
					t.Errorf("kubeconfig = %q", cfg.ClientConnection.Kubeconfig)
				}
				if cfg.Extenders[0].TLSConfig.CAFile != "/etc/kubernetes/everynode/ca.crt" {
					t.Errorf("caFile = %q", cfg.Extenders[0].TLSConfig.CAFile)
				}
				if tls := cfg.Extenders[0].TLSConfig; tls.CertFile != "/etc/kubernetes/everynode/client.crt" || tls.KeyFile != "/etc/kubernetes/everynode/client.key" {
					t.Errorf("client certificate = %q, %q", tls.CertFile, tls.KeyFile)
				}
				if cfg.LeaderElection.LeaderElect != nil || len(cfg.Profiles) != 0 {
					t.Errorf("leader election or profiles set for the default scheduler: %+v %+v", cfg.LeaderElection, cfg.Profiles)
				}
			},
		},
		"second-scheduler.yaml": {
			opts: Options{
				URLPrefix:               "https://127.0.0.1:8443/extender",
				CAData:                  ca,
				ServerName:              "everynode.everynode-system.svc",
				HTTPTimeout:             2 * time.Second,
				DaemonResource:          "example.com/agent",
				SchedulerName:           "everynode-scheduler",
				LeaderElectionNamespace: "everynode-system",
			},
			check: func(t *testing.T, cfg *schedulerv1.KubeSchedulerConfiguration) {
				if string(cfg.Extenders[0].TLSConfig.CAData) != string(ca) {
					t.Error("caData does not round-trip to the PEM given")
				}
				if cfg.Extenders[0].TLSConfig.ServerName != "everynode.everynode-system.svc" {
					t.Errorf("serverName = %q", cfg.Extenders[0].TLSConfig.ServerName)
				}
				if len(cfg.Profiles) != 1 || *cfg.Profiles[0].SchedulerName != "everynode-scheduler" {
					t.Errorf("profiles = %+v", cfg.Profiles)
				}
				le := cfg.LeaderElection
				if le.LeaderElect == nil || !*le.LeaderElect || le.ResourceName != "everynode-scheduler" || le.ResourceNamespace != "everynode-system" {
					t.Errorf("leaderElection = %+v", le)
				}
				if m := cfg.Extenders[0].ManagedResources; len(m) != 1 || m[0].Name != "example.com/agent" || !m[0].IgnoredByScheduler {
					t.Errorf("managedResources = %+v", m)
				}
			},
		},
		// everynode serve --daemon-resource="": every pod goes to the
		// extender, as before the marker.
		"no-marker.yaml": {
			opts: Options{URLPrefix: "https://everynode.everynode-system.svc:443/extender", CAFile: "/etc/kubernetes/everynode/ca.crt"},
			check: func(t *testing.T, cfg *schedulerv1.KubeSchedulerConfiguration) {
				if m := cfg.Extenders[0].ManagedResources; len(m) != 0 {
					t.Errorf("managedResources = %+v, want none", m)
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Render(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name)
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("Render differs from %s (go test -update rewrites it):\n%s", golden, got)
			}

			var cfg schedulerv1.KubeSchedulerConfiguration
			if err := yaml.UnmarshalStrict(got, &cfg); err != nil {
				t.Fatalf("output does not decode strictly as KubeSchedulerConfiguration: %v", err)
			}
			if cfg.APIVersion != "kubescheduler.config.k8s.io/v1" || cfg.Kind != "KubeSchedulerConfiguration" {
				t.Errorf("apiVersion/kind = %s/%s", cfg.APIVersion, cfg.Kind)
			}
			if len(cfg.Extenders) != 1 {
				t.Fatalf("%d extenders, want 1", len(cfg.Extenders))
			}
			ext := cfg.Extenders[0]
			// No prioritize verb: it scored nothing and cost a timeout per
			// pod while everynode hangs.
			if strings.HasSuffix(ext.URLPrefix, "/") || ext.FilterVerb != "filter" || ext.PrioritizeVerb != "" || ext.PreemptVerb != "preempt" {
				t.Errorf("urlPrefix/verbs = %q %q %q %q", ext.URLPrefix, ext.FilterVerb, ext.PrioritizeVerb, ext.PreemptVerb)
			}
			if !ext.NodeCacheCapable || !ext.Ignorable || !ext.EnableHTTPS || ext.HTTPTimeout.Duration <= 0 || ext.BindVerb != "" {
				t.Errorf("extender = %+v", ext)
			}
			tc.check(t, &cfg)
		})
	}
}

func TestRenderDefaults(t *testing.T) {
	got, err := Render(Options{URLPrefix: "https://e:1/extender", CAFile: "/ca"})
	if err != nil {
		t.Fatal(err)
	}
	var cfg schedulerv1.KubeSchedulerConfiguration
	if err := yaml.UnmarshalStrict(got, &cfg); err != nil {
		t.Fatal(err)
	}
	if ext := cfg.Extenders[0]; ext.HTTPTimeout.Duration != DefaultHTTPTimeout {
		t.Errorf("timeout %s, want the default %s", ext.HTTPTimeout.Duration, DefaultHTTPTimeout)
	}
	if cfg.ClientConnection.Kubeconfig != "" {
		t.Errorf("kubeconfig = %q, want none", cfg.ClientConnection.Kubeconfig)
	}
	off, err := Render(Options{URLPrefix: "https://e:1/extender", CAFile: "/ca", NoLeaderElection: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(off, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.LeaderElection.LeaderElect == nil || *cfg.LeaderElection.LeaderElect {
		t.Errorf("leaderElect = %v, want false", cfg.LeaderElection.LeaderElect)
	}
}

func TestRenderInvalid(t *testing.T) {
	ca := readCA(t)
	ok := Options{URLPrefix: "https://e:1/extender", CAData: ca}
	with := func(change func(*Options)) Options {
		o := ok
		change(&o)
		return o
	}
	tests := map[string]struct {
		opts Options
		want string // part of the error
	}{
		"no URL":                  {opts: with(func(o *Options) { o.URLPrefix = "" }), want: "URL prefix is required"},
		"http":                    {opts: with(func(o *Options) { o.URLPrefix = "http://e:1/extender" }), want: "must be https"},
		"no host":                 {opts: with(func(o *Options) { o.URLPrefix = "https:///extender" }), want: "no host"},
		"query":                   {opts: with(func(o *Options) { o.URLPrefix = "https://e/x?a=b" }), want: "no user, query or fragment"},
		"unparsable URL":          {opts: with(func(o *Options) { o.URLPrefix = "https://e:port/x" }), want: "extender URL prefix"},
		"no CA":                   {opts: with(func(o *Options) { o.CAData = nil }), want: "CA (data or file) is required"},
		"both CAs":                {opts: with(func(o *Options) { o.CAFile = "/ca" }), want: "not both"},
		"CA not PEM":              {opts: with(func(o *Options) { o.CAData = []byte("hello") }), want: "other than PEM"},
		"CA is a key":             {opts: with(func(o *Options) { o.CAData = []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n") }), want: `"PRIVATE KEY"`},
		"CA garbage cert":         {opts: with(func(o *Options) { o.CAData = []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n") }), want: "CA data:"},
		"negative timeout":        {opts: with(func(o *Options) { o.HTTPTimeout = -time.Second }), want: "negative"},
		"daemon resource native":  {opts: with(func(o *Options) { o.DaemonResource = "kubernetes.io/daemon" }), want: "not an extended resource name"},
		"daemon resource no /":    {opts: with(func(o *Options) { o.DaemonResource = "daemon" }), want: "needs a domain"},
		"client cert without key": {opts: with(func(o *Options) { o.ClientCertFile = "/c.crt" }), want: "both its file and its key file"},
	}
	if _, err := Render(ok); err != nil {
		t.Fatalf("base options: %v", err)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Render(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Render error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
