package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Per-node sizing (spec.nodeSizing): named containers' requests and
// limits worked out from each node's allocatable. The template stays
// apps/v1's; the sized values live only on the pods, so they are not part
// of the revision (a pod is not old because its node is big), and a change
// of a node's allocatable or of the rule resizes pods in place.

// ContainerSizing sizes one container of the template per node.
type ContainerSizing struct {
	// Name of a container, or of a restartable init container (a sidecar),
	// of the pod template.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// Resources sized for the container, at most one entry per resource.
	// +listType=map
	// +listMapKey=resource
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Resources []ResourceSizing `json:"resources"`
}

// ResourceSizing sizes one resource of a container from the node's
// allocatable amount of it.
//
// cpu and memory are resized in place when they change. An extended
// resource (one the node's allocatable lists, such as a device plugin's)
// cannot be resized in place, by the API's rules: a change recreates the
// pod, its requests and limits are whole numbers and equal, so only
// requests may be given. A node whose allocatable does not list the
// resource keeps the template's value for it.
type ResourceSizing struct {
	// Resource is the resource's name: cpu, memory, or an extended
	// resource such as example.com/gpu.
	Resource corev1.ResourceName `json:"resource"`

	// Requests is the container's request of the resource.
	Requests ResourceShare `json:"requests"`

	// Limits is the container's limit of the resource, never below its
	// request (validation checks that for every node). Unset, the
	// template's limit stays, and then requests.max is required and must
	// not exceed it.
	// +optional
	Limits *ResourceShare `json:"limits,omitempty"`
}

// ResourceShare is a fraction of a node's allocatable, clamped to
// [min, max], then rounded down: cpu to whole millicores, memory to whole
// mebibytes (bytes below 1Mi), extended resources to whole units. The
// webhook checks min <= max (a CEL rule over two quantities costs more
// than the CRD's budget allows).
type ResourceShare struct {
	// Fraction of the node's allocatable, a decimal in (0, 1] such as
	// "0.05".
	// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]*([.][0-9]+)?$') && isQuantity(self) && quantity(self).isGreaterThan(quantity('0')) && quantity(self).compareTo(quantity('1')) <= 0",message="must be a decimal greater than 0 and at most 1, such as \"0.05\""
	// +kubebuilder:validation:MaxLength=16
	Fraction string `json:"fraction"`

	// Min is the least the share may be.
	// +optional
	Min *resource.Quantity `json:"min,omitempty"`

	// Max is the most the share may be.
	// +optional
	Max *resource.Quantity `json:"max,omitempty"`
}

// NodeSizingStatus counts a set's pods by how their sizes stand.
type NodeSizingStatus struct {
	// Sized pods run the resources the rule gives their node.
	// +optional
	Sized int32 `json:"sized,omitempty"`
	// Resizing pods are being resized in place: asked and not yet
	// reported done by their kubelet.
	// +optional
	Resizing int32 `json:"resizing,omitempty"`
	// Waiting pods differ from the rule and wait for the resize budget.
	// +optional
	Waiting int32 `json:"waiting,omitempty"`
	// DoesNotFit counts the nodes on which the rule asks more than the
	// node's allocatable (its min is above it): their pods keep their size
	// and a new pod there stays Pending. The NodeSizing condition names
	// them.
	// +optional
	DoesNotFit int32 `json:"doesNotFit,omitempty"`
}
