package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestServeFlagErrorsAreUsageErrors(t *testing.T) {
	tests := map[string]struct {
		args    []string
		wantMsg string
	}{
		"unknown flag":        {args: []string{"serve", "--nope"}, wantMsg: "unknown flag: --nope"},
		"bad cert mode":       {args: []string{"serve", "--cert-mode=bogus", "--namespace=x"}, wantMsg: `--cert-mode "bogus"`},
		"file mode no files":  {args: []string{"serve", "--namespace=x"}, wantMsg: "needs --tls-cert-file and --tls-key-file"},
		"self-signed no ca":   {args: []string{"serve", "--cert-mode=self-signed", "--namespace=x", "--tls-dns-names=a"}, wantMsg: "needs --ca-secret-name"},
		"no namespace":        {args: []string{"serve", "--tls-cert-file=a", "--tls-key-file=b", "--namespace="}, wantMsg: "--leader-elect needs --namespace"},
		"bad address":         {args: []string{"serve", "--tls-cert-file=a", "--tls-key-file=b", "--namespace=x", "--secure-addr=8443"}, wantMsg: `--secure-addr "8443": want host:port`},
		"same addresses":      {args: []string{"serve", "--tls-cert-file=a", "--tls-key-file=b", "--namespace=x", "--secure-addr=:1", "--health-addr=:1"}, wantMsg: "must differ"},
		"zero qps":            {args: []string{"serve", "--tls-cert-file=a", "--tls-key-file=b", "--namespace=x", "--kube-api-qps=0"}, wantMsg: "--kube-api-qps must be positive"},
		"zero workers":        {args: []string{"serve", "--tls-cert-file=a", "--tls-key-file=b", "--namespace=x", "--controller-workers=0"}, wantMsg: "--controller-workers must be at least 1"},
		"bad lease durations": {args: []string{"serve", "--tls-cert-file=a", "--tls-key-file=b", "--namespace=x", "--leader-elect-renew-deadline=1m"}, wantMsg: "lease-duration > renew-deadline"},
		"negative delay":      {args: []string{"serve", "--tls-cert-file=a", "--tls-key-file=b", "--namespace=x", "--shutdown-delay=-1s"}, wantMsg: "--shutdown-delay must not be negative"},
		"negative drain":      {args: []string{"serve", "--tls-cert-file=a", "--tls-key-file=b", "--namespace=x", "--shutdown-drain-timeout=-1s"}, wantMsg: "--shutdown-drain-timeout must not be negative"},
		"bad daemon resource": {args: []string{"serve", "--tls-cert-file=a", "--tls-key-file=b", "--namespace=x", "--daemon-resource=kubernetes.io/daemon"}, wantMsg: `--daemon-resource "kubernetes.io/daemon" is not an extended resource name`},
		"bad verbosity":       {args: []string{"serve", "-v=abc"}, wantMsg: "invalid argument"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cmd := newRootCommand()
			cmd.SetArgs(tc.args)
			err := cmd.Execute()
			if err == nil {
				t.Fatal("want an error, got none")
			}
			var usage usageError
			if !errors.As(err, &usage) {
				t.Fatalf("want a usage error (exit 2), got %T: %v", err, err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tc.wantMsg)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

func TestServeValidOptions(t *testing.T) {
	o := defaultServeOptions()
	o.tlsCertFile, o.tlsKeyFile, o.namespace = "a", "b", "x"
	if err := o.validate(); err != nil {
		t.Fatalf("valid options rejected: %v", err)
	}
	// Zero turns the shutdown delay and drain off; only negative is wrong.
	o.shutdownDelay, o.shutdownDrainTimeout = 0, 0
	if err := o.validate(); err != nil {
		t.Fatalf("zero shutdown delay and drain timeout rejected: %v", err)
	}
	// Empty turns the daemon-pod marker off (a scheduler configured
	// before it).
	o.daemonResource = ""
	if err := o.validate(); err != nil {
		t.Fatalf("--daemon-resource= rejected: %v", err)
	}
}

func TestSkippedNamespaces(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string
	}{
		"default: the chart's fixed list": {args: []string{"--namespace=everynode-system"}, want: "kube-system,kube-node-lease,everynode-system"},
		"given":                           {args: []string{"--namespace=x", "--webhook-skipped-namespaces=kube-system,infra"}, want: "kube-system,infra"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := defaultServeOptions()
			fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			o.addFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(o.skippedNamespaces(), ","); got != tc.want {
				t.Errorf("skippedNamespaces() = %s, want %s", got, tc.want)
			}
		})
	}
}
