package placement

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
)

func qp(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

func share(fraction, min, max string) everynodev1alpha1.ResourceShare {
	s := everynodev1alpha1.ResourceShare{Fraction: fraction}
	if min != "" {
		s.Min = qp(min)
	}
	if max != "" {
		s.Max = qp(max)
	}
	return s
}

func TestShare(t *testing.T) {
	for name, tc := range map[string]struct {
		resource    corev1.ResourceName
		share       everynodev1alpha1.ResourceShare
		allocatable string
		want        string
	}{
		"cpu, exact":                     {corev1.ResourceCPU, share("0.05", "", ""), "4", "200m"},
		"cpu rounds down to millicores":  {corev1.ResourceCPU, share("0.333", "", ""), "1", "333m"},
		"cpu of millicores rounds down":  {corev1.ResourceCPU, share("0.1", "", ""), "3999m", "399m"},
		"cpu, the whole node":            {corev1.ResourceCPU, share("1", "", ""), "192", "192"},
		"cpu clamped up to min":          {corev1.ResourceCPU, share("0.01", "100m", ""), "2", "100m"},
		"cpu clamped down to max":        {corev1.ResourceCPU, share("0.05", "100m", "2"), "192", "2"},
		"cpu between the bounds":         {corev1.ResourceCPU, share("0.05", "100m", "2"), "16", "800m"},
		"memory rounds down to Mi":       {corev1.ResourceMemory, share("0.1", "", ""), "16Gi", "1638Mi"},
		"memory in bytes below a Mi":     {corev1.ResourceMemory, share("0.5", "", ""), "1000", "500"},
		"memory of decimal units":        {corev1.ResourceMemory, share("0.5", "", ""), "2G", "953Mi"},
		"memory min kept as written":     {corev1.ResourceMemory, share("0.001", "128Mi", ""), "8Gi", "128Mi"},
		"extended resource, whole units": {"example.com/gpu", share("0.5", "", ""), "3", "1"},
		"extended resource, min":         {"example.com/gpu", share("0.1", "1", ""), "4", "1"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Share(tc.resource, tc.share, resource.MustParse(tc.allocatable))
			if err != nil {
				t.Fatal(err)
			}
			if want := resource.MustParse(tc.want); got.Cmp(want) != 0 || got.String() != tc.want {
				t.Errorf("Share = %s, want %s", got.String(), tc.want)
			}
		})
	}
}

func TestParseFraction(t *testing.T) {
	for _, ok := range []string{"0.05", "1", "1.0", ".5", "0.000001"} {
		if _, err := ParseFraction(ok); err != nil {
			t.Errorf("ParseFraction(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"0", "0.0", "-0.1", "+0.5", "1.01", "2", "5m", "1e-2", "half", "", "1."} {
		if _, err := ParseFraction(bad); err == nil {
			t.Errorf("ParseFraction(%q) accepted", bad)
		}
	}
}

func sizedNode(cpu, memory string, extra ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
	}}}
	for i := 0; i+1 < len(extra); i += 2 {
		n.Status.Allocatable[corev1.ResourceName(extra[i])] = resource.MustParse(extra[i+1])
	}
	return n
}

var agentRule = []everynodev1alpha1.ContainerSizing{{Name: "agent", Resources: []everynodev1alpha1.ResourceSizing{
	{Resource: corev1.ResourceCPU, Requests: share("0.02", "100m", "4")},
	{Resource: corev1.ResourceMemory, Requests: share("0.01", "128Mi", "2Gi"), Limits: ptrShare(share("0.02", "256Mi", "4Gi"))},
	{Resource: "example.com/gpu", Requests: share("0.5", "", "")},
}}}

func ptrShare(s everynodev1alpha1.ResourceShare) *everynodev1alpha1.ResourceShare { return &s }

