package main

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	kubeinformers "k8s.io/client-go/informers"

	everynodeinformers "everynode.io/everynode/client/informers/externalversions"
	everynodelisters "everynode.io/everynode/client/listers/everynode/v1alpha1"
	"everynode.io/everynode/controller"
	"everynode.io/everynode/extender"
	"everynode.io/everynode/index"
	"everynode.io/everynode/placement"
	"everynode.io/everynode/server"
	"everynode.io/everynode/takeover"
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
	// appsPodFactory holds the pods of apps/v1 DaemonSets, for
	// spec.startAfter; nil leaves such dependencies unresolved (tests).
	appsPodFactory kubeinformers.SharedInformerFactory
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
	// base is the controller's config but for the kind of set it
	// reconciles.
	base := controller.Config{
		KubeClient:  cfg.clients.controllerKube,
		Client:      cfg.clients.controllerEverynode,
		Budget:      cfg.clients.budget,
		EventClient: cfg.clients.controllerEvents,
		// The chart's list, so the controller warns where the webhooks do
		// not run.
		WebhookSkippedNamespaces: cfg.opts.skippedNamespaces(),
		SchedulerName:            cfg.opts.schedulerName,
		Pods:                     podInformer,
		Nodes:                    nodeInformer,
		Revisions:                revisionInformer,
	}
	// Which pods receive traffic, for inPlaceGatePolicy IfServed: every
	// EndpointSlice and Service of the cluster, trimmed to what that
	// reads (trimForCache).
	base.EndpointSlices = cfg.kubeFactory.Discovery().V1().EndpointSlices()
	base.EndpointSlices.Informer()
	base.Services = cfg.kubeFactory.Core().V1().Services()
	base.Services.Informer()
	if cfg.appsPodFactory != nil {
		base.StartAfterSets = cfg.kubeFactory.Apps().V1().DaemonSets()
		base.StartAfterSets.Informer()
		base.StartAfterPods = cfg.appsPodFactory.Core().V1().Pods()
		base.StartAfterPods.Informer()
	}
	newController := func(ctx context.Context) (controllerRunner, error) {
		own := base
		own.DaemonSets = setInformer
		return controller.New(ctx, own)
	}
	if cfg.opts.takeover {
		newController = takeoverController(cfg, base, newController)
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
	if cfg.opts.takeover {
		ext.TakeOver(cfg.kubeFactory.Apps().V1().DaemonSets())
	}
	ext.ConfirmWith(cfg.clients.kube, cfg.clients.everynode)

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
	r.MustRegister(takeoverGauge)
	r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "everynode", Subsystem: "controller", Name: "deferred_requests",
		Help: "Requests (Normal events) waiting for a spare token of the controller's --kube-api-qps budget while pod work uses it.",
	}, deferred))
	r.MustRegister(controller.NewSetStatusCollector(sets), leaderGauge, markerGauge, markerFallbackGauge)
	webhook.RegisterMetrics(r)
	extender.RegisterMetrics(r)
}

// takeoverController returns the controller of a leadership term in
// takeover mode: everynode's own (newOwn), and beside it the same
// controller over apps/v1 DaemonSets (base with AppsDaemonSets), run by a
// takeover.Runner only while no other DaemonSet controller runs.
func takeoverController(cfg partsConfig, base controller.Config, newOwn func(context.Context) (controllerRunner, error)) func(context.Context) (controllerRunner, error) {
	apps := cfg.kubeFactory.Apps().V1().DaemonSets()
	apps.Informer() // known to the factory before it starts
	base.AppsDaemonSets = apps
	return func(ctx context.Context) (controllerRunner, error) {
		own, err := newOwn(ctx)
		if err != nil {
			return nil, err
		}
		var lock *takeover.Lock
		if cfg.opts.takeoverLockPolicy != "" {
			lock = &takeover.Lock{Client: cfg.clients.controllerKube, Policy: cfg.opts.takeoverLockPolicy}
		}
		runner := &takeover.Runner{
			Probe: &takeover.Probe{Client: cfg.clients.controllerKube, Namespace: cfg.opts.namespace, Timeout: cfg.opts.takeoverProbeTimeout},
			Lock:  lock,
			Sets:  apps.Informer(),
			Retry: cfg.opts.takeoverRetry,
			Active: func(on bool) {
				if on {
					takeoverGauge.Set(1)
				} else {
					takeoverGauge.Set(0)
				}
			},
			// ctx carries the term's write fence (controller.New keeps
			// it); a run's own cancellation comes with the context it is
			// run with.
			NewController: func(context.Context) (takeover.Controller, error) { return controller.New(ctx, base) },
		}
		return bothRunners{own, runner}, nil
	}
}

// takeoverGauge is 1 while this replica reconciles apps/v1 DaemonSets.
// markerGauge and markerFallbackGauge read the daemon-pod marker of this
// process, which the controller's pods and the pod webhook's stamp share:
// a replica that is not the leader keeps the marker until it leads and
// sees a stuck pod itself (placement.TurnOffDaemonResource), so the
// cluster's state is the leader's series.
var (
	markerGauge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "everynode", Name: "daemon_resource_marker",
		Help: "1 while this replica marks daemon pods with the daemon-pod marker resource (--daemon-resource), so that kube-scheduler sends its extender daemon pods only; 0 when configured off or after the fallback (everynode_daemon_resource_fallback).",
	}, func() float64 { return boolGauge(placement.DaemonResource() != "") })
	markerFallbackGauge = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "everynode", Name: "daemon_resource_fallback",
		Help: "1 after this replica's controller saw a daemon pod that kube-scheduler left Pending for want of the marker (its configuration does not ignore it) and stopped marking daemon pods: ordinary pods again wait for everynode's extender when it hangs. Fix the scheduler's configuration (everynode scheduler-config) and restart everynode.",
	}, func() float64 { return boolGauge(placement.DaemonResourceFallback()) })
)

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

var takeoverGauge = prometheus.NewGauge(prometheus.GaugeOpts{
	Namespace: "everynode", Subsystem: "takeover", Name: "active",
	Help: "1 while this replica reconciles apps/v1 DaemonSets (--takeover); 0 otherwise, also while it leads but waits for another DaemonSet controller (kube-controller-manager's) to stop.",
})

// bothRunners runs two controllers for one term: it returns when both
// have, with the first error.
type bothRunners [2]controllerRunner

func (b bothRunners) Run(ctx context.Context, workers int) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, r := range b {
		g.Go(func() error { return r.Run(ctx, workers) })
	}
	return g.Wait()
}
