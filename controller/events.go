package controller

// Event reasons the controller records on a DaemonSet. They are part of the
// user interface (`kubectl describe`, `kubectl get events`): keep them stable.
const (
	// ReasonSuccessfulCreate: a daemon pod was created for a node.
	ReasonSuccessfulCreate = "SuccessfulCreate"
	// ReasonFailedCreate: creating a daemon pod failed.
	ReasonFailedCreate = "FailedCreate"
	// ReasonSuccessfulDelete: a daemon pod was deleted.
	ReasonSuccessfulDelete = "SuccessfulDelete"
	// ReasonFailedDelete: deleting a daemon pod failed.
	ReasonFailedDelete = "FailedDelete"
	// ReasonFailedDaemonPod: a daemon pod failed and is deleted to be
	// recreated, subject to a per-node backoff.
	ReasonFailedDaemonPod = "FailedDaemonPod"
	// ReasonSucceededDaemonPod: a daemon pod exited successfully and is
	// deleted to be recreated (daemons are meant to run forever).
	ReasonSucceededDaemonPod = "SucceededDaemonPod"
	// ReasonSuccessfulUpdateInPlace: a daemon pod's images were patched
	// (rollingUpdate.podUpdatePolicy: InPlaceIfPossible).
	ReasonSuccessfulUpdateInPlace = "SuccessfulUpdateInPlace"
	// ReasonFailedUpdateInPlace: patching a daemon pod's images, or its
	// in-place readiness gate, failed.
	ReasonFailedUpdateInPlace = "FailedUpdateInPlace"
	// ReasonFailedStartGate: removing a daemon pod's start-after
	// scheduling gate (spec.startAfter) failed.
	ReasonFailedStartGate = "FailedStartGate"
	// ReasonSuccessfulResize: a pod resized in place to its node's size
	// (spec.nodeSizing).
	ReasonSuccessfulResize = "SuccessfulResize"
	// ReasonFailedResize: a resize the API server did not take.
	ReasonFailedResize = "FailedResize"
	// ReasonRecreatingForSize: a pod deleted to be made anew at its
	// node's size, because no resize could size it; the message says why.
	ReasonRecreatingForSize = "RecreatingForSize"
	// ReasonStoppedMarkingDaemonPods: the controller saw a daemon pod that
	// kube-scheduler left Pending for want of the daemon-pod marker and
	// turned the marker off for this process (Warning, once, on the set
	// whose pod it saw; the DaemonResourceFallback condition says the same
	// on every set).
	ReasonStoppedMarkingDaemonPods = "StoppedMarkingDaemonPods"
	// ReasonUnschedulableMarkedPod: a daemon pod that kube-scheduler left
	// Pending for want of the marker is deleted, to be made again without
	// it (Warning, one per pod).
	ReasonUnschedulableMarkedPod = "UnschedulableMarkedPod"
	// ReasonSelectingAll: the set's selector is empty; it is not synced.
	ReasonSelectingAll = "SelectingAll"
	// ReasonRevisionCollision: the revision name of the set's template was
	// taken by different data; collisionCount was raised.
	ReasonRevisionCollision = "RevisionCollision"
	// The Warning of a rollout that stopped itself is
	// everynodev1alpha1.ReasonRolloutFailing, the reason of its condition.
)