func TestSizeOfThreeNodes(t *testing.T) {
	for name, tc := range map[string]struct {
		node *corev1.Node
		want string
	}{
		"small":        {sizedNode("2", "4Gi"), "agent: requests cpu=100m memory=128Mi, limits memory=256Mi"},
		"medium":       {sizedNode("32", "64Gi"), "agent: requests cpu=640m memory=655Mi, limits memory=1310Mi"},
		"big with gpu": {sizedNode("192", "1536Gi", "example.com/gpu", "8"), "agent: requests cpu=3840m example.com/gpu=4 memory=2Gi, limits example.com/gpu=4 memory=4Gi"},
	} {
		t.Run(name, func(t *testing.T) {
			size := SizeOf(agentRule, tc.node)
			if got := DescribeSize(size); got != tc.want {
				t.Errorf("size = %q, want %q", got, tc.want)
			}
			if !size.Fits() {
				t.Errorf("does not fit: %v", size.DoesNotFit)
			}
		})
	}
}

func TestSizeOfDoesNotFit(t *testing.T) {
	rules := []everynodev1alpha1.ContainerSizing{{Name: "agent", Resources: []everynodev1alpha1.ResourceSizing{
		{Resource: corev1.ResourceCPU, Requests: share("0.5", "4", "")},
	}}}
	size := SizeOf(rules, sizedNode("2", "4Gi"))
	if size.Fits() || len(size.DoesNotFit) != 1 || size.DoesNotFit[0] != "agent: cpu 4 > allocatable 2" {
		t.Errorf("DoesNotFit = %q", size.DoesNotFit)
	}
	if size = SizeOf(rules, sizedNode("8", "4Gi")); !size.Fits() {
		t.Errorf("fits on 8 cores, got %q", size.DoesNotFit)
	}
}

func daemonPodWithAgent() *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "agent", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
		}},
		{Name: "other"},
	}}}
}

func TestApplySizeAndResizeNeed(t *testing.T) {
	pod := daemonPodWithAgent()
	size := SizeOf(agentRule, sizedNode("32", "64Gi"))
	if ResizeNeed(pod, size) != NeedResize {
		t.Fatalf("a template-sized pod needs a resize")
	}
	ApplySize(pod, size)
	c := pod.Spec.Containers[0].Resources
	if cpu := c.Requests[corev1.ResourceCPU]; cpu.String() != "640m" {
		t.Errorf("cpu request %s", cpu.String())
	}
	if eph := c.Requests[corev1.ResourceEphemeralStorage]; eph.String() != "1Gi" {
		t.Errorf("a resource the rule does not size changed: %s", eph.String())
	}
	if cpu := c.Limits[corev1.ResourceCPU]; cpu.String() != "8" {
		t.Errorf("the template's cpu limit changed: %s", cpu.String())
	}
	if pod.Spec.Containers[1].Resources.Requests != nil {
		t.Errorf("another container was sized")
	}
	if n := ResizeNeed(pod, size); n != NeedNothing {
		t.Errorf("after ApplySize: need %v", n)
	}
	// The same values written another way ("0.64" for 640m) are equal.
	pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("0.64")
	if n := ResizeNeed(pod, size); n != NeedNothing {
		t.Errorf("640m written as 0.64: need %v", n)
	}
	if n := ResizeNeed(pod, SizeOf(agentRule, sizedNode("64", "64Gi"))); n != NeedResize {
		t.Errorf("more cpu: need %v, want a resize", n)
	}
	if n := ResizeNeed(pod, SizeOf(agentRule, sizedNode("32", "64Gi", "example.com/gpu", "2"))); n != NeedRecreate {
		t.Errorf("a gpu appears: need %v, want a recreate", n)
	}
}

func TestResizePatchHasCPUAndMemoryOnly(t *testing.T) {
	size := SizeOf(agentRule, sizedNode("192", "1536Gi", "example.com/gpu", "8"))
	got := string(ResizePatch(daemonPodWithAgent(), size))
	want := `{"spec":{"containers":[{"name":"agent","resources":{"requests":{"cpu":"3840m","memory":"2Gi"},"limits":{"memory":"4Gi"}}}]}}`
	if got != want {
		t.Errorf("patch\n%s\nwant\n%s", got, want)
	}
	// A sidecar is an init container: its entry goes there.
	sidecar := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "agent", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}}}
	got = string(ResizePatch(sidecar, size))
	want = `{"spec":{"initContainers":[{"name":"agent","resources":{"requests":{"cpu":"3840m","memory":"2Gi"},"limits":{"memory":"4Gi"}}}]}}`
	if got != want {
		t.Errorf("sidecar patch\n%s\nwant\n%s", got, want)
	}
}

