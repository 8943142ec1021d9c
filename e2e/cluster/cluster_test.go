package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func newTestCluster(t *testing.T, name string) *Cluster {
	t.Helper()
	t.Setenv("EVERYNODE_PORT", "")
	t.Setenv("EVERYNODE_HEALTH_PORT", "")
	t.Setenv("E2E_KUBECONFIG", "")
	c, err := New(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The default cluster keeps the documented paths; another gets its own
// folder and ports, so the two run side by side.
func TestNewPathsAndPorts(t *testing.T) {
	def := newTestCluster(t, "")
	other := newTestCluster(t, "everynode-bench")
	if def.State != filepath.Join(def.Root, ".e2e") || def.Kubeconfig() != filepath.Join(def.Root, ".e2e", "kubeconfig") || def.Port != 18443 || def.HealthPort != 18080 {
		t.Errorf("default cluster %+v, kubeconfig %s", def, def.Kubeconfig())
	}
	if other.State != filepath.Join(other.Root, ".e2e", "everynode-bench") || other.Port != 28443 || other.HealthPort != 28080 {
		t.Errorf("bench cluster %+v", other)
	}
	t.Setenv("EVERYNODE_HEALTH_PORT", "38080")
	c, err := New(t.TempDir(), "conformance")
	if err != nil || c.HealthPort != 38080 {
		t.Errorf("EVERYNODE_HEALTH_PORT: %v, health port %d", err, c.HealthPort)
	}
	t.Setenv("EVERYNODE_PORT", "x")
	if _, err := New(t.TempDir(), ""); err == nil {
		t.Error("EVERYNODE_PORT=x: no error")
	}
}

// Settings survive from one command to the next; a cluster never started
// has none.
func TestSettingsAreKept(t *testing.T) {
	c := newTestCluster(t, "")
	if s, err := c.Settings(); err != nil || !reflect.DeepEqual(s, Settings{}) {
		t.Fatalf("fresh settings %+v, %v", s, err)
	}
	want := Settings{Nodes: 3, KCMControllers: "daemonset-controller", EverynodeArgs: []string{"--kube-api-qps=50"}, CertMode: CertManager, Takeover: true}
	if err := c.SaveSettings(want); err != nil {
		t.Fatal(err)
	}
	got, err := c.update(func(s *Settings) { s.ClientAuth = true })
	want.ClientAuth = true
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("updated %+v, %v; want %+v", got, err, want)
	}
	if again, _ := c.Settings(); !reflect.DeepEqual(again, want) {
		t.Errorf("read back %+v, want %+v", again, want)
	}
}

// everynode's flags follow the kept modes.
func TestServeArgs(t *testing.T) {
	c := newTestCluster(t, "")
	tests := map[string]struct {
		s          Settings
		want, not  []string
		wantSuffix []string
	}{
		"harness CA":   {want: []string{"--tls-cert-file", filepath.Join(c.PKI(), "tls.crt")}, not: []string{"--client-ca-file", "--takeover"}},
		"self-signed":  {s: Settings{CertMode: CertSelfSigned}, want: []string{"self-signed", "--tls-dns-names", "localhost"}},
		"cert-manager": {s: Settings{CertMode: CertManager}, want: []string{c.certManagerFile("tls.crt")}},
		"client auth and takeover": {s: Settings{ClientAuth: true, Takeover: true},
			want: []string{"--client-ca-file", "--takeover", "--takeover-retry=5s"}},
		"extra flags last": {s: Settings{EverynodeArgs: []string{"--kube-api-qps=50"}}, wantSuffix: []string{"--kube-api-qps=50"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			args := c.serveArgs(tc.s, 18443, 18080)
			for _, w := range tc.want {
				if !slices.Contains(args, w) {
					t.Errorf("%v lacks %s", args, w)
				}
			}
			for _, n := range tc.not {
				if slices.Contains(args, n) {
					t.Errorf("%v has %s", args, n)
				}
			}
			if len(tc.wantSuffix) > 0 && !slices.Equal(args[len(args)-len(tc.wantSuffix):], tc.wantSuffix) {
				t.Errorf("%v does not end with %v", args, tc.wantSuffix)
			}
		})
	}
}

// A restarted component keeps its command line but for the flags given.
func TestWithFlags(t *testing.T) {
	argv := []string{"kcm", "--controllers=*", "--v=2", "--use-service-account-credentials=true"}
	got := withFlags(argv, []string{"--controllers=*,-daemonset-controller", "--use-service-account-credentials=false", "--new=1"})
	want := []string{"kcm", "--v=2", "--controllers=*,-daemonset-controller", "--use-service-account-credentials=false", "--new=1"}
	if !slices.Equal(got, want) {
		t.Errorf("withFlags = %v, want %v", got, want)
	}
	if !slices.Equal(argv, []string{"kcm", "--controllers=*", "--v=2", "--use-service-account-credentials=true"}) {
		t.Errorf("argv changed: %v", argv)
	}
}

// The control plane's files parse, and carry what the scenarios rely on.
func TestConfigs(t *testing.T) {
	c := newTestCluster(t, "")
	for name, doc := range map[string]string{
		"kwokctl":   c.kwokctlConfig(Settings{KCMControllers: "*,-daemonset-controller"}),
		"audit":     c.auditPolicy(),
		"admission": func() string { _, a := c.admissionConfig(); return a }(),
		"client":    func() string { k, _ := c.admissionConfig(); return k }(),
	} {
		var v map[string]any
		if err := yaml.UnmarshalStrict([]byte(doc), &v); err != nil {
			t.Errorf("%s: %v\n%s", name, err, doc)
		}
	}
	if k := c.kwokctlConfig(Settings{KCMControllers: "*,-daemonset-controller"}); !strings.Contains(k, `value: "*,-daemonset-controller"`) || !strings.Contains(k, "stages.yaml") {
		t.Errorf("kwokctl config lacks the controllers or the Stages:\n%s", k)
	}
	if k := c.kwokctlConfig(Settings{}); strings.Contains(k, "key: controllers") {
		t.Errorf("kwokctl config sets --controllers with none asked for:\n%s", k)
	}
	with, err := c.schedulerConfig(WithExtender, "", endpoint{URL: c.URL(), CAFile: "/ca.crt"})
	if err != nil || !strings.Contains(string(with), "https://127.0.0.1:18443/extender") || !strings.Contains(string(with), "scheduler-client.crt") {
		t.Errorf("with the extender: %v\n%s", err, with)
	}
	if !strings.Contains(string(with), "name: everynode.io/daemon") {
		t.Errorf("with the extender: no daemon-pod marker in managedResources\n%s", with)
	}
	every, err := c.schedulerConfig(WithExtenderForEveryPod, "", endpoint{URL: c.URL(), CAFile: "/ca.crt"})
	if err != nil || strings.Contains(string(every), "managedResources") || !strings.Contains(string(every), "/extender") {
		t.Errorf("with the extender for every pod: %v\n%s", err, every)
	}
	without, err := c.schedulerConfig(WithoutExtender, "/kc", endpoint{})
	if err != nil || strings.Contains(string(without), "extender") {
		t.Errorf("without the extender: %v\n%s", err, without)
	}
}

// The certificates are made once: the serving certificate verifies
// against the CA for 127.0.0.1 and localhost, the client certificates
// against the client CA only.
func TestPKI(t *testing.T) {
	c := newTestCluster(t, "")
	if err := c.ensurePKI(); err != nil {
		t.Fatal(err)
	}
	dir := c.PKI()
	before, _ := os.ReadFile(filepath.Join(dir, "tls.crt"))
	if err := c.ensurePKI(); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "tls.crt")); string(after) != string(before) {
		t.Error("a second run made a new serving certificate")
	}
	pool := func(name string) *x509.CertPool {
		p := x509.NewCertPool()
		b, _ := os.ReadFile(filepath.Join(dir, name))
		if !p.AppendCertsFromPEM(b) {
			t.Fatalf("%s: no certificate", name)
		}
		return p
	}
	leaf := func(name string) *x509.Certificate {
		kp, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
		if err != nil {
			t.Fatal(err)
		}
		cert, _ := x509.ParseCertificate(kp.Certificate[0])
		return cert
	}
	serving := leaf("tls")
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if _, err := serving.Verify(x509.VerifyOptions{DNSName: host, Roots: pool("ca.crt")}); err != nil {
			t.Errorf("serving certificate for %s: %v", host, err)
		}
	}
	for _, who := range []string{"apiserver", "scheduler"} {
		cert := leaf(who + "-client")
		opts := x509.VerifyOptions{Roots: pool("client-ca.crt"), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		if _, err := cert.Verify(opts); err != nil {
			t.Errorf("%s client certificate: %v", who, err)
		}
		opts.Roots = pool("ca.crt")
		if _, err := cert.Verify(opts); err == nil {
			t.Errorf("%s client certificate verifies against the serving CA", who)
		}
	}
}

// A process that exited is not alive, whoever has yet to reap it; one
// still running is.
func TestAlive(t *testing.T) {
	dir := t.TempDir()
	pid, err := startDetached(dir, filepath.Join(dir, "log"), []string{"sleep", "60"})
	if err != nil {
		t.Fatal(err)
	}
	if !alive(pid) {
		t.Fatalf("sleep %d not alive", pid)
	}
	stop(pid, 5*time.Second)
	if alive(pid) {
		t.Errorf("sleep %d still alive after stop", pid)
	}
	if alive(1 << 30) {
		t.Error("a pid that does not exist is alive")
	}
}
