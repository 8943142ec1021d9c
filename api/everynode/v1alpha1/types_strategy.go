package v1alpha1

// The update strategy of a set (spec.updateStrategy): upstream's fields,
// and everynode's partitions, canaries, pause, in-place updates and
// rollout failure policy.

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// DaemonSetUpdateStrategy indicates the strategy that the DaemonSet
// controller will use to perform updates. It includes any additional
// parameters necessary to perform the update for the indicated strategy.
//
// The type rule is upstream's NotSupported error on spec.updateStrategy,
// reported as Invalid. A RollingUpdate strategy without rollingUpdate is
// not refused, unlike upstream (whose defaulting never lets it reach
// validation): no schema default can depend on type, and readers take the
// absent values from package placement.
//
// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.type in ['RollingUpdate', 'OnDelete']",message="supported values: \"RollingUpdate\", \"OnDelete\""
type DaemonSetUpdateStrategy struct {
	// Type of daemon set update. Can be "RollingUpdate" or "OnDelete". Default is RollingUpdate.
	// +optional
	// +kubebuilder:default=RollingUpdate
	Type appsv1.DaemonSetUpdateStrategyType `json:"type,omitempty"`

	// Rolling update config params. Present only if type = "RollingUpdate".
	// +optional
	RollingUpdate *RollingUpdateDaemonSet `json:"rollingUpdate,omitempty"`
}

