package rollout

import (
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// NewCmdRollout returns the `rollout` command with its subcommands status,
// history, undo, restart, pause and resume. f supplies clients and the
// namespace; the caller adds the kubeconfig flags (-n, --context, ...).
func NewCmdRollout(f Factory, streams genericiooptions.IOStreams) *cobra.Command {
	return newCmdRollout(f, streams, time.Now)
}

// newCmdRollout is NewCmdRollout with the clock of restart as a parameter,
// for tests.
func newCmdRollout(f Factory, streams genericiooptions.IOStreams, now func() time.Time) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout SUBCOMMAND",
		Short: "Manage the rollout of everynode DaemonSets",
		Long: `Manage the rollout of everynode.io DaemonSets, as kubectl rollout does for
built-in kinds (which it cannot do for custom resources).

Each subcommand takes the set by NAME (or daemonset/NAME) in the current
namespace, or several sets with --selector, in all namespaces with -A.`,
		Example: `  # Roll back to the previous revision
  kubectl everynode rollout undo fluentd

  # Watch the rollout until it is done
  kubectl everynode rollout status fluentd`,
	}
	cmd.AddCommand(
		newCmdHistory(f, streams),
		newCmdPause(f, streams),
		newCmdRestart(f, streams, now),
		newCmdResume(f, streams),
		newStatusOptions(f, streams).command(),
		newCmdUndo(f, streams),
	)
	return cmd
}
