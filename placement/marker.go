package placement

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// daemonResource is the extended resource every daemon pod requests one of
// (WithDaemonResource), empty when the marker is off. kube-scheduler calls
// an extender with managedResources only for pods that request one of them
// (in requests or limits), so with the marker and a scheduler configured
// by `everynode scheduler-config` ordinary pods never wait for everynode:
// a hung everynode costs them nothing. The scheduler must ignore the
// resource (ignoredByScheduler), since no node advertises it; the kubelet
// drops extended resources its node does not advertise before admitting
// a pod (removeMissingExtendedResources), so the request costs nothing on
// the node.
var daemonResource string

// SetDaemonResource turns the daemon-pod marker on with name (an extended
// resource name, checked by ValidateDaemonResource), or off with "". Set
// once, at start, before any pod is made: the controller's pods and the
// pod webhook's stamp read it.
func SetDaemonResource(name string) { daemonResource = name }

// DaemonResource returns the marker's resource name, "" when it is off.
func DaemonResource() string { return daemonResource }

// daemonResourceQuantity is what each daemon pod asks for: one. Extended
// resources are whole numbers with limits equal to requests.
var daemonResourceQuantity = resource.MustParse("1")

// ValidateDaemonResource checks that name can be the marker: a resource
// name kube-scheduler accepts in an extender's managedResources and the API
// server in a container's requests, that is an extended resource (a
// domain-qualified name outside kubernetes.io, not prefixed "requests.").
func ValidateDaemonResource(name string) error {
	if name == "" {
		return nil
	}
	if msgs := validation.IsQualifiedName(name); len(msgs) > 0 {
		return fmt.Errorf("%q is not a resource name: %s", name, strings.Join(msgs, "; "))
	}
	// As upstream's IsExtendedResourceName, which kube-scheduler checks
	// managedResources with.
	switch {
	case !strings.Contains(name, "/"):
		return fmt.Errorf("%q is not an extended resource name: it needs a domain, as in %s", name, "everynode.io/daemon")
	case strings.Contains(name, corev1.ResourceDefaultNamespacePrefix):
		return fmt.Errorf("%q is not an extended resource name: the kubernetes.io domain is Kubernetes' own", name)
	case strings.HasPrefix(name, corev1.DefaultResourceRequestsPrefix):
		return fmt.Errorf("%q is not an extended resource name: the prefix %q is for quotas", name, corev1.DefaultResourceRequestsPrefix)
	}
	if msgs := validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix + name); len(msgs) > 0 {
		return fmt.Errorf("%q is not an extended resource name: %s", name, strings.Join(msgs, "; "))
	}
	return nil
}

// WithDaemonResource gives pod's first container a request and a limit of
// one DaemonResource, in place, unless the marker is off or the pod has no
// container. It is idempotent. It is part of the stamp, not of the
// template: the revision hash is the template's, and the in-place update
// patches images only, so a pod made before the marker (or after it is
// turned off) is neither older nor newer than one made with it.
func WithDaemonResource(pod *corev1.Pod) {
	if daemonResource == "" || len(pod.Spec.Containers) == 0 {
		return
	}
	c := &pod.Spec.Containers[0]
	name := corev1.ResourceName(daemonResource)
	if c.Resources.Requests == nil {
		c.Resources.Requests = make(corev1.ResourceList, 1)
	}
	if c.Resources.Limits == nil {
		c.Resources.Limits = make(corev1.ResourceList, 1)
	}
	c.Resources.Requests[name] = daemonResourceQuantity.DeepCopy()
	c.Resources.Limits[name] = daemonResourceQuantity.DeepCopy()
}

// UnschedulableForDaemonResource reports whether the scheduler left pod
// Pending because no node has the marker resource (its message names
// "Insufficient <resource>"): kube-scheduler was not told to ignore it
// (managedResources with ignoredByScheduler), so no daemon pod schedules
// until its configuration is regenerated or the marker is turned off.
// resource is the marker's name; "" never matches.
func UnschedulableForDaemonResource(pod *corev1.Pod, resource string) bool {
	if resource == "" {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
				namesInsufficient(c.Message, resource)
		}
	}
	return false
}

// namesInsufficient reports whether msg, a scheduler's FailedScheduling
// message ("0/3 nodes are available: 3 Insufficient everynode.io/daemon.
// preemption: ..."), says nodes lack resource itself, not a longer name
// that starts with it.
func namesInsufficient(msg, resource string) bool {
	needle := "Insufficient " + resource
	for {
		i := strings.Index(msg, needle)
		if i < 0 {
			return false
		}
		msg = msg[i+len(needle):]
		if msg == "" || strings.IndexByte(".,; ", msg[0]) >= 0 {
			return true
		}
	}
}

// GateMode is how spec.nodeReadinessGate keeps ordinary pods off a node
// in this installation, from everynode serve's flags.
type GateMode string

const (
	// GateStartupTaint: nodes register with the startup taint and the
	// controller removes it (--startup-taint). Works with any scheduler.
	GateStartupTaint GateMode = "startup-taint"
	// GateExtender: the extender fails gated nodes for ordinary pods. Only
	// without the marker, when kube-scheduler calls the extender for every
	// pod, so every pod also waits for a hung everynode.
	GateExtender GateMode = "extender"
	// GateInactive: the marker is on and there is no startup taint, so
	// kube-scheduler sends the extender daemon pods only and nothing holds
	// ordinary pods back.
	GateInactive GateMode = "inactive"
)

// ReadinessGateMode returns the gate mode that SetStartupTaint and
// SetDaemonResource leave in effect.
func ReadinessGateMode() GateMode {
	switch {
	case startupTaint != "":
		return GateStartupTaint
	case daemonResource != "":
		return GateInactive
	default:
		return GateExtender
	}
}

// GateInactiveMessage says why a set's nodeReadinessGate holds nothing
// back in GateInactive mode, and what to do, for a webhook warning, a
// condition and an event.
func GateInactiveMessage() string {
	return fmt.Sprintf("holds no pod back: everynode marks daemon pods with the resource %s (--daemon-resource) so that kube-scheduler "+
		"calls its extender for daemon pods only, and ordinary pods never reach the gate; use the startup-taint gate "+
		"(everynode serve --startup-taint, chart value startupTaint), or turn the marker off (--daemon-resource=\"\" and "+
		"everynode scheduler-config --daemon-resource=\"\"), at the cost of every pod waiting for everynode when it hangs", daemonResource)
}
