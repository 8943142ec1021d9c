package plugin

import (
	"fmt"
	"io"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"everynode.io/everynode/client/clientset/versioned"
)

// userAgent names the plugin in the API server's audit log and metrics.
const userAgent = "kubectl-everynode"

// configFactory implements rollout.Factory and explain.Factory over cli-runtime's ConfigFlags,
// so the kubeconfig is loaded and overridden exactly as kubectl does.
type configFactory struct {
	flags *genericclioptions.ConfigFlags
	// warnings prints the API server's warnings (deprecations, admission
	// warnings) as kubectl does: "Warning: ..." on stderr, each once,
	// rather than as klog lines.
	warnings rest.WarningHandler
}

func newConfigFactory(flags *genericclioptions.ConfigFlags, errOut io.Writer) *configFactory {
	return &configFactory{flags: flags, warnings: rest.NewWarningWriter(errOut, rest.WarningWriterOptions{Deduplicate: true})}
}

func (f *configFactory) Namespace() (string, error) {
	ns, _, err := f.flags.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

func (f *configFactory) restConfig() (*rest.Config, error) {
	cfg, err := f.flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	rest.AddUserAgent(cfg, userAgent)
	cfg.WarningHandler = f.warnings
	return cfg, nil
}

func (f *configFactory) EverynodeClient() (versioned.Interface, error) {
	c, err := newClient(f, "everynode", versioned.NewForConfig)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (f *configFactory) AppsClient() (appsv1client.AppsV1Interface, error) {
	c, err := newClient(f, "apps/v1", appsv1client.NewForConfig)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (f *configFactory) CoreClient() (corev1client.CoreV1Interface, error) {
	c, err := newClient(f, "core/v1", corev1client.NewForConfig)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// newClient makes one client from the plugin's REST config; what names it
// in the error. The callers turn a failure into a nil interface, not a
// typed nil pointer.
func newClient[C any](f *configFactory, what string, newForConfig func(*rest.Config) (C, error)) (C, error) {
	var zero C
	cfg, err := f.restConfig()
	if err != nil {
		return zero, err
	}
	c, err := newForConfig(cfg)
	if err != nil {
		return zero, fmt.Errorf("%s client: %w", what, err)
	}
	return c, nil
}
