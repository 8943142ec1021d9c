package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The switches the scenarios flip. Each is kept in the cluster's settings,
// so a later restart of everynode keeps it.

// SetCertMode reinstalls the chart in mode (so the RBAC is the mode's
// own), restarts everynode to match, and restarts kube-scheduler to trust
// the mode's CA (it reads its extender CA once, at start).
//   - CertSelfSigned: self-signed certificates carry DNS names only, so
//     the webhooks are called at https://localhost:PORT;
//   - CertManager: cert-manager's certificate names 127.0.0.1 as an IP
//     address (the chart adds the URL's host); cert-manager runs on this
//     host, and its Secret is copied to files;
//   - CertExternalCA: back to the harness's CA, which must win the
//     caBundle fields from everynode or cert-manager's cainjector.
func (c *Cluster) SetCertMode(ctx context.Context, mode CertMode) error {
	if s, err := c.Settings(); err != nil {
		return err
	} else if s.RealNode {
		return c.setCertModeInCluster(ctx, mode)
	}
	if err := c.StopEverynode(); err != nil {
		return err
	}
	switch mode {
	case CertSelfSigned:
		if err := c.stopCertManager(); err != nil {
			return err
		}
		if err := c.installChart(ctx, "--set", fmt.Sprintf("external.url=https://localhost:%d", c.Port), "--set", "tls.caBundle="); err != nil {
			return err
		}
	case CertManager:
		if err := c.startCertManager(ctx); err != nil {
			return err
		}
		if err := c.installChart(ctx, "--set", "certManager.enabled=true", "--set", "tls.caBundle="); err != nil {
			return err
		}
		if err := c.servingSecretToFiles(ctx); err != nil {
			return err
		}
	case CertExternalCA:
		if err := c.installChart(ctx, "--force-conflicts"); err != nil {
			return err
		}
		if err := c.stopCertManager(); err != nil {
			return err
		}
		kube, err := c.Client()
		if err != nil {
			return err
		}
		for _, name := range []string{c.Release + "-ca", c.Release + "-tls"} {
			if err := kube.CoreV1().Secrets(c.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	default:
		return fmt.Errorf("cert mode %q: want %q, %q or external-ca", mode, CertSelfSigned, CertManager)
	}
	if _, err := c.update(func(s *Settings) { s.CertMode = mode }); err != nil {
		return err
	}
	if err := c.StartEverynode(ctx); err != nil {
		return err
	}
	return c.RestartScheduler(ctx, WithExtender)
}

// SetClientAuth makes everynode ask every caller of its webhook and
// extender port for a client certificate of the harness's client CA, or
// not (the default), and restarts it. kube-apiserver and kube-scheduler
// always present theirs.
func (c *Cluster) SetClientAuth(ctx context.Context, on bool) error {
	if _, err := c.update(func(s *Settings) { s.ClientAuth = on }); err != nil {
		return err
	}
	return c.StartEverynode(ctx)
}

// SetTakeover runs kube-controller-manager without its DaemonSet
// controller and everynode with --takeover (the chart with
// takeover.enabled), so everynode reconciles apps/v1 DaemonSets; or both
// back as UpControlPlane started them.
func (c *Cluster) SetTakeover(ctx context.Context, on bool) error {
	s, err := c.Settings()
	if err != nil {
		return err
	}
	controllers := s.KCMControllers
	if controllers == "" {
		controllers = "*"
	}
	if on {
		controllers = s.TakeoverKCMControllers
		if controllers == "" {
			controllers = "*,-daemonset-controller"
		}
	}
	if err := c.StopEverynode(); err != nil {
		return err
	}
	// Its own credentials again, whatever RestartKCM gave it.
	if err := c.RestartKCM("--controllers="+controllers, "--use-service-account-credentials=false"); err != nil {
		return err
	}
	if _, err := c.update(func(s *Settings) { s.Takeover = on }); err != nil {
		return err
	}
	if err := c.installChart(ctx, "--set", fmt.Sprintf("takeover.enabled=%t", on)); err != nil {
		return err
	}
	return c.StartEverynode(ctx)
}

// RestartAPIServer stops kube-apiserver, waits pause, starts it again with
// the same command line and waits for /readyz. etcd keeps the data.
func (c *Cluster) RestartAPIServer(ctx context.Context, pause time.Duration) error {
	if _, err := c.restartComponent(KubeAPIServer, pause); err != nil {
		return err
	}
	return c.waitAPIServer(ctx)
}

// RestartEtcd stops etcd, waits pause, starts it again with the same
// command line (its data folder with it) and waits for kube-apiserver's
// /readyz, which checks etcd. kube-apiserver keeps running throughout:
// its requests fail or wait while etcd is away, as with a real etcd
// member restart.
func (c *Cluster) RestartEtcd(ctx context.Context, pause time.Duration) error {
	if _, err := c.restartComponent(Etcd, pause); err != nil {
		return err
	}
	return c.waitAPIServer(ctx)
}

// RestartKCM restarts kube-controller-manager with flags (--flag=value)
// in place of its own.
func (c *Cluster) RestartKCM(flags ...string) error {
	_, err := c.restartComponent(KubeControllerManager, 0, flags...)
	return err
}

// RestartScheduler writes kube-scheduler's configuration (with the
// extender trusting the CA of the cert mode, or without an extender) and
// restarts it, then waits for its /readyz.
func (c *Cluster) RestartScheduler(ctx context.Context, ext SchedulerExtender) error {
	s, err := c.Settings()
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(c.KwokDir(), "kubeconfig.yaml")
	ep := endpoint{URL: c.URL(), CAFile: filepath.Join(c.PKI(), "ca.crt")}
	if ext != WithoutExtender {
		if s.RealNode {
			if ep, err = c.serviceEndpoint(ctx); err != nil {
				return err
			}
		} else {
			switch s.CertMode {
			case CertSelfSigned:
				ep = endpoint{URL: fmt.Sprintf("https://localhost:%d", c.Port), CAFile: c.path("self-signed-ca-bundle.crt")}
				if err := c.secretToFile(ctx, c.Release+"-ca", "ca-bundle.crt", ep.CAFile); err != nil {
					return err
				}
			case CertManager:
				ep.CAFile = c.certManagerFile("ca.crt")
				if err := c.secretToFile(ctx, c.Release+"-tls", "ca.crt", ep.CAFile); err != nil {
					return err
				}
			}
		}
	}
	cfg, err := c.schedulerConfig(ext, kubeconfig, ep)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.KwokDir(), "scheduler.yaml"), cfg, 0o644); err != nil {
		return err
	}
	argv, err := c.restartComponent(KubeScheduler, 0)
	if err != nil {
		return err
	}
	port := flagValue(argv, "secure-port")
	if port == "" {
		return fmt.Errorf("kube-scheduler was started with no --secure-port: %q", argv)
	}
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 5 * time.Second}
	// Two minutes: once, under make check's load, a restarted
	// kube-scheduler was not ready after one (the cause is not known).
	err = c.poll(ctx, "kube-scheduler /readyz", time.Second, 2*time.Minute, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:"+port+"/readyz", nil)
		resp, err := insecure.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%w\nkube-scheduler's log:\n%s", err, tail(filepath.Join(c.KwokDir(), "logs", "kube-scheduler.log"), 40))
	}
	return nil
}

