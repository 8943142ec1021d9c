package v1alpha1

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// DaemonSet runs one copy of a pod on every eligible node, like apps/v1
// DaemonSet: a manifest written for apps/v1 works after changing only its
// apiVersion.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=daemonsets,singular=daemonset,shortName=eds,scope=Namespaced
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredNumberScheduled`
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=`.status.currentNumberScheduled`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.numberReady`
// +kubebuilder:printcolumn:name="Up-To-Date",type=integer,JSONPath=`.status.updatedNumberScheduled`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.numberAvailable`
// +kubebuilder:printcolumn:name="Node Selector",type=string,JSONPath=`.spec.template.spec.nodeSelector`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DaemonSet struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// The desired behavior of this daemon set.
	// +optional
	Spec DaemonSetSpec `json:"spec,omitempty"`

	// The current status of this daemon set. It may lag the spec; read
	// observedGeneration to know which spec it describes.
	// +optional
	Status DaemonSetStatus `json:"status,omitempty"`
}

// DaemonSetSpec is the specification of a daemon set: the fields of apps/v1
// DaemonSetSpec, then everynode's own.
//
// The x-kubernetes-validations below are the rules of upstream
// ValidateDaemonSetSpec that CEL can check, with the field paths and
// messages of webhook/daemonset_validation.go, so they hold where no
// webhook runs (kube-system, an outage). Being rules on the spec object,
// the API server reports them with no value ("Invalid value: <message>")
// where the webhook prints the value; webhook/crd_test.go holds the two
// side by side. The selector rules ignore a selector that
// LabelSelectorAsSelector would refuse (bad operator, In without values):
// the webhook reports those.
//
// +kubebuilder:validation:XValidation:rule="has(self.selector) == has(oldSelf.selector) && (!has(self.selector) || self.selector == oldSelf.selector)",message="field is immutable",fieldPath=".selector"
// +kubebuilder:validation:XValidation:rule="!has(self.selector) || (has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || (has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0)",message="empty selector is invalid for daemonset",fieldPath=".selector"
// +kubebuilder:validation:XValidation:rule="!has(self.selector) || (has(self.selector.matchExpressions) && !self.selector.matchExpressions.all(e, e.operator in ['In', 'NotIn'] ? has(e.values) && size(e.values) > 0 : e.operator in ['Exists', 'DoesNotExist'] && (!has(e.values) || size(e.values) == 0))) || ((!has(self.selector.matchLabels) || self.selector.matchLabels.all(k, has(self.template.metadata) && has(self.template.metadata.labels) && k in self.template.metadata.labels && self.template.metadata.labels[k] == self.selector.matchLabels[k])) && (!has(self.selector.matchExpressions) || self.selector.matchExpressions.all(e, (has(self.template.metadata) && has(self.template.metadata.labels) && e.key in self.template.metadata.labels) ? (e.operator == 'In' ? self.template.metadata.labels[e.key] in e.values : e.operator == 'NotIn' ? !(self.template.metadata.labels[e.key] in e.values) : e.operator == 'Exists') : e.operator in ['NotIn', 'DoesNotExist'])))",message="`selector` does not match template `labels`",fieldPath=".template.metadata.labels"
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec) || !has(self.template.spec.activeDeadlineSeconds)",message="activeDeadlineSeconds in DaemonSet is not Supported",fieldPath=".template.spec.activeDeadlineSeconds",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="!has(self.progressDeadlineSeconds) || self.progressDeadlineSeconds <= 0 || self.progressDeadlineSeconds > (has(self.minReadySeconds) ? self.minReadySeconds : 0)",message="must be greater than minReadySeconds",fieldPath=".progressDeadlineSeconds"
type DaemonSetSpec struct {
	// A label query over pods that are managed by the daemon set.
	// Must match in order to be controlled.
	// It must match the pod template's labels.
	// More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors
	Selector *metav1.LabelSelector `json:"selector"`

	// An object that describes the pod that will be created.
	// The DaemonSet will create exactly one copy of this pod on every node
	// that matches the template's node selector (or on every node if no node
	// selector is specified).
	// The only allowed template.spec.restartPolicy value is "Always".
	Template corev1.PodTemplateSpec `json:"template"`

	// An update strategy to replace existing DaemonSet pods with new pods.
	// +optional
	// +kubebuilder:default={type: RollingUpdate, rollingUpdate: {maxUnavailable: 1, maxSurge: 0}}
	UpdateStrategy DaemonSetUpdateStrategy `json:"updateStrategy,omitempty"`

	// The minimum number of seconds for which a newly created DaemonSet pod should
	// be ready without any of its container crashing, for it to be considered
	// available. Defaults to 0 (pod will be considered available as soon as it
	// is ready).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 0",message="must be greater than or equal to 0"
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`

	// ProgressDeadlineSeconds is how long a rollout may go without progress
	// (no node gaining a pod of the update revision, no pod turning
	// available) before the Progressing condition turns False with reason
	// ProgressDeadlineExceeded, naming the pods that hold it up. It is also
	// how long an updated pod may take to become available before
	// rollingUpdate.onFailure counts it as failing. Defaults to 600, as for
	// Deployments. The rollout itself goes on unless onFailure is set.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self > 0",message="must be greater than 0"
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// The number of old history to retain to allow rollback.
	// This is a pointer to distinguish between explicit zero and not specified.
	// Defaults to 10.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:XValidation:rule="self >= 0",message="must be greater than or equal to 0"
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// NodeOverrides change the pod made for a node that matches an entry's
	// nodeSelector, for per node-pool resources, env or image. Entries apply
	// in order; a later entry wins where two touch the same field.
	// +optional
	// +listType=atomic
	NodeOverrides []NodeOverride `json:"nodeOverrides,omitempty"`

	// NodeReadinessGate, when true, keeps other pods off a node until this
	// daemon's pod is Ready there (enforced by the everynode scheduler
	// extender). Use it for daemons other pods depend on, such as CNI or
	// storage agents. Daemon pods are never held back by it: everynode's go
	// to their own node, and pods of built-in apps DaemonSets (kube-proxy, a
	// CNI agent) may be what the gated daemon needs to turn Ready.
	// +optional
	NodeReadinessGate bool `json:"nodeReadinessGate,omitempty"`

	// StartAfter lists the sets whose pod must be Ready on a node before
	// this set's pod there may start: everynode sets and apps/v1
	// DaemonSets (kube-proxy, a CNI agent). A pod created while one of
	// them is not Ready on its node carries the scheduling gate
	// everynode.io/start-after (kubectl shows it SchedulingGated), which
	// the controller removes once every one of them is Ready there; a pod
	// created when they all are carries no gate. Only pods being created
	// wait: a dependency's rollout never holds back pods already running.
	// A dependency whose nodeSelector, affinity or taints keep it off a
	// node is not waited for on that node. A dependency that does not
	// exist is waited for (it may be created next, as with `kubectl apply
	// -f dir/`) and reported by the StartOrderBroken condition; remove the
	// entry to stop waiting. Cycles are refused by the validating webhook;
	// one it could not see (closed later, or in a namespace the webhooks
	// skip) is reported by StartOrderBroken and not waited on, so that no
	// node deadlocks.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	StartAfter []StartDependency `json:"startAfter,omitempty"`

	// NodeLifecycle adds to the taints and conditions by which the rolling
	// update tells a node that is unreachable, leaving or shutting down
	// from one that serves. Such nodes take no part in the update: their
	// pods are not replaced and count neither against maxUnavailable nor
	// as progress; a shutting-down node gets no new pod at all. The
	// defaults hold without it:
	//   - unreachable: the node.kubernetes.io/unreachable or not-ready
	//     taint, or Ready False or Unknown for unreachableAfterSeconds;
	//   - leaving: the karpenter.sh/disrupted or
	//     ToBeDeletedByClusterAutoscaler taint, a node being deleted, a
	//     cordoned node with condition DrainInProgress or Drained, or
	//     condition MaintenancePlanned or MaintenanceInProgress;
	//   - shutting down: condition GracefulNodeShutdownInProgress.
	// A node that turns unreachable within unreachableFailureWindowSeconds
	// of receiving the update revision is not skipped: it counts as a
	// failing pod for rollingUpdate.onFailure, since the revision may be
	// what took it down. Nothing says a node is gone before
	// kube-controller-manager's node-monitor grace period (40-50 s by
	// default) has passed, so this stops a revision that takes its nodes
	// down only if the rollout has not moved on by then: give such sets a
	// minReadySeconds longer than that grace.
	// +optional
	NodeLifecycle *NodeLifecycle `json:"nodeLifecycle,omitempty"`

	// NodeSizing sizes named containers' requests and limits on each node
	// from the node's allocatable: a fraction of it, clamped to a min and
	// a max. The values go on the pods only, not into the revision: a
	// change of the rule, or of a node's allocatable, resizes the running
	// pods in place (the pods/resize subresource, the same UID), at most
	// maxUnavailable of them in flight, and recreates a pod only where its
	// kubelet refuses the resize (PodResizePending Infeasible), the API
	// refuses it, or an extended resource changes. The sizes apply after
	// nodeOverrides, so they win for the resources they size.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	NodeSizing []ContainerSizing `json:"nodeSizing,omitempty"`
}

