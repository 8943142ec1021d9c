package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/extender/schedconfig"
)

func newSchedulerConfigCommand() *cobra.Command {
	var (
		o       schedconfig.Options
		caFile  string
		embedCA bool
		weight  int64
	)
	cmd := &cobra.Command{
		Use:   "scheduler-config",
		Short: "Print a KubeSchedulerConfiguration that calls the everynode extender",
		Long: `scheduler-config prints a kube-scheduler configuration
(kubescheduler.config.k8s.io/v1) whose extenders entry calls this everynode
installation: filter and preempt, nodeCacheCapable, ignorable (so scheduling
goes on if everynode is down), over HTTPS with the given CA.

With --daemon-resource (by default everynode.io/daemon, as everynode serve's)
the entry lists that resource in managedResources with ignoredByScheduler:
kube-scheduler then calls the extender only for daemon pods, which request
one of it, so a hung everynode costs every other pod nothing. Give it the
same value as everynode serve --daemon-resource; empty for an everynode run
with --daemon-resource="" (then every pod waits for the extender).

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
	fs.StringVar(&o.DaemonResource, "daemon-resource", everynodev1alpha1.DefaultDaemonResource, "The marker resource daemon pods request (everynode serve --daemon-resource): put in managedResources, ignored by the scheduler, so the extender is called for daemon pods only. Empty: for every pod.")
	// The prioritize verb is gone (it scored nothing); scripts that pass
	// --weight keep working.
	fs.Int64Var(&weight, "weight", 1, "Ignored: the configuration has no prioritize verb.")
	_ = fs.MarkDeprecated("weight", "the extender is no longer configured to prioritize; the flag does nothing")
	fs.StringVar(&o.Kubeconfig, "scheduler-kubeconfig", "", "kube-scheduler's clientConnection.kubeconfig; empty: in-cluster.")
	fs.StringVar(&o.SchedulerName, "scheduler-name", "", "Profile and leader election name, for a second scheduler next to the default one.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the scheduler's leader election Lease (default kube-system).")
	fs.BoolVar(&o.NoLeaderElection, "no-leader-election", false, "Turn the scheduler's leader election off (one replica).")
	return cmd
}
