package plugin

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"everynode.io/everynode/plugin/explain"
	"everynode.io/everynode/plugin/migrate"
	"everynode.io/everynode/plugin/rollout"
)

// NewCommand returns the root command of kubectl-everynode, which kubectl
// runs for `kubectl everynode ...`. version is printed by `version`.
// Errors are returned, not printed: main prints them as kubectl does.
func NewCommand(streams genericiooptions.IOStreams, version string) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	cmd := &cobra.Command{
		Use:   "kubectl-everynode",
		Short: "Manage everynode DaemonSets from kubectl",
		Long: `kubectl everynode manages everynode.io/v1alpha1 DaemonSets where stock kubectl
cannot: "kubectl rollout" works only for built-in kinds.

Install: put kubectl-everynode on your PATH; kubectl then runs it for
"kubectl everynode ...".`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// kubectl shows "kubectl everynode" in usage lines of a plugin.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl everynode"},
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w\nSee '%s --help' for usage", err, c.CommandPath())
	})
	flags.AddFlags(cmd.PersistentFlags())

	f := newConfigFactory(flags, streams.ErrOut)
	cmd.AddCommand(rollout.NewCmdRollout(f, streams), explain.NewCommand(f, streams), migrate.NewCommand(f, streams), newVersionCommand(streams, version))
	return cmd
}

func newVersionCommand(streams genericiooptions.IOStreams, version string) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of kubectl-everynode",
		Args:  cobra.NoArgs,
		Run: func(*cobra.Command, []string) {
			goVersion := "unknown"
			if bi, ok := debug.ReadBuildInfo(); ok {
				goVersion = bi.GoVersion
			}
			fmt.Fprintf(streams.Out, "kubectl-everynode %s (%s)\n", version, goVersion)
		},
	}
}
