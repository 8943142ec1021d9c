// Package v1alpha1 is the everynode.io/v1alpha1 API: a DaemonSet custom
// resource whose spec and status carry every field of apps/v1 DaemonSet, with
// the same JSON names, defaults and meaning, plus a few fields upstream lacks
// (rollout partition, canary node selector, pause, per-node-pool overrides and
// a node readiness gate).
//
// +k8s:deepcopy-gen=package
// +groupName=everynode.io
// +groupGoName=Everynode
package v1alpha1
