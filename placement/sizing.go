package placement

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/inf.v0"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
// pod's request reads 1536Mi, not 1610612736.
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

// Need is what it takes to move a pod to its node's size.
type Need int

const (
	// NeedNothing: the pod has the size.
	NeedNothing Need = iota
	// NeedResize: only cpu or memory differ; pods/resize can do it.
	NeedResize
	// NeedRecreate: an extended resource differs, which no resize may
	// change.
	NeedRecreate
)

// ResizeNeed compares the sized resources of pod's spec with size. A
// sized container the pod does not have is not judged: the pod is of
// another template, which the rollout replaces.
func ResizeNeed(pod *corev1.Pod, size NodeSize) Need {
	need := NeedNothing
	for _, cs := range size.Containers {
		c := podContainer(&pod.Spec, cs.Name)
		if c == nil {
			continue
		}
		for _, pair := range [2]struct{ want, have corev1.ResourceList }{{cs.Requests, c.Resources.Requests}, {cs.Limits, c.Resources.Limits}} {
			for name, want := range pair.want {
				if have, ok := pair.have[name]; ok && have.Cmp(want) == 0 {
					continue
				}
				if !IsResizable(name) {
					return NeedRecreate
				}
				need = NeedResize
			}
		}
	}
	return need
}

// ResizeSupported mirrors kube-apiserver's check before it takes a
// resize (isPodResizeRequestSupported): a pod whose running containers'
// statuses report no resources runs under a kubelet that cannot resize,
// and the API refuses the resize ("Pod running on node without support
// for resize"). Every kubelet that resizes reports them from its first
// status on. A pod with no running container may be resized.
func ResizeSupported(pod *corev1.Pod) bool {
	for i := range pod.Status.ContainerStatuses {
		if st := &pod.Status.ContainerStatuses[i]; st.State.Running != nil {
			return st.Resources != nil
		}
	}
	return true
}

// ResizePatch is the strategic merge patch for the pods/resize
// subresource that gives pod's containers their sizes: only the cpu and
// memory the rule sizes, containers (and sidecars, in initContainers)
// merged by name.
func ResizePatch(pod *corev1.Pod, size NodeSize) []byte {
	type resources struct {
		Requests corev1.ResourceList `json:"requests,omitempty"`
		Limits   corev1.ResourceList `json:"limits,omitempty"`
	}
	type container struct {
		Name      string    `json:"name"`
		Resources resources `json:"resources"`
	}
	resizable := func(in corev1.ResourceList) corev1.ResourceList {
		var out corev1.ResourceList
		for name, q := range in {
			if IsResizable(name) {
				if out == nil {
					out = corev1.ResourceList{}
				}
				out[name] = q
			}
		}
		return out
	}
	var containers, sidecars []container
	for _, cs := range size.Containers {
		r := resources{Requests: resizable(cs.Requests), Limits: resizable(cs.Limits)}
		if r.Requests == nil && r.Limits == nil {
			continue
		}
		if isContainer(&pod.Spec, cs.Name) {
			containers = append(containers, container{Name: cs.Name, Resources: r})
		} else if podContainer(&pod.Spec, cs.Name) != nil {
			sidecars = append(sidecars, container{Name: cs.Name, Resources: r})
		}
	}
	spec := map[string]any{}
	if len(containers) > 0 {
		spec["containers"] = containers
	}
	if len(sidecars) > 0 {
		spec["initContainers"] = sidecars
	}
	b, _ := json.Marshal(map[string]any{"spec": spec})
	return b
}

func isContainer(spec *corev1.PodSpec, name string) bool {
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return true
		}
	}
	return false
}

// ResizeState is where a pod's last resize stands, from its status as its
// kubelet reports it.
type ResizeState int

const (
	// ResizeDone: every container runs the resources its spec asks (or
	// the kubelet does not report them, as before resize existed).
	ResizeDone ResizeState = iota
	// ResizeInFlight: asked and not yet actuated, or in progress.
	ResizeInFlight
	// ResizeInfeasible: the kubelet will never do it (PodResizePending,
	// reason Infeasible): only a new pod can have that size.
	ResizeInfeasible
)

// ResizeStateOf reads pod's resize conditions and, for the containers
// size sizes, whether their status resources match their spec.
func ResizeStateOf(pod *corev1.Pod, size NodeSize) (ResizeState, string) {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case corev1.PodResizePending:
			if c.Reason == corev1.PodReasonInfeasible {
				return ResizeInfeasible, c.Message
			}
			return ResizeInFlight, c.Message
		case corev1.PodResizeInProgress:
			return ResizeInFlight, c.Message
		}
	}
	for _, cs := range size.Containers {
		c := podContainer(&pod.Spec, cs.Name)
		if c == nil {
			continue
		}
		st, _ := containerStatus(pod, cs.Name)
		if st == nil || st.Resources == nil {
			continue
		}
		for _, pair := range [2]struct{ spec, status corev1.ResourceList }{{c.Resources.Requests, st.Resources.Requests}, {c.Resources.Limits, st.Resources.Limits}} {
			for name, want := range pair.spec {
				if !IsResizable(name) {
					continue
				}
				if have, ok := pair.status[name]; !ok || have.Cmp(want) != 0 {
					return ResizeInFlight, ""
				}
			}
		}
	}
	return ResizeDone, ""
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

