package v1alpha1

// Names shared by the controller, the webhooks and the extender. They are part
// of the contract between those parts (shared/DESIGN.md): change them only
// together with the chart's webhook selectors.
const (
	// LabelDaemonPod marks every pod made by the everynode controller. The pod
	// webhooks select on it (objectSelector), so an everynode outage can never
	// block anyone else's pods, and the extender uses it to tell daemon pods
	// from all others in O(1).
	LabelDaemonPod = "everynode.io/daemon-pod"

	// LabelDaemonPodValue is the only value LabelDaemonPod takes.
	LabelDaemonPodValue = "true"

	// DefaultDaemonResource is the extended resource every daemon pod
	// requests one of (placement.WithDaemonResource), so that kube-scheduler
	// calls the extender for daemon pods only: the extender's
	// managedResources names it, and ignoredByScheduler keeps the scheduler
	// from looking for it on nodes. No node advertises it; the kubelet
	// admits a pod whose extended resources its node lacks by dropping
	// them. everynode serve --daemon-resource changes or disables it.
	DefaultDaemonResource = "everynode.io/daemon"

	// AnnotationTargetNode holds the name of the node a daemon pod is made
	// for. The pod webhook turns it into the node-pinning affinity; the
	// extender and the controller read it to know where the pod belongs.
	AnnotationTargetNode = "everynode.io/node-name"

	// AnnotationMadeWhole on a daemon pod says the controller made it whole
	// (placement.NewPodFor): pinned, tolerating, with the set's node
	// overrides and the installation's scheduler name, so /mutate/pod has
	// nothing to add. The chart's MutatingWebhookConfiguration then does not
	// call the webhook for the controller's own creates (matchConditions):
	// one HTTPS round trip less per pod. A pod without it (a replica of an
	// older everynode during an upgrade) still goes through the webhook.
	AnnotationMadeWhole = "everynode.io/made-whole"
	// AnnotationMadeWholeValue is the only value AnnotationMadeWhole takes.
	AnnotationMadeWholeValue = "v1"

	// AnnotationLeaderTerm on a daemon pod is the leader election term the
	// controller created it in: the Lease's leaseTransitions when its
	// replica acquired it. The chart's ValidatingAdmissionPolicy
	// (leader-fence.yaml) refuses a create whose term is older than the
	// Lease's: a leader that hung past its Lease and wakes up cannot add
	// a pod beside the new leader's, however late its request arrives.
	// Set only under leader election.
	AnnotationLeaderTerm = "everynode.io/leader-term"

	// LabelTakeoverProbe marks the apps/v1 DaemonSet that everynode's
	// takeover mode keeps in its own namespace to find out whether
	// kube-controller-manager's DaemonSet controller runs too: everynode
	// never writes its status, so anyone who does is another DaemonSet
	// controller (package takeover). Its value is the probe's round.
	LabelTakeoverProbe = "everynode.io/takeover-probe"

	// AnnotationAdoptUnmarkedPods on a set ("true") asks the controller to
	// adopt the orphaned pods its selector matches that lack the daemon-pod
	// label: the pods of an apps/v1 DaemonSet that `kubectl everynode
	// migrate` orphaned. The controller gives them the label (its pod
	// informer sees no others) and adopts them as any orphan; their
	// revision hash is the set's, so none is replaced.
	AnnotationAdoptUnmarkedPods = "everynode.io/adopt-unmarked-pods"

	// AnnotationChangeCause is copied from the set onto each
	// ControllerRevision, as `kubectl rollout history` expects.
	AnnotationChangeCause = "kubernetes.io/change-cause"

	// AnnotationRestartedAt is what `kubectl everynode rollout restart` sets
	// on the pod template, the same key stock kubectl uses.
	AnnotationRestartedAt = "kubectl.kubernetes.io/restartedAt"

	// AnnotationResumeRevision on a set holds the controller-revision-hash
	// of a revision whose rollout stopped itself and that the user resumed
	// (`kubectl everynode rollout resume` sets it): the controller lets that
	// revision roll out and does not stop it again for failing pods. It is
	// an annotation, not a status field, because it is the user's decision.
	AnnotationResumeRevision = "everynode.io/resume-revision"

	// ConditionInPlaceUpdateReady is the pod condition behind the readiness
	// gate of sets that update in place (rollingUpdate.inPlaceGatePolicy):
	// the controller sets it True on a new pod, False before it patches the
	// pod's images (for the pods the policy closes it on), and True again
	// once the new containers run and are ready. Only the controller
	// writes it.
	ConditionInPlaceUpdateReady = "everynode.io/in-place-update-ready"

	// AnnotationInPlaceUpdate on a pod records its last in-place update, in
	// the same patch that changes its images, as one line of JSON:
	//
	//	{"revision":"6b8f5kx9d","updateTime":"2023-11-14T22:13:20Z","restartCount":3,
	//	 "previousContainers":[{"name":"agent","imageID":"docker.io/library/agent@sha256:...","containerID":"containerd://..."}]}
	//
	// revision is the revision hash the pod moved to; updateTime when the
	// patch was sent (RFC 3339, UTC, to the second); restartCount the pod's
	// restart count, all containers, once the update is done (the count
	// before, plus one per container it restarts); previousContainers, for
	// each container whose image changed and that restarts for it, the
	// imageID and containerID of the container that ran before (absent when
	// the pod's status had none). The update is done when each such
	// container is started and ready and reports another imageID (or, for
	// the same image digest under a new name, another container ID). The
	// rollout's onFailure counts the pod's age from updateTime and its
	// restarts above restartCount. It stays on the pod afterwards; a later
	// in-place update replaces it. Read by placement.ParseInPlaceUpdate,
	// which also reads the text format of releases before the JSON one
	// ("v1 <revision> <unix seconds> <restartCount> <name>=<imageID>,<containerID>..."),
	// for pods updated in place before an upgrade; a later release may stop
	// reading it.
	AnnotationInPlaceUpdate = "everynode.io/in-place-update"

	// SchedulingGateStartAfter is the scheduling gate of a pod made while a
	// dependency of its set (spec.startAfter) is not Ready on its node; the
	// controller removes it once every one is.
	SchedulingGateStartAfter = "everynode.io/start-after"

	// GroupApps and GroupEverynode are the values of
	// spec.startAfter[].apiGroup.
	GroupApps      = "apps"
	GroupEverynode = "everynode.io"
)

