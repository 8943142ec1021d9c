package v1alpha1

// The node-aware additions of a set's spec and status: how its rollout
// reads each node's lifecycle (spec.nodeLifecycle, status.skippedNodes)
// and which sets its pods start after on a node (spec.startAfter).

// NodeLifecycle is a set's additions to the node lifecycle rule.
type NodeLifecycle struct {
	// UnreachableAfterSeconds is how long a node's Ready condition must be
	// False or Unknown, with no taint saying so, before the node counts as
	// unreachable. Defaults to 40.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 0",message="must be greater than or equal to 0"
	UnreachableAfterSeconds *int32 `json:"unreachableAfterSeconds,omitempty"`

	// UnreachableFailureWindowSeconds: a node that turns unreachable within
	// this long after its pod of the update revision arrived counts as a
	// failing pod of that revision, not as a skipped node. 0 turns the
	// check off. Defaults to 300.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 0",message="must be greater than or equal to 0"
	UnreachableFailureWindowSeconds *int32 `json:"unreachableFailureWindowSeconds,omitempty"`

	// LeavingTaints are more taint keys (any effect) that mark a node as
	// leaving, such as your own drain tool's.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	LeavingTaints []string `json:"leavingTaints,omitempty"`

	// LeavingConditions are more node condition types that, when True,
	// mark a node as leaving.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	LeavingConditions []string `json:"leavingConditions,omitempty"`
}

// StartDependency names a set whose pod on a node must be Ready before the
// dependent set's pod there may start.
type StartDependency struct {
	// APIGroup is the dependency's kind: "everynode.io" (the default) for
	// an everynode DaemonSet, "apps" for an apps/v1 DaemonSet.
	// +optional
	// +kubebuilder:validation:Enum=everynode.io;apps
	// +kubebuilder:default=everynode.io
	APIGroup string `json:"apiGroup,omitempty"`

	// Namespace of the dependency; defaults to the set's own.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// Name of the dependency.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SkippedNodes counts a set's nodes that are not serving, by class.
type SkippedNodes struct {
	// Unreachable nodes: the unreachable or not-ready taint, or Ready not
	// True for spec.nodeLifecycle.unreachableAfterSeconds.
	// +optional
	Unreachable int32 `json:"unreachable,omitempty"`
	// Leaving nodes: drained, deleted or in maintenance; they keep their
	// old pod.
	// +optional
	Leaving int32 `json:"leaving,omitempty"`
	// ShuttingDown nodes: GracefulNodeShutdownInProgress; no pod is made
	// there.
	// +optional
	ShuttingDown int32 `json:"shuttingDown,omitempty"`
}