// NodeOverride is a change to the pod template for the nodes that match
// NodeSelector.
type NodeOverride struct {
	// NodeSelector selects the nodes, by their labels, this override applies to.
	NodeSelector *metav1.LabelSelector `json:"nodeSelector"`

	// Patch is a strategic merge patch applied to the pod template
	// (metadata and spec) for matching nodes; containers merge by name.
	// Example: {"spec":{"containers":[{"name":"agent","resources":{"limits":{"memory":"1Gi"}}}]}}
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Patch runtime.RawExtension `json:"patch"`
}

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

// DaemonSetStatus represents the current status of a daemon set: the fields
// of apps/v1 DaemonSetStatus, then everynode's own.
type DaemonSetStatus struct {
	// The number of nodes that are running at least 1
	// daemon pod and are supposed to run the daemon pod.
	CurrentNumberScheduled int32 `json:"currentNumberScheduled"`

	// The number of nodes that are running the daemon pod, but are
	// not supposed to run the daemon pod.
	NumberMisscheduled int32 `json:"numberMisscheduled"`

	// The total number of nodes that should be running the daemon
	// pod (including nodes correctly running the daemon pod).
	DesiredNumberScheduled int32 `json:"desiredNumberScheduled"`

	// numberReady is the number of nodes that should be running the daemon pod and have one
	// or more of the daemon pod running with a Ready Condition.
	NumberReady int32 `json:"numberReady"`

	// The most recent generation observed by the daemon set controller.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// The total number of nodes that are running updated daemon pod
	// +optional
	UpdatedNumberScheduled int32 `json:"updatedNumberScheduled,omitempty"`

	// The number of nodes that should be running the
	// daemon pod and have one or more of the daemon pod running and
	// available (ready for at least spec.minReadySeconds)
	// +optional
	NumberAvailable int32 `json:"numberAvailable,omitempty"`

	// The number of nodes that should be running the
	// daemon pod and have none of the daemon pod running and available
	// (ready for at least spec.minReadySeconds)
	// +optional
	NumberUnavailable int32 `json:"numberUnavailable,omitempty"`

	// Count of hash collisions for the DaemonSet. The DaemonSet controller
	// uses this field as a collision avoidance mechanism when it needs to
	// create the name for the newest ControllerRevision.
	// +optional
	CollisionCount *int32 `json:"collisionCount,omitempty"`

	// Represents the latest available observations of a DaemonSet's current
	// state: Progressing and Available, with reasons that say why a rollout
	// waits (nodes NotReady, pods Pending, crash loops, paused).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// UpdateRevision is the controller-revision-hash of the newest revision
	// (the one new pods are made from).
	// +optional
	UpdateRevision string `json:"updateRevision,omitempty"`

	// AvailableRevision is the controller-revision-hash of the newest
	// revision that ran available on every node: where
	// rollingUpdate.onFailure's Rollback goes back to.
	// +optional
	AvailableRevision string `json:"availableRevision,omitempty"`

	// ProgressTime is when the rollout last made progress: a node gained a
	// pod of the update revision, a pod turned available, the update
	// revision changed or the rollout was resumed. The progress deadline
	// counts from it.
	// +optional
	ProgressTime *metav1.Time `json:"progressTime,omitempty"`

	// RolloutFailure is set when the rollout stopped itself
	// (rollingUpdate.onFailure). A paused failure is cleared by `kubectl
	// everynode rollout resume` or a new template.
	// +optional
	RolloutFailure *RolloutFailure `json:"rolloutFailure,omitempty"`

	// CurrentRevision is the controller-revision-hash of the oldest revision
	// that still runs on some node; it equals UpdateRevision when the rollout
	// is complete.
	// +optional
	CurrentRevision string `json:"currentRevision,omitempty"`

	// SkippedNodes counts, by class, the nodes of the set that the rolling
	// update leaves out (spec.nodeLifecycle); absent when every node
	// serves. The Progressing condition names them.
	// +optional
	SkippedNodes *SkippedNodes `json:"skippedNodes,omitempty"`

	// NodeSizing counts the pods by how their sizes stand against
	// spec.nodeSizing; absent without it.
	// +optional
	NodeSizing *NodeSizingStatus `json:"nodeSizing,omitempty"`
}

// RolloutFailure records a rollout that stopped itself.
type RolloutFailure struct {
	// Revision is the controller-revision-hash of the revision that failed.
	Revision string `json:"revision"`
	// Action is what the rollout did: Pause or Rollback.
	Action RolloutFailureAction `json:"action"`
	// RolledBackTo is the controller-revision-hash the set went back to
	// (Action Rollback).
	// +optional
	RolledBackTo string `json:"rolledBackTo,omitempty"`
	// Time is when the rollout stopped.
	Time metav1.Time `json:"time"`
	// Message names the failing pods, their nodes and container states.
	Message string `json:"message"`
}

// DaemonSetList is a collection of daemon sets.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type DaemonSetList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// A list of daemon sets.
	Items []DaemonSet `json:"items"`
}
