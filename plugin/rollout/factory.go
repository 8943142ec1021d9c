package rollout

import (
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"

	"everynode.io/everynode/client/clientset/versioned"
)

// Factory gives the commands their clients and the namespace to work in.
// The plugin implements it over cli-runtime's ConfigFlags (so --kubeconfig,
// --context and -n behave as in kubectl); tests implement it over the fake
// clientsets.
type Factory interface {
	// Namespace is the namespace from -n, or else from the kubeconfig
	// context, or else "default".
	Namespace() (string, error)
	// EverynodeClient returns a client for everynode.io resources.
	EverynodeClient() (versioned.Interface, error)
	// AppsClient returns a client for the apps/v1 group, where
	// ControllerRevisions live. Only that group: the full clientset would
	// add some twenty megabytes to the plugin for nothing.
	AppsClient() (appsv1client.AppsV1Interface, error)
}
