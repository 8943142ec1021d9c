// Package webhook holds everynode's admission webhooks:
//
//   - /mutate/daemonset defaults a set as apps/v1 defaults a DaemonSet,
//     pod template included (defaultDaemonSet);
//   - /validate/daemonset checks it as upstream validates a DaemonSet, plus
//     everynode's own fields, and validates the pod template as a pod by a
//     server-side dry-run create (validateDaemonSet, PodDryRunner);
//   - /mutate/pod pins a daemon pod to its target node, adds the daemon
//     tolerations and the set's node overrides (mutatePod);
//   - /validate/pod keeps anyone but the controller from making a pod that
//     claims to be a daemon pod (validatePod).
//
// The decisions are pure functions that the tests call directly; the HTTP
// side is the shared transport in webhook/admission. README.md lists the
// facts the chart's webhook configurations need.
package webhook
