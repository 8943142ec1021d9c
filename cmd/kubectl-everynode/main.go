// Command kubectl-everynode is the kubectl plugin of everynode: with it on
// PATH, `kubectl everynode rollout status|history|undo|restart|pause|resume`
// does for everynode.io DaemonSets what `kubectl rollout` does for built-in
// kinds. The commands live in package plugin; this only wires the process.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"everynode.io/everynode/plugin"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	// Ctrl-C ends a `rollout status` wait cleanly, with a non-zero code.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := plugin.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, version)
	if err := cmd.ExecuteContext(ctx); err != nil {
		// kubectl's format and exit code (cmdutil.CheckErr).
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		stop()
		os.Exit(1)
	}
}
