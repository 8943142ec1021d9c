package plugin

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

const kubeconfig = `apiVersion: v1
kind: Config
current-context: a
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
- name: b
  cluster: {server: "https://b.example:6443"}
users:
- name: u
  user: {token: "t"}
contexts:
- name: a
  context: {cluster: a, user: u, namespace: team-a}
- name: b
  context: {cluster: b, user: u, namespace: team-b}
- name: none
  context: {cluster: a, user: u}
`

// TestConfigFactory checks that the kubectl flags choose the cluster and
// the namespace as in kubectl. It builds clients but sends no request.
func TestConfigFactory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		args       []string
		wantNS     string
		wantServer string
	}{
		"current context":       {args: nil, wantNS: "team-a", wantServer: "https://a.example:6443"},
		"--context":             {args: []string{"--context=b"}, wantNS: "team-b", wantServer: "https://b.example:6443"},
		"-n wins":               {args: []string{"--context=b", "-n", "mine"}, wantNS: "mine", wantServer: "https://b.example:6443"},
		"context without one":   {args: []string{"--context=none"}, wantNS: "default", wantServer: "https://a.example:6443"},
		"--server overrides it": {args: []string{"--server=https://c.example"}, wantNS: "team-a", wantServer: "https://c.example"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			flags := genericclioptions.NewConfigFlags(true)
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			flags.AddFlags(fs)
			if err := fs.Parse(append([]string{"--kubeconfig=" + path}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			f := newConfigFactory(flags, io.Discard)
			ns, err := f.Namespace()
			if err != nil || ns != tc.wantNS {
				t.Errorf("Namespace() = %q, %v; want %q", ns, err, tc.wantNS)
			}
			cfg, err := f.restConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.wantServer {
				t.Errorf("server %q, want %q", cfg.Host, tc.wantServer)
			}
			if cfg.WarningHandler == nil {
				t.Error("no warning handler: warnings would print as klog lines")
			}
			if !strings.Contains(cfg.UserAgent, userAgent) {
				t.Errorf("user agent %q", cfg.UserAgent)
			}
			if _, err := f.EverynodeClient(); err != nil {
				t.Error(err)
			}
			if _, err := f.AppsClient(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestCommand(t *testing.T) {
	tests := map[string]struct {
		args    []string
		wantOut []string
		wantErr string
	}{
		"version": {args: []string{"version"}, wantOut: []string{"kubectl-everynode v1.2.3 (go"}},
		"rollout lists its subcommands": {
			args:    []string{"rollout", "--help"},
			wantOut: []string{"kubectl everynode rollout [command]", "history", "pause", "restart", "resume", "status", "undo", "--kubeconfig", "--context", "-n, --namespace"},
		},
		"status flags": {
			args:    []string{"rollout", "status", "--help"},
			wantOut: []string{"kubectl everynode rollout status (NAME | daemonset/NAME | -l SELECTOR) [flags]", "--watch", "--timeout", "-A, --all-namespaces", "-l, --selector"},
		},
		"undo flags": {
			args:    []string{"rollout", "undo", "--help"},
			wantOut: []string{"--to-revision", "--dry-run", "-o, --output"},
		},
		"a bad flag says where help is": {
			args:    []string{"rollout", "status", "x", "--bogus"},
			wantErr: "unknown flag: --bogus\nSee 'kubectl everynode rollout status --help' for usage",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			streams, _, out, _ := genericiooptions.NewTestIOStreams()
			cmd := NewCommand(streams, "v1.2.3")
			cmd.SetArgs(tc.args)
			err := cmd.Execute()
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
