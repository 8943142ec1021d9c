package main

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	kubeinformers "k8s.io/client-go/informers"

	everynodeinformers "everynode.io/everynode/client/informers/externalversions"
	everynodelisters "everynode.io/everynode/client/listers/everynode/v1alpha1"
	"everynode.io/everynode/controller"
	"everynode.io/everynode/extender"
	"everynode.io/everynode/index"
	"everynode.io/everynode/server"
	"everynode.io/everynode/webhook"
)

// partsConfig is what the webhook, extender and controller are built from.
type partsConfig struct {
	opts        *serveOptions
	clients     *clients
	registry    *prometheus.Registry
	kubeFactory kubeinformers.SharedInformerFactory
	podFactory  kubeinformers.SharedInformerFactory
	setFactory  everynodeinformers.SharedInformerFactory
}

// parts are the built webhook and extender routes and the controller.
type parts struct {
	routes []server.Routes
	// newController makes the controller of one leadership term; it is
	// called from one goroutine only.
	newController func(context.Context) (controllerRunner, error)
	synced        func() error
}

// buildParts wires every part to the shared informers. Informers must be
// requested here, before the factories start.
func buildParts(ctx context.Context, cfg partsConfig) (*parts, error) {
	nodeInformer := cfg.kubeFactory.Core().V1().Nodes()
	podInformer := cfg.podFactory.Core().V1().Pods()
	setInformer := cfg.setFactory.Everynode().V1alpha1().DaemonSets()
	nodes, pods, sets := nodeInformer.Informer(), podInformer.Informer(), setInformer.Informer()
	if err := index.AddPodIndexers(pods); err != nil {
		return nil, err
	}

	// The controller's informers must be known to the factories before
	// they start; the controller itself is made per leadership term.
	revisionInformer := cfg.kubeFactory.Apps().V1().ControllerRevisions()
	revisionInformer.Informer()
	newController := func(ctx context.Context) (controllerRunner, error) {
		return controller.New(ctx, controller.Config{
			KubeClient:  cfg.clients.controllerKube,
			Client:      cfg.clients.controllerEverynode,
			Budget:      cfg.clients.budget,
			EventClient: cfg.clients.controllerEvents,
			// The chart's list, so the controller warns where the
			// webhooks do not run.
			WebhookSkippedNamespaces: cfg.opts.skippedNamespaces(),
			SchedulerName:            cfg.opts.schedulerName,
			DaemonSets:               setInformer,
			Pods:                     podInformer,
			Nodes:                    nodeInformer,
			Revisions:                revisionInformer,
		})
	}
	// One now, so that a wiring error stops serve at start, and so its
	// indexes are on the informers before they start.
	first, err := newController(ctx)
	if err != nil {
		return nil, err
	}
	firstTaken := false
	nextController := func(ctx context.Context) (controllerRunner, error) {
		if !firstTaken {
			firstTaken = true
			return first, nil
		}
		return newController(ctx)
	}
	registerMetrics(cfg.registry, setInformer.Lister(), func() float64 { return float64(cfg.clients.budget.Deferred()) })

	dryRunner, err := webhook.NewPodDryRunnerForConfig(cfg.clients.config)
	if err != nil {
		return nil, err
	}
	hooks, err := webhook.Routes(webhook.Config{
		ControllerUsername: cfg.opts.controllerUsername,
		Nodes:              nodeInformer.Lister(),
		Sets:               setInformer.Lister(),
		DryRunner:          dryRunner,
		SchedulerName:      cfg.opts.schedulerName,
	})
	if err != nil {
		return nil, err
	}

	ext, err := extender.New(setInformer, nodeInformer, podInformer)
	if err != nil {
		return nil, err
	}

	p := &parts{
		routes:        []server.Routes{hooks, ext.Routes()},
		newController: nextController,
		synced: func() error {
			if !nodes.HasSynced() || !pods.HasSynced() || !sets.HasSynced() || !ext.HasSynced() {
				return errors.New("informer caches not synced yet")
			}
			return nil
		},
	}
	return p, nil
}

// registerMetrics registers every part's metrics with r: the controller's,
// the per-set status gauges, the leader gauge, the webhooks' and the
// extender's. deferred reads the controller's deferred requests. The
// server registers its own request metrics, and serve the Go and process
// collectors.
func registerMetrics(r prometheus.Registerer, sets everynodelisters.DaemonSetLister, deferred func() float64) {
	controller.RegisterMetrics(r)
	r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "everynode", Subsystem: "controller", Name: "deferred_requests",
		Help: "Requests (Normal events) waiting for a spare token of the controller's --kube-api-qps budget while pod work uses it.",
	}, deferred))
	r.MustRegister(controller.NewSetStatusCollector(sets), leaderGauge)
	webhook.RegisterMetrics(r)
	extender.RegisterMetrics(r)
}
