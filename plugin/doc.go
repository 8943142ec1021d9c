// Package plugin is the kubectl plugin kubectl-everynode: its root command
// with kubectl's connection flags (--kubeconfig, --context, -n, ...) and the
// subcommands, of which `rollout` (package plugin/rollout) is the one that
// matters: stock `kubectl rollout` knows only built-in kinds.
//
// kubectl finds the binary on PATH by its name and runs it for
// `kubectl everynode ...`; see plugin/README.md.
package plugin
