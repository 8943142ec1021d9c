package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"everynode.io/everynode/extender/schedconfig"
)

func newSchedulerConfigCommand() *cobra.Command {
	var (
		o       schedconfig.Options
		caFile  string
		embedCA bool
	)
	cmd := &cobra.Command{
		Use:   "scheduler-config",
		Short: "Print a KubeSchedulerConfiguration that calls the everynode extender",
		Long: `scheduler-config prints a kube-scheduler configuration
(kubescheduler.config.k8s.io/v1) whose extenders entry calls this everynode
installation: filter, prioritize and preempt, nodeCacheCapable, ignorable (so
scheduling goes on if everynode is down), over HTTPS with the given CA.

  everynode scheduler-config --url https://everynode.everynode-system.svc:443/extender \
    --ca-file /etc/everynode/ca.crt > scheduler-config.yaml`,
		Example: `  everynode scheduler-config --url https://127.0.0.1:8443/extender --ca-file ca.crt --embed-ca`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if caFile == "" {
				return usageError{errors.New("--ca-file is required: kube-scheduler must verify the extender's certificate")}
			}
			if embedCA {
				data, err := os.ReadFile(caFile)
				if err != nil {
					return fmt.Errorf("read --ca-file: %w", err)
				}
				o.CAData = data
			} else {
				o.CAFile = caFile
			}
			out, err := schedconfig.Render(o)
			if err != nil {
				return usageError{err}
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.URLPrefix, "url", "", "HTTPS URL prefix of the extender routes, e.g. https://everynode.everynode-system.svc:443/extender.")
	fs.StringVar(&caFile, "ca-file", "", "PEM file of the CA that signed everynode's serving certificate.")
	fs.BoolVar(&embedCA, "embed-ca", false, "Embed the CA in the configuration (tlsConfig.caData) instead of referring to --ca-file by path.")
	fs.StringVar(&o.ClientCertFile, "client-cert-file", "", "Client certificate kube-scheduler presents to the extender (tlsConfig.certFile), for an everynode run with --client-ca-file.")
	fs.StringVar(&o.ClientKeyFile, "client-key-file", "", "Key of --client-cert-file (tlsConfig.keyFile).")
	fs.StringVar(&o.ServerName, "server-name", "", "Name to verify in the serving certificate instead of the URL's host.")
	fs.DurationVar(&o.HTTPTimeout, "http-timeout", schedconfig.DefaultHTTPTimeout, "Timeout of each extender call; after it the scheduler ignores the extender for that pod.")
	fs.Int64Var(&o.Weight, "weight", schedconfig.DefaultWeight, "Weight of the extender's prioritize scores.")
	fs.StringVar(&o.Kubeconfig, "scheduler-kubeconfig", "", "kube-scheduler's clientConnection.kubeconfig; empty: in-cluster.")
	fs.StringVar(&o.SchedulerName, "scheduler-name", "", "Profile and leader election name, for a second scheduler next to the default one.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the scheduler's leader election Lease (default kube-system).")
	fs.BoolVar(&o.NoLeaderElection, "no-leader-election", false, "Turn the scheduler's leader election off (one replica).")
	return cmd
}
