package main

import (
	"github.com/spf13/cobra"
)

// usageError marks an error in the command line, as opposed to one met
// while running.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "everynode",
		Short: "Run one pod on every eligible node: DaemonSet semantics as an add-on",
		Long: `everynode keeps one pod of a template on every eligible node of a Kubernetes
cluster, like the built-in DaemonSet, for the everynode.io/v1alpha1 DaemonSet
resource: admission webhooks, a kube-scheduler extender and a controller, served
by this one binary.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newServeCommand(), newSchedulerConfigCommand(), newVersionCommand())
	return root
}
