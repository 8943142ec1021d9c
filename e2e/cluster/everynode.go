package cluster

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// EverynodeKubeconfig is the kubeconfig everynode runs with: the chart's
// ServiceAccount's token.
func (c *Cluster) EverynodeKubeconfig() string { return c.path("everynode.kubeconfig") }

// pidFile is the pid file of replica n (0: the first, which the webhooks
// and kube-scheduler call).
func (c *Cluster) pidFile(n int) string {
	if n == 0 {
		return c.path("everynode.pid")
	}
	return c.path(fmt.Sprintf("everynode-%d.pid", n))
}

// ReplicaLog is the log of replica n.
func (c *Cluster) ReplicaLog(n int) string {
	if n == 0 {
		return c.EverynodeLog()
	}
	return filepath.Join(c.Logs(), fmt.Sprintf("everynode-%d.log", n))
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the
// chart's ServiceAccount, with a day's token from the TokenRequest API.
func (c *Cluster) serviceAccountKubeconfig(ctx context.Context) error {
	return c.tokenKubeconfig(ctx, c.Namespace, c.Release, c.EverynodeKubeconfig())
}

// tokenKubeconfig writes file, a kubeconfig that authenticates as the
// ServiceAccount namespace/name with a day's token from the TokenRequest
// API.
func (c *Cluster) tokenKubeconfig(ctx context.Context, namespace, name, file string) error {
	kube, err := c.Client()
	if err != nil {
		return err
	}
	tr, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token of ServiceAccount %s/%s: %w", namespace, name, err)
	}
	admin, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return err
	}
	ca := admin.CAData
	if len(ca) == 0 && admin.CAFile != "" {
		if ca, err = os.ReadFile(admin.CAFile); err != nil {
			return err
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: ca}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: name, Namespace: namespace}
	kc.CurrentContext = name
	return clientcmd.WriteToFile(*kc, file)
}

// serveArgs are the flags of `everynode serve` for the kept settings.
func (c *Cluster) serveArgs(s Settings, port, health int) []string {
	args := []string{filepath.Join(c.Root, "bin", "everynode"), "serve",
		"--kubeconfig", c.EverynodeKubeconfig(), "--namespace", c.Namespace,
		"--leader-election-id", c.Release}
	switch s.CertMode {
	case CertSelfSigned:
		args = append(args, "--cert-mode", "self-signed", "--ca-secret-name", c.Release+"-ca", "--tls-dns-names", "localhost",
			"--webhook-configurations", c.Release+","+c.Release)
	case CertManager:
		args = append(args, "--cert-mode", "file", "--tls-cert-file", c.certManagerFile("tls.crt"), "--tls-key-file", c.certManagerFile("tls.key"))
	default:
		args = append(args, "--cert-mode", "file", "--tls-cert-file", filepath.Join(c.PKI(), "tls.crt"), "--tls-key-file", filepath.Join(c.PKI(), "tls.key"))
	}
	if s.ClientAuth {
		args = append(args, "--client-ca-file", filepath.Join(c.PKI(), "client-ca.crt"))
	}
	if s.Takeover {
		// A quick probe and retry, for the scenarios.
		args = append(args, "--takeover", "--takeover-probe-timeout=5s", "--takeover-retry=5s")
	}
	args = append(args, fmt.Sprintf("--secure-addr=127.0.0.1:%d", port), fmt.Sprintf("--health-addr=127.0.0.1:%d", health),
		"--profiling", "-v", "2")
	return append(args, s.EverynodeArgs...)
}

// launch starts replica n and waits for its /readyz.
func (c *Cluster) launch(ctx context.Context, n int) error {
	s, err := c.Settings()
	if err != nil {
		return err
	}
	port, health := c.Port+n, c.HealthPort+n
	pid, err := startDetached(c.Root, c.ReplicaLog(n), c.serveArgs(s, port, health))
	if err != nil {
		return err
	}
	if err := writePID(c.pidFile(n), pid); err != nil {
		return err
	}
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", health)
	// A probe that hangs (a stopped process) gives up, and the next one asks again.
	probe := &http.Client{Timeout: 5 * time.Second}
	fmt.Fprint(c.Log, "waiting for everynode /readyz")
	err = c.poll(ctx, "everynode /readyz", time.Second, time.Minute, func(ctx context.Context) (bool, error) {
		if !alive(pid) {
			return false, errors.New("everynode exited")
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, readyz, nil)
		resp, err := probe.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, tail(c.ReplicaLog(n), 20))
	}
	fmt.Fprintln(c.Log, " ready")
	return nil
}

// tail is the last n lines of a file, for an error that a log explains.
func tail(file string, n int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// StartEverynode (re)starts everynode's first replica with a fresh token
// and the kept settings and modes.
func (c *Cluster) StartEverynode(ctx context.Context) error {
	if err := c.StopEverynode(); err != nil {
		return err
	}
	if err := c.serviceAccountKubeconfig(ctx); err != nil {
		return err
	}
	c.say("starting everynode as system:serviceaccount:%s:%s (log: %s)", c.Namespace, c.Release, c.EverynodeLog())
	return c.launch(ctx, 0)
}

// StopEverynode stops everynode's first replica.
func (c *Cluster) StopEverynode() error { return stopPIDFile(c.pidFile(0)) }

// StartReplica starts replica n (n > 0), another everynode sharing the
// leader Lease on ports Port+n and HealthPort+n, with a fresh log. The
// webhooks and kube-scheduler keep calling the first replica.
func (c *Cluster) StartReplica(ctx context.Context, n int) error {
	if n <= 0 {
		return fmt.Errorf("replica %d: the first replica is StartEverynode's", n)
	}
	if err := stopPIDFile(c.pidFile(n)); err != nil {
		return err
	}
	c.say("starting everynode replica %d (log: %s)", n, c.ReplicaLog(n))
	if err := os.WriteFile(c.ReplicaLog(n), nil, 0o644); err != nil {
		return err
	}
	return c.launch(ctx, n)
}

// StopReplica stops replica n.
func (c *Cluster) StopReplica(n int) error { return stopPIDFile(c.pidFile(n)) }

// PID is the pid of replica n, 0 if it is not running.
func (c *Cluster) PID(n int) (int, error) { return readPID(c.pidFile(n)) }