// RollingUpdateDaemonSet is the spec to control the desired behavior of a
// daemon set rolling update: the fields of apps/v1, then everynode's own.
//
// A value is non-zero as upstream's getIntOrPercentValue reads it: a
// percent by its number, any other string by strconv.Atoi (0 when that
// fails).
//
// +kubebuilder:validation:XValidation:rule="!((has(self.maxUnavailable) && (type(self.maxUnavailable) == int ? self.maxUnavailable != 0 : self.maxUnavailable.matches('^([+-]?[0-9]*[1-9][0-9]*|[0-9]*[1-9][0-9]*%)$'))) && (has(self.maxSurge) && (type(self.maxSurge) == int ? self.maxSurge != 0 : self.maxSurge.matches('^([+-]?[0-9]*[1-9][0-9]*|[0-9]*[1-9][0-9]*%)$'))))",message="may not be set when maxUnavailable is non-zero",fieldPath=".maxSurge"
// +kubebuilder:validation:XValidation:rule="(has(self.maxUnavailable) && (type(self.maxUnavailable) == int ? self.maxUnavailable != 0 : self.maxUnavailable.matches('^([+-]?[0-9]*[1-9][0-9]*|[0-9]*[1-9][0-9]*%)$'))) || (has(self.maxSurge) && (type(self.maxSurge) == int ? self.maxSurge != 0 : self.maxSurge.matches('^([+-]?[0-9]*[1-9][0-9]*|[0-9]*[1-9][0-9]*%)$')))",message="cannot be 0 when maxSurge is 0",fieldPath=".maxUnavailable",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="!has(self.podUpdatePolicy) || self.podUpdatePolicy != 'InPlaceIfPossible' || !has(self.maxSurge) || !(type(self.maxSurge) == int ? self.maxSurge != 0 : self.maxSurge.matches('^([+-]?[0-9]*[1-9][0-9]*|[0-9]*[1-9][0-9]*%)$'))",message="must be 0 when podUpdatePolicy is InPlaceIfPossible",fieldPath=".maxSurge"
// +kubebuilder:validation:XValidation:rule="!has(self.inPlaceGatePolicy) || !has(self.inPlaceReadinessGate) || self.inPlaceGatePolicy == (self.inPlaceReadinessGate ? 'Always' : 'Never')",messageExpression="'disagrees with the deprecated inPlaceReadinessGate: ' + (self.inPlaceReadinessGate ? 'true' : 'false') + ' means ' + (self.inPlaceReadinessGate ? 'Always' : 'Never') + '; remove inPlaceReadinessGate'",fieldPath=".inPlaceGatePolicy"
type RollingUpdateDaemonSet struct {
	// The maximum number of DaemonSet pods that can be unavailable during the
	// update. Value can be an absolute number (ex: 5) or a percentage of total
	// number of DaemonSet pods at the start of the update (ex: 10%). Absolute
	// number is calculated from percentage by rounding up.
	// This cannot be 0 if MaxSurge is 0
	// Default value is 1.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:default=1
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",messageExpression="type(self) == int ? \"must be greater than or equal to 0\" : \"a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')\""
	// +kubebuilder:validation:XValidation:rule="type(self) == int || !self.matches('^[0-9]+%$') || self.matches('^0*([0-9]{1,2}|100)%$')",message="must not be greater than 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// The maximum number of nodes with an existing available DaemonSet pod that
	// can have an updated DaemonSet pod during during an update.
	// Value can be an absolute number (ex: 5) or a percentage of desired pods (ex: 10%).
	// This can not be 0 if MaxUnavailable is 0.
	// Absolute number is calculated from percentage by rounding up to a minimum of 1.
	// Default value is 0.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:default=0
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",messageExpression="type(self) == int ? \"must be greater than or equal to 0\" : \"a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')\""
	// +kubebuilder:validation:XValidation:rule="type(self) == int || !self.matches('^[0-9]+%$') || self.matches('^0*([0-9]{1,2}|100)%$')",message="must not be greater than 100%"
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`

	// Partition keeps that many eligible nodes (an absolute number, or a
	// percentage of desired pods rounded up) on their old revision: the update
	// stops when all other nodes run the new one. Nodes are kept in name order
	// from the end, so the choice is stable. Default 0: update every node.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",messageExpression="type(self) == int ? \"must be greater than or equal to 0\" : \"a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')\""
	// +kubebuilder:validation:XValidation:rule="type(self) == int || !self.matches('^[0-9]+%$') || self.matches('^0*([0-9]{1,2}|100)%$')",message="must not be greater than 100%"
	Partition *intstr.IntOrString `json:"partition,omitempty"`

	// NodeSelector, when set, limits the update to nodes whose labels match
	// it (a canary by node label); pods on other nodes stay on their revision.
	// New nodes always get the newest revision.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// Paused stops replacing pods. Nodes that have no pod still get one of the
	// newest revision.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// PodUpdatePolicy says how the rolling update moves a pod to the new
	// revision. Recreate (the default, and upstream's only way) deletes the
	// pod and creates a new one. InPlaceIfPossible patches the images of a
	// running pod when they are all that changed between its revision's
	// template and the new one; the kubelet then restarts only those
	// containers, and the pod keeps its UID, IP and volumes. Any other
	// change recreates. maxSurge must be 0 with InPlaceIfPossible.
	// +optional
	// +kubebuilder:validation:Enum=Recreate;InPlaceIfPossible
	PodUpdatePolicy PodUpdatePolicy `json:"podUpdatePolicy,omitempty"`

	// InPlaceGatePolicy says, with InPlaceIfPossible, which of the set's
	// pods carry the readiness gate of condition type
	// everynode.io/in-place-update-ready and which in-place updates close
	// it. The controller sets the condition False before it patches a
	// pod's images and True once the new containers run and are ready, so
	// the pod leaves Service endpoints before its containers stop, not
	// after. Each of these writes is a request of its own, beside the
	// patch; and a pod created with the gate costs one more (no kubelet
	// sets a gate's condition).
	//
	//   - Always (the default): every new pod gets the gate, and every
	//     update closes it: gate False, patch, gate True, three requests
	//     per pod.
	//   - Never: no new pod gets the gate; an update is the patch alone,
	//     one request per pod.
	//   - IfServed: the gate only where it protects traffic. A new pod gets
	//     it when a Service of its namespace selects its labels as the pod
	//     is made. An update closes it only on a pod that some EndpointSlice
	//     lists (an endpoint whose targetRef is the pod, ready or not); any
	//     other pod gets the patch alone, one request, and its gate
	//     condition stays True, not written again (the pod still counts as
	//     unavailable until its new containers are ready). If an
	//     EndpointSlice lists the pod after its patch went out, while its
	//     new containers are not ready yet, the controller closes the gate
	//     when it sees the slice and opens it once they are; a container
	//     the kubelet stopped before that may have had traffic.
	//
	// A running pod's gates cannot change. A pod without the gate (made
	// before the set updated in place, under Never, or under IfServed
	// before a Service selected it) is updated in place without one: it
	// counts as unavailable until its new containers are ready, but
	// Services send it traffic until the kubelet reports them not ready. A
	// pod with the gate under Never is updated in place too, its gate not
	// closed. Pods get the gate, or lose it, when they are next recreated.
	//
	// Unset, the deprecated inPlaceReadinessGate decides: true is Always,
	// false is Never; neither set is Always.
	// +optional
	// +kubebuilder:validation:Enum=Always;Never;IfServed
	InPlaceGatePolicy InPlaceGatePolicy `json:"inPlaceGatePolicy,omitempty"`

	// InPlaceReadinessGate is the older form of inPlaceGatePolicy: true is
	// Always, false is Never. Deprecated: use inPlaceGatePolicy. Setting
	// both is refused unless they agree.
	// +optional
	InPlaceReadinessGate *bool `json:"inPlaceReadinessGate,omitempty"`

	// OnFailure makes a rollout stop itself when the pods it updated fail:
	// crash loops, images that never pull, pods that never become ready. Unset:
	// the rollout goes on as upstream's does, held back only by
	// maxUnavailable.
	// +optional
	OnFailure *RolloutFailurePolicy `json:"onFailure,omitempty"`
}

// PodUpdatePolicy is how a rolling update moves one pod to a new revision.
type PodUpdatePolicy string

const (
	// PodUpdateRecreate deletes the old pod and creates a new one.
	PodUpdateRecreate PodUpdatePolicy = "Recreate"
	// PodUpdateInPlaceIfPossible patches the pod's container images when
	// nothing else changed, and recreates it otherwise.
	PodUpdateInPlaceIfPossible PodUpdatePolicy = "InPlaceIfPossible"
)

// InPlaceGatePolicy is which pods of a set that updates in place carry the
// in-place readiness gate, and which updates close it.
type InPlaceGatePolicy string

const (
	// InPlaceGateAlways gives every new pod the gate and closes it for
	// every in-place update.
	InPlaceGateAlways InPlaceGatePolicy = "Always"
	// InPlaceGateNever gives no new pod the gate and closes no gate.
	InPlaceGateNever InPlaceGatePolicy = "Never"
	// InPlaceGateIfServed gives a new pod the gate when a Service selects
	// it, and closes the gate only of a pod an EndpointSlice lists.
	InPlaceGateIfServed InPlaceGatePolicy = "IfServed"
)

// RolloutFailureAction is what a rollout does when its updated pods fail.
type RolloutFailureAction string

const (
	// RolloutFailurePause stops replacing pods, as rollingUpdate.paused does
	// (nodes without a pod still get one), until `kubectl everynode rollout
	// resume` or a new template.
	RolloutFailurePause RolloutFailureAction = "Pause"
	// RolloutFailureRollback puts the template of the newest revision that
	// was available on every node back, as `kubectl everynode rollout undo`
	// would, and rolls that out. Without such a revision it pauses.
	RolloutFailureRollback RolloutFailureAction = "Rollback"
)

