// Package rollout implements `kubectl everynode rollout`: status, history,
// undo, restart, pause and resume for everynode.io/v1alpha1 DaemonSets,
// which stock `kubectl rollout` cannot handle because it knows only the
// built-in kinds.
//
// The behaviour follows stock kubectl's DaemonSet support
// (k8s.io/kubectl pkg/polymorphichelpers and pkg/cmd/rollout) so that users
// can keep their habits and scripts: the same messages, the same exit codes,
// the same flags. Where everynode differs from apps/v1 it says so: a
// revision also stores spec.nodeOverrides, and pause/resume toggle
// spec.updateStrategy.rollingUpdate.paused.
//
// The decisions (where a rollout stands, which revision to restore, what a
// patch looks like) are pure functions; the commands are thin shells that
// fetch objects through a Factory, so tests run them against the fake
// clientsets.
package rollout
