package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
