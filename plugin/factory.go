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
	cfg, err := f.restConfig()
	if err != nil {
		return nil, err
	}
	c, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("everynode client: %w", err)
	}
	return c, nil
}

func (f *configFactory) AppsClient() (appsv1client.AppsV1Interface, error) {
	cfg, err := f.restConfig()
	if err != nil {
		return nil, err
	}
	c, err := appsv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("apps/v1 client: %w", err)
	}
	return c, nil
}

func (f *configFactory) CoreClient() (corev1client.CoreV1Interface, error) {
	cfg, err := f.restConfig()
	if err != nil {
		return nil, err
	}
	c, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("core/v1 client: %w", err)
	}
	return c, nil
}
