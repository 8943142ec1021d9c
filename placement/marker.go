package placement

import (
	"fmt"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// markerState is the daemon-pod marker of this process: name is the
// extended resource every daemon pod requests one of (WithDaemonResource),
// as configured at start, "" when the marker is off; off is set when the
// controller found that kube-scheduler does not ignore it and turned it
// off (TurnOffDaemonResource).
//
// kube-scheduler calls an extender with managedResources only for pods
// that request one of them (in requests or limits), so with the marker
// and a scheduler configured by `everynode scheduler-config` ordinary pods
// never wait for everynode: a hung everynode costs them nothing. The
// scheduler must ignore the resource (ignoredByScheduler), since no node
// advertises it; the kubelet drops extended resources its node does not
// advertise before admitting a pod (removeMissingExtendedResources), so
// the request costs nothing on the node.
type markerState struct {
	name string
	off  bool
}

// marker is read by every pod the controller and the pod webhook make and
// written by the controller's worker that turns it off, so it is atomic.
// nil is the same as a marker configured off.
var marker atomic.Pointer[markerState]

// SetDaemonResource turns the daemon-pod marker on with name (an extended
// resource name, checked by ValidateDaemonResource), or off with "", and
// forgets an earlier TurnOffDaemonResource. Called once, at start, before
// any pod is made (and by tests).
func SetDaemonResource(name string) { marker.Store(&markerState{name: name}) }

// DaemonResource returns the marker's resource name, "" when it is off:
// configured off, or turned off by TurnOffDaemonResource.
func DaemonResource() string {
	if m := marker.Load(); m != nil && !m.off {
		return m.name
	}
	return ""
}

// ConfiguredDaemonResource returns the marker's resource name as
// configured at start, even after TurnOffDaemonResource: the name the pods
// made before the fallback request.
func ConfiguredDaemonResource() string {
	if m := marker.Load(); m != nil {
		return m.name
	}
	return ""
}

// DaemonResourceFallback reports whether TurnOffDaemonResource turned a
// configured marker off.
func DaemonResourceFallback() bool {
	m := marker.Load()
	return m != nil && m.off
}

// TurnOffDaemonResource turns the configured marker off for the rest of
// this process: the controller calls it when it sees a daemon pod that
// kube-scheduler left Pending for want of the marker (an upgrade that kept
// the old scheduler configuration, or a scheduler with no extender at
// all), since otherwise no new daemon pod would ever schedule. It reports
// whether this call turned it off, so that the caller says so once.
//
// The fallback is not persisted, on purpose. A restart, or another replica
// winning the leader Lease, starts with the marker on again, which is how
// the protection comes back once the scheduler is fixed: nothing to reset
// by hand. Where the scheduler is still not fixed, the new leader pays for
// it with the pods it makes before it sees the first of them unschedulable
// (one scheduling attempt each, then a recreate), and falls back again. A
// replica that is not the leader keeps the marker on in its pod webhook,
// but that webhook only sees daemon pods the controller did not make whole
// (the chart's matchConditions): the leader deletes those as it deletes
// its own when they are stuck.
func TurnOffDaemonResource() bool {
	for {
		m := marker.Load()
		if m == nil || m.name == "" || m.off {
			return false
		}
		if marker.CompareAndSwap(m, &markerState{name: m.name, off: true}) {
			return true
		}
	}
}

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
	daemonResource := DaemonResource()
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

// StuckForDaemonResource reports whether pod is a daemon pod that will never
// schedule as it is: Pending, bound to no node, not being deleted,
// requesting resource (the marker, "" never matches) and left unschedulable
// by kube-scheduler for want of it (UnschedulableForDaemonResource). Once
// the marker is off, deleting such a pod is the whole fix: the controller
// makes it again without the marker.
func StuckForDaemonResource(pod *corev1.Pod, resource string) bool {
	if resource == "" || pod.DeletionTimestamp != nil || pod.Spec.NodeName != "" || pod.Status.Phase != corev1.PodPending {
		return false
	}
	return requests(pod, corev1.ResourceName(resource)) && UnschedulableForDaemonResource(pod, resource)
}

// requests reports whether a container of pod requests or limits name.
func requests(pod *corev1.Pod, name corev1.ResourceName) bool {
	for i := range pod.Spec.Containers {
		r := &pod.Spec.Containers[i].Resources
		if _, ok := r.Requests[name]; ok {
			return true
		}
		if _, ok := r.Limits[name]; ok {
			return true
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

// ReadinessGateMode returns the gate mode that SetStartupTaint,
// SetDaemonResource and TurnOffDaemonResource leave in effect.
func ReadinessGateMode() GateMode {
	switch {
	case startupTaint != "":
		return GateStartupTaint
	case DaemonResource() != "":
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
		"everynode scheduler-config --daemon-resource=\"\"), at the cost of every pod waiting for everynode when it hangs", DaemonResource())
}
