package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/webhook/admission"
)

// The webhook routes. The chart's webhook configurations point at these
// paths (chart_test.go holds the chart to them).
const (
	PathMutateDaemonSet   = "/mutate/daemonset"
	PathValidateDaemonSet = "/validate/daemonset"
	PathMutatePod         = "/mutate/pod"
	PathValidatePod       = "/validate/pod"
)

var (
	podKind       = metav1.GroupVersionKind{Group: "", Version: "v1", Kind: "Pod"}
	daemonSetKind = metav1.GroupVersionKind{Group: everynodev1alpha1.GroupName, Version: everynodev1alpha1.SchemeGroupVersion.Version, Kind: "DaemonSet"}
)

// Config is what the webhooks need from the binary.
type Config struct {
	// ControllerUsername is the identity the controller creates pods as,
	// e.g. system:serviceaccount:everynode-system:everynode. Required.
	ControllerUsername string
	// Nodes and Sets are informer listers. Required.
	Nodes NodeGetter
	Sets  SetGetter
	// DryRunner validates pod templates on the API server; nil means the
	// static checks only. Build it with NewPodDryRunnerForConfig.
	DryRunner PodDryRunner
	// DryRunTimeout bounds the dry runs of one request; 0 means
	// DefaultDryRunTimeout.
	DryRunTimeout time.Duration
	// SchedulerName, when set, becomes the schedulerName of daemon pods
	// whose template left the default scheduler.
	SchedulerName string
}

// Routes returns the four webhook handlers keyed by their paths, for the
// server to mount.
func Routes(cfg Config) (map[string]http.Handler, error) {
	mutateSet, err := NewDaemonSetDefaulter()
	if err != nil {
		return nil, err
	}
	validateSet, err := NewDaemonSetValidator(cfg.Sets, cfg.DryRunner, cfg.DryRunTimeout)
	if err != nil {
		return nil, err
	}
	mutatePod, err := NewPodMutator(cfg.Nodes, cfg.Sets, WithSchedulerName(cfg.SchedulerName))
	if err != nil {
		return nil, err
	}
	validatePod, err := NewPodValidator(cfg.ControllerUsername, cfg.Sets)
	if err != nil {
		return nil, err
	}
	return map[string]http.Handler{
		PathMutateDaemonSet:   mutateSet,
		PathValidateDaemonSet: validateSet,
		PathMutatePod:         mutatePod,
		PathValidatePod:       validatePod,
	}, nil
}

// NewDaemonSetDefaulter returns the /mutate/daemonset handler.
func NewDaemonSetDefaulter() (*admission.Webhook, error) {
	return admission.New("mutate-daemonset", daemonSetDefaulter{}, daemonSetKind)
}

// NewDaemonSetValidator returns the /validate/daemonset handler. sets
// (optional) enables the warning about overlapping selectors; dryRunner
// (optional, see Config) validates the pod template as a pod; timeout 0
// means DefaultDryRunTimeout.
func NewDaemonSetValidator(sets SetGetter, dryRunner PodDryRunner, timeout time.Duration) (*admission.Webhook, error) {
	if timeout < 0 {
		return nil, fmt.Errorf("validate-daemonset: negative dry-run timeout %s", timeout)
	}
	if timeout == 0 {
		timeout = DefaultDryRunTimeout
	}
	return admission.New("validate-daemonset", &daemonSetValidator{sets: sets, dryRunner: dryRunner, dryRunTimeout: timeout}, daemonSetKind)
}

// PodMutatorOption configures NewPodMutator.
type PodMutatorOption func(*podMutator)

// WithSchedulerName makes the pod mutator set schedulerName on daemon pods
// whose template did not choose a scheduler (empty or default-scheduler),
// for clusters that run a second kube-scheduler with the everynode
// extender. An empty name changes nothing.
func WithSchedulerName(name string) PodMutatorOption {
	return func(m *podMutator) { m.schedulerName = name }
}

// NewPodMutator returns the /mutate/pod handler.
func NewPodMutator(nodes NodeGetter, sets SetGetter, opts ...PodMutatorOption) (*admission.Webhook, error) {
	if nodes == nil || sets == nil {
		return nil, errors.New("mutate-pod: node and set listers are required")
	}
	m := &podMutator{nodes: nodes, sets: sets}
	for _, opt := range opts {
		opt(m)
	}
	return admission.New("mutate-pod", m, podKind)
}

// NewPodValidator returns the /validate/pod handler. controllerUsername is
// the only identity allowed to create daemon pods.
func NewPodValidator(controllerUsername string, sets SetGetter) (*admission.Webhook, error) {
	if controllerUsername == "" {
		return nil, errors.New("validate-pod: the controller's username is required")
	}
	if sets == nil {
		return nil, errors.New("validate-pod: a set lister is required")
	}
	return admission.New("validate-pod", &podValidator{controllerUsername: controllerUsername, sets: sets}, podKind)
}
