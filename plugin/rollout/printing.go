package rollout

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	"everynode.io/everynode/client/clientset/versioned/scheme"
)

// newPrintFlags returns kubectl's -o flags for a command whose default
// output is "daemonset.everynode.io/NAME <operation>". The type setter fills
// in apiVersion and kind, which typed clients leave empty, so that the name
// printer and -o yaml show them.
func newPrintFlags(operation string) *genericclioptions.PrintFlags {
	return genericclioptions.NewPrintFlags(operation).WithTypeSetter(scheme.Scheme)
}

// toPrinter returns the printer for one result, with kubectl's dry-run
// suffix on the operation.
func toPrinter(pf *genericclioptions.PrintFlags, operation string, dryRun dryRunStrategy) (printers.ResourcePrinter, error) {
	pf.NamePrintFlags.Operation = operation
	switch dryRun {
	case dryRunClient:
		if err := pf.Complete("%s (dry run)"); err != nil {
			return nil, err
		}
	case dryRunServer:
		if err := pf.Complete("%s (server dry run)"); err != nil {
			return nil, err
		}
	}
	return pf.ToPrinter()
}

// dryRunStrategy is kubectl's --dry-run: none, client (compute and print,
// send nothing) or server (send with dryRun=All, persist nothing).
type dryRunStrategy int

const (
	dryRunNone dryRunStrategy = iota
	dryRunClient
	dryRunServer
)

// addDryRunFlag adds --dry-run as kubectl does, bare --dry-run meaning
// client.
func addDryRunFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "dry-run", "none", `Must be "none", "server", or "client". If client strategy, only print the object that would be sent, without sending it. If server strategy, submit server-side request without persisting the resource.`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "unchanged"
}

// parseDryRun accepts the values kubectl accepts, including the deprecated
// booleans.
func parseDryRun(s string) (dryRunStrategy, error) {
	switch s {
	case "", "none", "false":
		return dryRunNone, nil
	case "client", "true", "unchanged":
		return dryRunClient, nil
	case "server":
		return dryRunServer, nil
	}
	return dryRunNone, fmt.Errorf(`invalid dry-run value (%v). Must be "none", "server", or "client"`, s)
}
