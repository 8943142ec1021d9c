package placement

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/inf.v0"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	resourcehelper "k8s.io/component-helpers/resource"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

// Per-node sizing (spec.nodeSizing) as every part reads it: validation
// (ValidateNodeSizing), the controller stamping new pods (NewPodFor) and
// resizing running ones (SizeOf, ResizeNeed, ResizePatch), the extender
// naming a node the rule cannot fit, and `kubectl everynode explain`
// printing each node's size. The sizes are never part of a revision: the
// template is the same on every node, so a pod is not old because its
// node is big (revision.Hash does not read spec.nodeSizing).

// mebi is the unit memory is rounded down to, once a share reaches it: a
// pod's memory request reads in Mi rather than in bytes.
const mebi = 1 << 20

// ContainerSize is what the rule gives one container on one node: only
// the resources the rule sizes, and only those the node lists.
type ContainerSize struct {
	Name     string
	Requests corev1.ResourceList
	Limits   corev1.ResourceList
}

// NodeSize is the rule's answer for one node.
type NodeSize struct {
	Containers []ContainerSize
	// DoesNotFit says, per resource, where a container's request is above
	// the node's allocatable ("agent: cpu 4 > allocatable 2"); empty when
	// the pod can fit. A pod that cannot fit is never resized to that size.
	DoesNotFit []string
}

// Fits reports whether every sized request is within the node's
// allocatable.
func (s NodeSize) Fits() bool { return len(s.DoesNotFit) == 0 }

// SizeOf works out the rule's sizes on node. rules must be valid
// (ValidateNodeSizing); a fraction that does not parse sizes nothing.
func SizeOf(rules []everynodev1alpha1.ContainerSizing, node *corev1.Node) NodeSize {
	var out NodeSize
	alloc := node.Status.Allocatable
	for _, c := range rules {
		cs := ContainerSize{Name: c.Name}
		for _, r := range c.Resources {
			a, ok := alloc[r.Resource]
			if !ok {
				// The node does not have it: the template's value stays.
				continue
			}
			req, err := Share(r.Resource, r.Requests, a)
			if err != nil {
				continue
			}
			if cs.Requests == nil {
				cs.Requests = corev1.ResourceList{}
			}
			cs.Requests[r.Resource] = req
			switch {
			case r.Limits != nil:
				lim, err := Share(r.Resource, *r.Limits, a)
				if err != nil {
					continue
				}
				if cs.Limits == nil {
					cs.Limits = corev1.ResourceList{}
				}
				cs.Limits[r.Resource] = lim
			case !IsResizable(r.Resource):
				// The API wants an extended resource's limit equal to its
				// request.
				if cs.Limits == nil {
					cs.Limits = corev1.ResourceList{}
				}
				cs.Limits[r.Resource] = req.DeepCopy()
			}
			if req.Cmp(a) > 0 {
				out.DoesNotFit = append(out.DoesNotFit, fmt.Sprintf("%s: %s %s > allocatable %s", c.Name, r.Resource, req.String(), a.String()))
			}
		}
		out.Containers = append(out.Containers, cs)
	}
	return out
}

// Share is a ResourceShare of allocatable for the named resource: the
// fraction of allocatable rounded down (cpu to millicores, memory to
// mebibytes once it reaches one, anything else to whole units), then
// clamped to min and max, which are taken as they are written.
func Share(name corev1.ResourceName, s everynodev1alpha1.ResourceShare, allocatable resource.Quantity) (resource.Quantity, error) {
	frac, err := ParseFraction(s.Fraction)
	if err != nil {
		return resource.Quantity{}, err
	}
	d := new(inf.Dec).Mul(allocatable.AsDec(), frac)
	var q resource.Quantity
	switch name {
	case corev1.ResourceCPU:
		// Scale 3: the unscaled value is in millicores.
		d.Round(d, 3, inf.RoundDown)
		m, _ := d.Unscaled()
		q = *resource.NewMilliQuantity(m, resource.DecimalSI)
	case corev1.ResourceMemory:
		d.Round(d, 0, inf.RoundDown)
		b, _ := d.Unscaled()
		if b >= mebi {
			b -= b % mebi
			q = *resource.NewQuantity(b, resource.BinarySI)
		} else {
			q = *resource.NewQuantity(b, resource.DecimalSI)
		}
	default:
		d.Round(d, 0, inf.RoundDown)
		n, _ := d.Unscaled()
		q = *resource.NewQuantity(n, resource.DecimalSI)
	}
	if s.Min != nil && q.Cmp(*s.Min) < 0 {
		q = s.Min.DeepCopy()
	}
	if s.Max != nil && q.Cmp(*s.Max) > 0 {
		q = s.Max.DeepCopy()
	}
	return q, nil
}

