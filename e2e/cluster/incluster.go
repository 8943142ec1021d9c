package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// installOnRealNode installs the chart as a user does: no external.url,
// everynode's own image (BuildImages) in the chart's Deployment, on the
// real node, its webhooks and extender reached through the chart's
// Service and its certificate self-signed (the chart's default). Then
// kube-scheduler, which runs on this host and has no cluster DNS, is
// pointed at the Service's ClusterIP, checking the certificate against
// the Service's name.
//
// The Deployment is kept to the real node: on a kwok node its pods would
// be Running with made-up addresses that no packet may be sent to.
func (c *Cluster) installOnRealNode(ctx context.Context) error {
	s, err := c.Settings()
	if err != nil {
		return err
	}
	kube, err := c.Client()
	if err != nil {
		return err
	}
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", c.Namespace, err)
	}
	start := time.Now()
	c.say("installing the everynode chart on the real node (image %s:%s, webhooks and extender through the Service)", EverynodeImage, EverynodeE2ETag)
	argv := append([]string{c.Tool("helm"), "upgrade", "--install", c.Release, filepath.Join(c.Root, "charts", "everynode"),
		"--namespace", c.Namespace, "--kubeconfig", c.Kubeconfig(),
		"--set", "image.repository=" + EverynodeImage,
		"--set", "image.tag=" + EverynodeE2ETag,
		"--set", `nodeSelector.kubernetes\.io/hostname=` + RealNodeName,
		// The chart's second scheduler, when a scenario turns it on: the
		// image built here, on the real node too.
		"--set", "scheduler.image.repository=" + strings.Split(SchedulerImage, ":")[0],
		"--set", "scheduler.image.tag=" + strings.Split(SchedulerImage, ":")[1],
		"--set", `scheduler.nodeSelector.kubernetes\.io/hostname=` + RealNodeName,
		"--wait", "--timeout", "3m"}, s.HelmArgs...)
	if err := c.run(ctx, true, argv...); err != nil {
		return fmt.Errorf("%w\n%s", err, c.describeEverynodePods(ctx))
	}
	fmt.Fprintf(c.Log, "chart installed, everynode's Deployment Ready in %s\n", time.Since(start).Round(100*time.Millisecond))
	if _, err := c.update(func(s *Settings) { s.CertMode = CertSelfSigned }); err != nil {
		return err
	}
	return c.RestartScheduler(ctx, WithExtender)
}

// serviceEndpoint is the extender behind the chart's Service: its
// ClusterIP (kube-proxy's rules on this host lead to the pods), the
// certificate's name, and the CA of the cert mode: everynode's own from
// the Secret <release>-ca, or cert-manager's from <release>-tls.
func (c *Cluster) serviceEndpoint(ctx context.Context) (endpoint, error) {
	s, err := c.Settings()
	if err != nil {
		return endpoint{}, err
	}
	kube, err := c.Client()
	if err != nil {
		return endpoint{}, err
	}
	svc, err := kube.CoreV1().Services(c.Namespace).Get(ctx, c.Release, metav1.GetOptions{})
	if err != nil {
		return endpoint{}, fmt.Errorf("everynode's Service: %w", err)
	}
	ep := endpoint{
		URL:        fmt.Sprintf("https://%s:443", svc.Spec.ClusterIP),
		CAFile:     c.path("self-signed-ca-bundle.crt"),
		ServerName: fmt.Sprintf("%s.%s.svc", c.Release, c.Namespace),
	}
	secret, key := c.Release+"-ca", "ca-bundle.crt"
	if s.CertMode == CertManager {
		ep.CAFile, secret, key = c.certManagerFile("ca.crt"), c.Release+"-tls", "ca.crt"
	}
	return ep, c.secretToFile(ctx, secret, key, ep.CAFile)
}

// setCertModeInCluster switches the chart on the real node between its
// self-signed certificates and cert-manager's (run on this host, as
// SetCertMode's), with helm upgrade as a user would, then points
// kube-scheduler at the mode's CA. The Deployment rolls to mount the new
// Secret.
func (c *Cluster) setCertModeInCluster(ctx context.Context, mode CertMode) error {
	chart := filepath.Join(c.Root, "charts", "everynode")
	upgrade := func(certManager bool) error {
		return c.run(ctx, true, c.Tool("helm"), "upgrade", c.Release, chart, "--namespace", c.Namespace, "--kubeconfig", c.Kubeconfig(),
			"--reuse-values", "--set", fmt.Sprintf("certManager.enabled=%v", certManager), "--wait", "--timeout", "3m")
	}
	switch mode {
	case CertManager:
		if err := c.startCertManager(ctx); err != nil {
			return err
		}
		if err := upgrade(true); err != nil {
			return err
		}
	case CertSelfSigned:
		if err := upgrade(false); err != nil {
			return err
		}
		if err := c.stopCertManager(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("cert mode %q: the real node's chart is self-signed or cert-manager's", mode)
	}
	if _, err := c.update(func(s *Settings) { s.CertMode = mode }); err != nil {
		return err
	}
	return c.RestartScheduler(ctx, WithExtender)
}

// describeEverynodePods says where everynode's pods are, for an install
// that did not become Ready.
func (c *Cluster) describeEverynodePods(ctx context.Context) string {
	kube, err := c.Client()
	if err != nil {
		return err.Error()
	}
	pods, err := kube.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	out := "everynode's pods:\n"
	for _, p := range pods.Items {
		out += fmt.Sprintf("  %s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			out += fmt.Sprintf(" %s ready=%v restarts=%d", cs.Name, cs.Ready, cs.RestartCount)
			if w := cs.State.Waiting; w != nil {
				out += fmt.Sprintf(" waiting %s: %s", w.Reason, w.Message)
			}
			if t := cs.LastTerminationState.Terminated; t != nil {
				out += fmt.Sprintf(" last exit %d %s", t.ExitCode, t.Reason)
			}
		}
		out += "\n"
	}
	return out + "kubelet's log: " + filepath.Join(c.Logs(), "kubelet.log") + "\n"
}