func TestResizeStateOf(t *testing.T) {
	size := SizeOf(agentRule, sizedNode("32", "64Gi"))
	pod := daemonPodWithAgent()
	ApplySize(pod, size)
	if s, _ := ResizeStateOf(pod, size); s != ResizeDone {
		t.Errorf("no status resources reported: %v, want done", s)
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent", Resources: &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")},
	}}}
	if s, _ := ResizeStateOf(pod, size); s != ResizeInFlight {
		t.Errorf("status behind spec: %v, want in flight", s)
	}
	pod.Status.ContainerStatuses[0].Resources = pod.Spec.Containers[0].Resources.DeepCopy()
	if s, _ := ResizeStateOf(pod, size); s != ResizeDone {
		t.Errorf("status caught up: %v, want done", s)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible, Message: "Node didn't have enough capacity"}}
	if s, msg := ResizeStateOf(pod, size); s != ResizeInfeasible || msg == "" {
		t.Errorf("Infeasible: %v %q", s, msg)
	}
	pod.Status.Conditions[0].Reason = corev1.PodReasonDeferred
	if s, _ := ResizeStateOf(pod, size); s != ResizeInFlight {
		t.Errorf("Deferred: %v, want in flight", s)
	}
}

func TestValidateNodeSizing(t *testing.T) {
	tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "agent", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		}}},
		InitContainers: []corev1.Container{
			{Name: "sidecar", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
			{Name: "setup"},
		},
	}}
	rule := func(container string, r ...everynodev1alpha1.ResourceSizing) []everynodev1alpha1.ContainerSizing {
		return []everynodev1alpha1.ContainerSizing{{Name: container, Resources: r}}
	}
	cpu := func(req everynodev1alpha1.ResourceShare, lim *everynodev1alpha1.ResourceShare) everynodev1alpha1.ResourceSizing {
		return everynodev1alpha1.ResourceSizing{Resource: corev1.ResourceCPU, Requests: req, Limits: lim}
	}
	for name, tc := range map[string]struct {
		rules []everynodev1alpha1.ContainerSizing
		want  string // "" when valid; else a part of the first error
	}{
		"valid":                       {rule("agent", cpu(share("0.05", "100m", "2"), ptrShare(share("0.1", "200m", "4")))), ""},
		"a sidecar":                   {rule("sidecar", cpu(share("0.05", "", ""), nil)), ""},
		"an init container that ends": {rule("setup", cpu(share("0.05", "", ""), nil)), `spec.nodeSizing[0].name: Not found: "setup"`},
		"no such container":           {rule("nope", cpu(share("0.05", "", ""), nil)), `spec.nodeSizing[0].name: Not found: "nope"`},
		"fraction 0":                  {rule("agent", cpu(share("0", "", ""), nil)), "requests.fraction: Invalid value"},
		"fraction above 1":            {rule("agent", cpu(share("1.5", "", ""), nil)), "requests.fraction: Invalid value"},
		"min above max":               {rule("agent", cpu(share("0.05", "2", "1"), nil)), "requests.min: Invalid value: \"2\": must not be above max (1)"},
		"limit fraction below":        {rule("agent", cpu(share("0.1", "", ""), ptrShare(share("0.05", "", "")))), "limits.fraction: Invalid value"},
		"limit min below":             {rule("agent", cpu(share("0.1", "1", ""), ptrShare(share("0.2", "", "")))), "limits.min: Invalid value: \"unset\""},
		"limit max below":             {rule("agent", cpu(share("0.1", "", "2"), ptrShare(share("0.2", "", "1")))), "limits.max: Invalid value: \"1\""},
		"limit max, request has none": {rule("agent", cpu(share("0.1", "", ""), ptrShare(share("0.2", "", "1")))), "below requests.max (unset)"},
		"template limit needs a max":  {rule("agent", everynodev1alpha1.ResourceSizing{Resource: corev1.ResourceMemory, Requests: share("0.1", "", "")}), "requests.max: Required value: the template's limit of memory is 1Gi"},
		"template limit bounds max":   {rule("agent", everynodev1alpha1.ResourceSizing{Resource: corev1.ResourceMemory, Requests: share("0.1", "", "2Gi")}), "above the template's limit of memory (1Gi)"},
		"template limit, max within":  {rule("agent", everynodev1alpha1.ResourceSizing{Resource: corev1.ResourceMemory, Requests: share("0.1", "", "512Mi")}), ""},
		"not a resource it sizes":     {rule("agent", everynodev1alpha1.ResourceSizing{Resource: corev1.ResourceEphemeralStorage, Requests: share("0.1", "", "")}), "Unsupported value: \"ephemeral-storage\""},
		"extended resource":           {rule("agent", everynodev1alpha1.ResourceSizing{Resource: "example.com/gpu", Requests: share("0.5", "1", "")}), ""},
		"extended resource, limits":   {rule("agent", everynodev1alpha1.ResourceSizing{Resource: "example.com/gpu", Requests: share("0.5", "", ""), Limits: ptrShare(share("0.5", "", ""))}), "limits: Forbidden"},
		"extended resource, half":     {rule("agent", everynodev1alpha1.ResourceSizing{Resource: "example.com/gpu", Requests: share("0.5", "500m", "")}), "whole units"},
		"a container twice":           {append(rule("agent", cpu(share("0.05", "", ""), nil)), rule("agent", cpu(share("0.05", "", ""), nil))...), "spec.nodeSizing[1].name: Duplicate value"},
		"a resource twice":            {rule("agent", cpu(share("0.05", "", ""), nil), cpu(share("0.05", "", ""), nil)), "resources[1].resource: Duplicate value"},
	} {
		t.Run(name, func(t *testing.T) {
			errs := ValidateNodeSizing(tc.rules, tmpl, field.NewPath("spec", "nodeSizing"))
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("refused: %v", errs.ToAggregate())
			case tc.want != "" && len(errs) == 0:
				t.Errorf("accepted, want %q", tc.want)
			case tc.want != "" && !strings.Contains(errs.ToAggregate().Error(), tc.want):
				t.Errorf("errors %q, want %q", errs.ToAggregate(), tc.want)
			}
		})
	}
}