// plainDecimal is what a fraction may look like: digits, with a decimal
// point, no sign, exponent or suffix (the CRD's CEL rule says the same).
var plainDecimal = regexp.MustCompile(`^[0-9]*([.][0-9]+)?$`)

// ParseFraction reads a share's fraction: a decimal greater than 0 and at
// most 1.
func ParseFraction(s string) (*inf.Dec, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil || !plainDecimal.MatchString(s) {
		return nil, fmt.Errorf("%q is not a decimal such as \"0.05\"", s)
	}
	d := q.AsDec()
	if d.Sign() <= 0 || d.Cmp(inf.NewDec(1, 0)) > 0 {
		return nil, fmt.Errorf("%s is not greater than 0 and at most 1", s)
	}
	return d, nil
}

// IsResizable reports whether the API lets a running pod's resource be
// changed through pods/resize: cpu and memory only.
func IsResizable(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory
}

// isExtendedResource is the API's rule for an extended resource's name:
// qualified, with a domain outside kubernetes.io, and not a quota's.
func isExtendedResource(name corev1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, "kubernetes.io/") || strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(s)) == 0
}

// AllocatableChanged reports whether a node update changes what the
// sizing rule reads of it: its allocatable.
func AllocatableChanged(old, cur *corev1.Node) bool {
	if len(old.Status.Allocatable) != len(cur.Status.Allocatable) {
		return true
	}
	for name, q := range cur.Status.Allocatable {
		if o, ok := old.Status.Allocatable[name]; !ok || o.Cmp(q) != 0 {
			return true
		}
	}
	return false
}

// AboveAllocatable names each resource pod requests more of than node's
// allocatable holds in all ("cpu 4 > 2"), sorted: such a pod never fits
// there, whatever is evicted. The requests are the scheduler's
// (component-helpers' PodRequests: containers, init containers and
// overhead). Resources the node does not list are not judged: the
// daemon-pod marker, which the scheduler is told to ignore, among them.
func AboveAllocatable(pod *corev1.Pod, node *corev1.Node) []string {
	var out []string
	for name, want := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
		if have, ok := node.Status.Allocatable[name]; ok && want.Cmp(have) > 0 {
			out = append(out, fmt.Sprintf("%s %s > %s", name, want.String(), have.String()))
		}
	}
	sort.Strings(out)
	return out
}

// ApplySize writes size into pod's containers (and sidecars), in place:
// the sized resources replace the template's, the others stay.
func ApplySize(pod *corev1.Pod, size NodeSize) {
	for _, cs := range size.Containers {
		c := podContainer(&pod.Spec, cs.Name)
		if c == nil {
			continue
		}
		for name, q := range cs.Requests {
			if c.Resources.Requests == nil {
				c.Resources.Requests = corev1.ResourceList{}
			}
			c.Resources.Requests[name] = q.DeepCopy()
		}
		for name, q := range cs.Limits {
			if c.Resources.Limits == nil {
				c.Resources.Limits = corev1.ResourceList{}
			}
			c.Resources.Limits[name] = q.DeepCopy()
		}
	}
}

// podContainer finds a container or a restartable init container by name.
func podContainer(spec *corev1.PodSpec, name string) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if c.Name == name && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			return c
		}
	}
	return nil
}

// DescribeSize is one line for a node's size: "agent: requests cpu=200m
// memory=256Mi, limits memory=512Mi".
func DescribeSize(size NodeSize) string {
	list := func(rl corev1.ResourceList) string {
		names := make([]string, 0, len(rl))
		for n := range rl {
			names = append(names, string(n))
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, n := range names {
			q := rl[corev1.ResourceName(n)]
			parts[i] = n + "=" + q.String()
		}
		return strings.Join(parts, " ")
	}
	var out []string
	for _, cs := range size.Containers {
		s := cs.Name + ": requests " + list(cs.Requests)
		if len(cs.Limits) > 0 {
			s += ", limits " + list(cs.Limits)
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}