// Condition types of DaemonSetStatus.Conditions.
const (
	// ConditionProgressing is True while a rollout moves or has nothing left
	// to do, and False with a reason when it waits on something.
	ConditionProgressing = "Progressing"
	// ConditionAvailable is True when every node that should run the daemon
	// has an available pod of it.
	ConditionAvailable = "Available"
	// ConditionNodesExcluded is True when nodes the set's nodeSelector and
	// affinity select are kept away by taints its pods do not tolerate; its
	// message counts them per taint. It is absent when there are none
	// (nodes the selector leaves out are the user's choice, not news).
	ConditionNodesExcluded = "NodesExcluded"
	// ConditionWebhooksSkipped is True when the set lives in a namespace
	// the everynode webhooks skip (kube-system, kube-node-lease,
	// everynode's own: an outage must never block them) and uses a
	// feature whose checks only a webhook makes; its reason says which, its
	// message what that means. It is absent otherwise. The CRD's schema
	// defaults and CEL rules hold there all the same.
	ConditionWebhooksSkipped = "WebhooksSkipped"
	// ConditionNodeReadinessGateInactive is True when the set asks for
	// spec.nodeReadinessGate but the installation cannot enforce it: the
	// daemon-pod marker is on (everynode serve --daemon-resource), so
	// kube-scheduler sends the extender daemon pods only, and there is no
	// startup taint (--startup-taint). Its message says what to change. It
	// is absent otherwise.
	ConditionNodeReadinessGateInactive = "NodeReadinessGateInactive"
	// ConditionDaemonResourceFallback is True, with reason
	// ReasonDaemonResourceNotIgnored, while the everynode controller no
	// longer marks daemon pods: it was configured with the daemon-pod
	// marker (everynode serve --daemon-resource), saw a daemon pod
	// kube-scheduler left Pending for want of it ("Insufficient
	// everynode.io/daemon": the scheduler's configuration does not ignore
	// it, or has no everynode extender at all), and turned the marker off
	// rather than leave every new daemon pod Pending. It deletes the pods
	// made with the marker that are stuck so (each with a Warning event,
	// within the same request budget and expectations as every other
	// delete), and makes them again without it. The price: kube-scheduler
	// calls the extender for every pod again where its configuration names
	// the extender without managedResources, so every pod of the cluster
	// waits for everynode when it hangs. The message says how to get the
	// protection back: regenerate the scheduler's configuration with
	// `everynode scheduler-config` and restart everynode (or turn the
	// marker off for good, chart value scheduler.daemonResource=""). The
	// fallback lasts as long as the everynode process: a restart or a new
	// leader starts with the marker on and falls back again, after one
	// scheduling attempt of the pods it makes first, if the scheduler is
	// still not fixed. It is absent otherwise; NodeReadinessGateInactive,
	// which assumes the marker, is absent while it is True.
	ConditionDaemonResourceFallback = "DaemonResourceFallback"
	// ConditionStartOrderBroken is True when spec.startAfter names a set
	// that does not exist (ReasonDependencyNotFound: new pods wait for it)
	// or closes a cycle (ReasonDependencyCycle: the sets on the cycle do
	// not wait for each other, so no node deadlocks). The message names
	// the missing sets or the cycle.
	ConditionStartOrderBroken = "StartOrderBroken"
	// ConditionNodeSizingDoesNotFit is True when spec.nodeSizing asks, on
	// some nodes, more than the node's allocatable (a min above it):
	// their pods keep their size, a new pod there stays Pending, and the
	// message names the nodes (ReasonRequestsAboveAllocatable).
	ConditionNodeSizingDoesNotFit = "NodeSizingDoesNotFit"
)