// ValidateNodeSizing checks spec.nodeSizing against the template: what the
// CRD's CEL rules check (fraction, min <= max) again, for clients that
// skip them, and what CEL cannot see: the container exists; a resource
// is cpu, memory or an extended resource; a limit is never below the
// request on any node; without a sized limit, the template's limit bounds
// requests.max; an extended resource is whole, with requests only.
func ValidateNodeSizing(rules []everynodev1alpha1.ContainerSizing, tmpl *corev1.PodTemplateSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, c := range rules {
		cp := fldPath.Index(i)
		if seen[c.Name] {
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		}
		seen[c.Name] = true
		container := podContainer(&tmpl.Spec, c.Name)
		if container == nil {
			errs = append(errs, field.NotFound(cp.Child("name"), c.Name))
		}
		if len(c.Resources) == 0 {
			errs = append(errs, field.Required(cp.Child("resources"), "size at least one resource"))
		}
		seenRes := map[corev1.ResourceName]bool{}
		for j, r := range c.Resources {
			rp := cp.Child("resources").Index(j)
			if seenRes[r.Resource] {
				errs = append(errs, field.Duplicate(rp.Child("resource"), r.Resource))
			}
			seenRes[r.Resource] = true
			extended := isExtendedResource(r.Resource)
			if !IsResizable(r.Resource) && !extended {
				errs = append(errs, field.NotSupported(rp.Child("resource"), r.Resource, []string{"cpu", "memory", "an extended resource such as example.com/gpu"}))
				continue
			}
			errs = append(errs, validateShare(r.Requests, extended, rp.Child("requests"))...)
			if r.Limits != nil {
				if extended {
					errs = append(errs, field.Forbidden(rp.Child("limits"), "an extended resource's limit is its request: give requests only"))
					continue
				}
				errs = append(errs, validateShare(*r.Limits, false, rp.Child("limits"))...)
				errs = append(errs, limitsNotBelowRequests(r.Requests, *r.Limits, rp.Child("limits"))...)
				continue
			}
			if container == nil || extended {
				continue
			}
			if lim, ok := container.Resources.Limits[r.Resource]; ok {
				mp := rp.Child("requests", "max")
				switch {
				case r.Requests.Max == nil:
					errs = append(errs, field.Required(mp, fmt.Sprintf("the template's limit of %s is %s: without limits here, requests.max must keep the request within it", r.Resource, lim.String())))
				case r.Requests.Max.Cmp(lim) > 0:
					errs = append(errs, field.Invalid(mp, r.Requests.Max.String(), fmt.Sprintf("above the template's limit of %s (%s): give limits here too, or a lower max", r.Resource, lim.String())))
				}
			}
		}
	}
	return errs
}

// validateShare checks one share on its own.
func validateShare(s everynodev1alpha1.ResourceShare, whole bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if _, err := ParseFraction(s.Fraction); err != nil {
		errs = append(errs, field.Invalid(fldPath.Child("fraction"), s.Fraction, "must be a decimal greater than 0 and at most 1, such as \"0.05\""))
	}
	for _, b := range []struct {
		name string
		q    *resource.Quantity
	}{{"min", s.Min}, {"max", s.Max}} {
		if b.q == nil {
			continue
		}
		if b.q.Sign() < 0 {
			errs = append(errs, field.Invalid(fldPath.Child(b.name), b.q.String(), "must not be negative"))
		}
		if whole && b.q.MilliValue()%1000 != 0 {
			errs = append(errs, field.Invalid(fldPath.Child(b.name), b.q.String(), "an extended resource comes in whole units"))
		}
	}
	if s.Min != nil && s.Max != nil && s.Min.Cmp(*s.Max) > 0 {
		errs = append(errs, field.Invalid(fldPath.Child("min"), s.Min.String(), fmt.Sprintf("must not be above max (%s)", s.Max.String())))
	}
	return errs
}

// limitsNotBelowRequests holds the limit at or above the request on every
// node: the share is a clamp of a rounded product, monotone in the
// fraction, the min and the max, so it is enough that the limit's are
// each at least the request's (an unset min is 0, an unset max unbounded).
func limitsNotBelowRequests(req, lim everynodev1alpha1.ResourceShare, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	rf, err1 := ParseFraction(req.Fraction)
	lf, err2 := ParseFraction(lim.Fraction)
	if err1 == nil && err2 == nil && lf.Cmp(rf) < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("fraction"), lim.Fraction, fmt.Sprintf("below requests.fraction (%s): the limit would be below the request", req.Fraction)))
	}
	if req.Min != nil && (lim.Min == nil || lim.Min.Cmp(*req.Min) < 0) {
		errs = append(errs, field.Invalid(fldPath.Child("min"), quantityOrUnset(lim.Min), fmt.Sprintf("below requests.min (%s): on a small node the limit would be below the request", req.Min.String())))
	}
	if lim.Max != nil && (req.Max == nil || lim.Max.Cmp(*req.Max) < 0) {
		errs = append(errs, field.Invalid(fldPath.Child("max"), lim.Max.String(), fmt.Sprintf("below requests.max (%s): on a big node the limit would be below the request", quantityOrUnset(req.Max))))
	}
	return errs
}

func quantityOrUnset(q *resource.Quantity) string {
	if q == nil {
		return "unset"
	}
	return q.String()
}
