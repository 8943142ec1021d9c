// Command cert-manager-controller runs the cert-manager controllers that the
// e2e tests need (Certificates with SelfSigned and CA issuers) against the
// cluster in --kubeconfig, like upstream cmd/controller without leader
// election, ACME, Vault, Venafi, ingress/gateway shims or a metrics server.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
)

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file (default: in-cluster config)")
	clusterNS := flag.String("cluster-resource-namespace", "cert-manager", "namespace of the Secrets that ClusterIssuers refer to")
	workers := flag.Int("workers", 5, "workers per controller")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	if err := run(ctx, *kubeconfig, *clusterNS, *workers); err != nil {
		klog.ErrorS(err, "cert-manager controller failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
}

func run(ctx context.Context, kubeconfig, clusterNS string, workers int) error {
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   50,
		KubernetesAPIBurst: 100,
		IssuerOptions:      controller.IssuerOptions{ClusterResourceNamespace: clusterNS},
	})
	if err != nil {
		return err
	}
	// The base context holds the shared informer factories that every
	// controller registers its informers with; start them once all exist.
	base, err := factory.Build()
	if err != nil {
		return err
	}

	// The blank imports above register exactly the controllers to run.
	names := make([]string, 0, len(controller.Known()))
	for n := range controller.Known() {
		names = append(names, n)
	}
	sort.Strings(names)
	g, ctx := errgroup.WithContext(ctx)
	for _, n := range names {
		c, err := controller.Known()[n](factory)
		if err != nil {
			return err
		}
		klog.InfoS("starting controller", "controller", n)
		g.Go(func() error { return c.Run(workers, ctx) })
	}
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	return g.Wait()
}