// Reasons of the Progressing and Available conditions. They are API: users,
// `kubectl everynode rollout status` and alerts read them, so they are
// defined here once.
const (
	// ReasonAllPodsAvailable: Available is True.
	ReasonAllPodsAvailable = "AllPodsAvailable"
	// ReasonRolloutComplete: Progressing is True and nothing is left to
	// update (nodes held by partition or a canary selector excepted).
	ReasonRolloutComplete = "RolloutComplete"
	// ReasonRollingUpdate: Progressing is True and pods are being replaced.
	ReasonRollingUpdate = "RollingUpdate"
	// ReasonOnDelete: Progressing is True; old pods are replaced only when
	// someone deletes them (updateStrategy OnDelete).
	ReasonOnDelete = "OnDelete"
	// ReasonPaused: Progressing is False because rollingUpdate.paused.
	ReasonPaused = "Paused"
	// ReasonInvalidUpdateStrategy: Progressing is False because a field of
	// updateStrategy does not parse (validation refuses it, so only a set
	// stored around validation gets here); no old pod is replaced until it
	// is fixed, and the message says which field.
	ReasonInvalidUpdateStrategy = "InvalidUpdateStrategy"
	// ReasonRolloutFailing: Progressing is False because the pods the
	// rollout updated fail (rollingUpdate.onFailure) and it paused itself;
	// or, with a rollback, the reason of the Warning event and of
	// status.rolloutFailure.
	ReasonRolloutFailing = "RolloutFailing"
	// ReasonRolledBack: Progressing is True, rolling the set back to an
	// available revision after the newest one failed
	// (rollingUpdate.onFailure action Rollback).
	ReasonRolledBack = "RolledBack"
	// ReasonProgressDeadlineExceeded: Progressing is False because the
	// rollout made no progress for progressDeadlineSeconds.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonUntoleratedTaints: NodesExcluded is True.
	ReasonUntoleratedTaints = "UntoleratedTaints"
	// ReasonNodeOverridesUnchecked: WebhooksSkipped is True because the
	// set has spec.nodeOverrides, which only the set webhook checks when
	// the set is stored (the controller applies them wherever the set
	// lives, and refuses per pod one that does not apply); also the
	// reason of the Warning event recorded when the condition appears.
	ReasonNodeOverridesUnchecked = "NodeOverridesUnchecked"
	// ReasonExtenderSeesDaemonPodsOnly: NodeReadinessGateInactive is True;
	// also the reason of the Warning event recorded when it appears.
	ReasonExtenderSeesDaemonPodsOnly = "ExtenderSeesDaemonPodsOnly"
	// ReasonDaemonResourceNotIgnored: Available (and Progressing) are False
	// because kube-scheduler leaves daemon pods Pending for want of the
	// daemon-pod marker resource ("Insufficient everynode.io/daemon"): its
	// configuration does not list the resource in the extender's
	// managedResources with ignoredByScheduler. The most telling reason of
	// all, since no daemon pod schedules until it is fixed; also the reason
	// of the Warning event recorded when it appears, and of the
	// DaemonResourceFallback condition. The controller turns the marker off
	// when it sees such a pod and replaces the pods stuck so (see
	// ConditionDaemonResourceFallback; its event StoppedMarkingDaemonPods
	// then stands for this one), so this reason lasts until they are gone.
	ReasonDaemonResourceNotIgnored = "DaemonResourceNotIgnored"
	// ReasonDependencyNotFound and ReasonDependencyCycle: StartOrderBroken
	// is True.
	ReasonRequestsAboveAllocatable = "RequestsAboveAllocatable"
	ReasonDependencyNotFound       = "DependencyNotFound"
	ReasonDependencyCycle          = "DependencyCycle"
	// ReasonPodsWaitingForDependencies: pods hold their start-after
	// scheduling gate (spec.startAfter); a rollout passes through it.
	ReasonPodsWaitingForDependencies = "PodsWaitingForDependencies"

	// Reasons of a condition that is False (or of a rollout that waits),
	// from the most to the least telling (ReasonDaemonResourceNotIgnored
	// before them all).
	ReasonNodesNotReady    = "NodesNotReady"
	ReasonPodsCrashLooping = "PodsCrashLooping"
	ReasonImagePullBackOff = "ImagePullBackOff"
	ReasonPodsFailed       = "PodsFailed"
	ReasonPodsPending      = "PodsPending"
	ReasonPodsNotReady     = "PodsNotReady"
	ReasonMinReadySeconds  = "MinReadySeconds"
	ReasonPodsMissing      = "PodsMissing"
)