// secretToFile writes one key of a Secret of the release's namespace to
// file.
func (c *Cluster) secretToFile(ctx context.Context, secret, key, file string) error {
	kube, err := c.Client()
	if err != nil {
		return err
	}
	s, err := kube.CoreV1().Secrets(c.Namespace).Get(ctx, secret, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if len(s.Data[key]) == 0 {
		return fmt.Errorf("the Secret %s has no %s", secret, key)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return os.WriteFile(file, s.Data[key], 0o600)
}

// cert-manager's controller and cainjector, built from its library module
// by tools.sh (e2e/tools/certmanager), run on this host like everynode,
// with the admin kubeconfig; its CRDs come from the same module.

func (c *Cluster) certManagerFile(name string) string {
	return filepath.Join(c.State, "cert-manager", name)
}

func (c *Cluster) startCertManager(ctx context.Context) error {
	if err := os.MkdirAll(c.certManagerFile(""), 0o755); err != nil {
		return err
	}
	list := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager")
	list.Dir = filepath.Join(c.Root, "e2e", "tools", "certmanager")
	dir, err := list.Output()
	if err != nil {
		return fmt.Errorf("cert-manager's module: %w", err)
	}
	crds := filepath.Join(strings.TrimSpace(string(dir)), "deploy", "crds")
	if err := c.run(ctx, true, c.Tool("kubectl"), "--kubeconfig", c.Kubeconfig(), "apply", "--server-side", "-f", crds); err != nil {
		return err
	}
	for _, part := range []string{"controller", "cainjector"} {
		pidFile := c.certManagerFile(part + ".pid")
		if pid, _ := readPID(pidFile); pid > 0 && alive(pid) {
			continue
		}
		pid, err := startDetached(c.Root, filepath.Join(c.Logs(), "cert-manager-"+part+".log"),
			[]string{c.Tool("cert-manager-" + part), "--kubeconfig", c.Kubeconfig()})
		if err != nil {
			return err
		}
		if err := writePID(pidFile, pid); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) stopCertManager() error {
	for _, part := range []string{"controller", "cainjector"} {
		if err := stopPIDFile(c.certManagerFile(part + ".pid")); err != nil {
			return err
		}
	}
	return nil
}

// servingSecretToFiles waits for cert-manager to issue the serving
// certificate into the Secret <release>-tls and copies it to files: in a
// cluster the Deployment mounts it.
func (c *Cluster) servingSecretToFiles(ctx context.Context) error {
	kube, err := c.Client()
	if err != nil {
		return err
	}
	fmt.Fprint(c.Log, "waiting for cert-manager to issue the serving certificate")
	if err := c.poll(ctx, "the Secret "+c.Release+"-tls", time.Second, 2*time.Minute, func(ctx context.Context) (bool, error) {
		s, err := kube.CoreV1().Secrets(c.Namespace).Get(ctx, c.Release+"-tls", metav1.GetOptions{})
		return err == nil && len(s.Data["tls.key"]) > 0, nil
	}); err != nil {
		return err
	}
	fmt.Fprintln(c.Log, " ok")
	for _, key := range []string{"tls.crt", "tls.key"} {
		if err := c.secretToFile(ctx, c.Release+"-tls", key, c.certManagerFile(key)); err != nil {
			return err
		}
	}
	return nil
}