// TestLimitsNeverBelowRequests checks the claim ValidateNodeSizing rests
// on: a rule it accepts gives a limit at or above the request on every
// node, small or big.
func TestLimitsNeverBelowRequests(t *testing.T) {
	req, lim := share("0.1", "100m", "2"), share("0.1", "150m", "3")
	if errs := limitsNotBelowRequests(req, lim, field.NewPath("limits")); len(errs) > 0 {
		t.Fatal(errs)
	}
	for m := int64(1); m <= 256000; m = m*3 + 1 {
		a := *resource.NewMilliQuantity(m, resource.DecimalSI)
		r, _ := Share(corev1.ResourceCPU, req, a)
		l, _ := Share(corev1.ResourceCPU, lim, a)
		if l.Cmp(r) < 0 {
			t.Fatalf("allocatable %s: limit %s below request %s", a.String(), l.String(), r.String())
		}
	}
}

func TestResizeSupported(t *testing.T) {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	for name, tc := range map[string]struct {
		statuses []corev1.ContainerStatus
		want     bool
	}{
		"no status yet":               {nil, true},
		"running, resources reported": {[]corev1.ContainerStatus{{State: running, Resources: &corev1.ResourceRequirements{}}}, true},
		"running, no resources":       {[]corev1.ContainerStatus{{State: running}}, false},
		"waiting, no resources":       {[]corev1.ContainerStatus{{}}, true},
	} {
		if got := ResizeSupported(&corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: tc.statuses}}); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}