// RolloutFailurePolicy says when a rollout has failed and what it does then.
// A pod of the update revision is failing when its containers restarted
// more than maxRestarts times within restartWindowSeconds of its creation,
// or when it is not available progressDeadlineSeconds after its creation.
// The rollout has failed when failedPods pods are failing.
type RolloutFailurePolicy struct {
	// Action is Pause (the default) or Rollback.
	// +optional
	// +kubebuilder:validation:Enum=Pause;Rollback
	// +kubebuilder:default=Pause
	Action RolloutFailureAction `json:"action,omitempty"`

	// FailedPods is how many failing pods of the update revision stop the
	// rollout. Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="must be at least 1"
	FailedPods *int32 `json:"failedPods,omitempty"`

	// MaxRestarts is how many container restarts an updated pod may have
	// within restartWindowSeconds of its creation before it counts as
	// failing. Defaults to 3.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:XValidation:rule="self >= 0",message="must be greater than or equal to 0"
	MaxRestarts *int32 `json:"maxRestarts,omitempty"`

	// RestartWindowSeconds bounds the restarts maxRestarts counts: restarts
	// of a pod older than this no longer make it fail. Defaults to 600.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="must be at least 1"
	RestartWindowSeconds *int32 `json:"restartWindowSeconds,omitempty"`
}
