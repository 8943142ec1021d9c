package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/certs"
	versioned "everynode.io/everynode/client/clientset/versioned"
	everynodeinformers "everynode.io/everynode/client/informers/externalversions"
	"everynode.io/everynode/controller/pacing"
	"everynode.io/everynode/placement"
	"everynode.io/everynode/server"
)

func newServeCommand() *cobra.Command {
	o := defaultServeOptions()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the webhooks and the scheduler extender, and run the controller",
		Long: `serve runs everynode: one HTTPS server with the admission webhooks
and the kube-scheduler extender, a plain-HTTP server with /healthz, /readyz
and /metrics, and the DaemonSet controller in the replica that holds the
leader Lease.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return runServe(ctx, o)
		},
	}
	o.addFlags(cmd.Flags())
	addKlogFlags(cmd)
	return cmd
}

// addKlogFlags adds klog's verbosity flags, and only those: the rest of
// klog's flags (log files, headers) do not apply to a container.
func addKlogFlags(cmd *cobra.Command) {
	var all flag.FlagSet
	klog.InitFlags(&all)
	for _, name := range []string{"v", "vmodule"} {
		cmd.Flags().AddGoFlag(all.Lookup(name))
	}
	cmd.Flags().Lookup("v").Shorthand = "v"
}

// clients are everything serve builds from the kubeconfig. As in
// kube-controller-manager, the controller's writes have a client of their
// own: its pod creations, status writes, revisions and events share one
// --kube-api-qps budget (the figure compared with upstream's), apart from
// the informers' watches, the webhooks' dry runs and leader election.
// Unlike kube-controller-manager's, that budget goes to pod work first
// (pacing.Bucket): events and count-only status writes take the tokens the
// pod work leaves.
type clients struct {
	config    *rest.Config
	kube      kubernetes.Interface
	everynode versioned.Interface

	budget              *pacing.Bucket
	controllerKube      kubernetes.Interface
	controllerEverynode versioned.Interface
	// controllerEvents is not rate limited itself: the controller takes
	// each event's token from budget.
	controllerEvents kubernetes.Interface
	// writeFence is asked before each pod write of controllerKube
	// (writefence.go); runController sets its fence.
	writeFence *writeFence
}

func newClients(o *serveOptions) (*clients, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	config, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	config.QPS, config.Burst = o.kubeAPIQPS, o.kubeAPIBurst
	config = rest.AddUserAgent(config, "everynode/"+version)
	c := &clients{config: config}
	if c.kube, c.everynode, err = newClientsets(config); err != nil {
		return nil, err
	}
	// Three clientsets, one token bucket.
	if c.budget, err = pacing.NewBucket(o.kubeAPIQPS, o.kubeAPIBurst); err != nil {
		return nil, err
	}
	controllerConfig := rest.CopyConfig(config)
	controllerConfig.RateLimiter = c.budget
	c.writeFence = &writeFence{}
	controllerConfig.Wrap(c.writeFence.wrap)
	if c.controllerKube, c.controllerEverynode, err = newClientsets(controllerConfig); err != nil {
		return nil, err
	}
	eventConfig := rest.CopyConfig(config)
	eventConfig.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	if c.controllerEvents, _, err = newClientsets(eventConfig); err != nil {
		return nil, err
	}
	return c, nil
}

// newClientsets makes the two clientsets from one config. The built-in
// kinds travel as protobuf, as kube-controller-manager's do (its
// --kube-api-content-type default): every pod and node event the informers
// decode costs a fraction of the JSON one. Custom resources have no
// protobuf encoding, so the everynode client stays on JSON.
func newClientsets(config *rest.Config) (kubernetes.Interface, versioned.Interface, error) {
	kubeConfig := rest.CopyConfig(config)
	kubeConfig.ContentType = runtime.ContentTypeProtobuf
	kubeConfig.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	kube, err := kubernetes.NewForConfig(kubeConfig)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	en, err := versioned.NewForConfig(config)
	if err != nil {
		return nil, nil, fmt.Errorf("everynode client: %w", err)
	}
	return kube, en, nil
}

func runServe(ctx context.Context, o *serveOptions) error {
	// Before anything makes a pod or judges a node: the pods' tolerations
	// and eligibility read it.
	placement.SetStartupTaint(o.startupTaint)
	placement.SetDaemonResource(o.daemonResource)
	c, err := newClients(o)
	if err != nil {
		return err
	}
	// Local checks first (certificate files), then the first network call.
	src, err := certificateSource(o, c)
	if err != nil {
		return err
	}
	if o.controllerUsername == "" {
		if o.controllerUsername, err = whoAmI(ctx, c.kube); err != nil {
			return fmt.Errorf("find everynode's own identity (or set --controller-username): %w", err)
		}
	}
	klog.InfoS("Starting everynode", "version", version, "controllerUsername", o.controllerUsername)

	registry := newRegistry()

	kubeFactory := kubeinformers.NewSharedInformerFactoryWithOptions(c.kube, 0, kubeinformers.WithTransform(trimForCache))
	// Daemon pods only: everynode never needs anyone else's pods, which keeps
	// its memory flat however many pods the cluster runs.
	daemonPodFactory := kubeinformers.NewSharedInformerFactoryWithOptions(c.kube, 0,
		kubeinformers.WithTransform(trimForCache),
		kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = everynodev1alpha1.LabelDaemonPod + "=" + everynodev1alpha1.LabelDaemonPodValue
		}))
	// The pods kube-controller-manager makes for apps/v1 DaemonSets
	// (upstream labels them pod-template-generation), for spec.startAfter
	// entries of group apps: a few pods per node (kube-proxy, a CNI agent),
	// not the cluster's. Pods everynode marked (takeover) are in the daemon
	// pod informer already.
	appsPodFactory := kubeinformers.NewSharedInformerFactoryWithOptions(c.kube, 0,
		kubeinformers.WithTransform(trimForCache),
		kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = placement.TemplateGenerationLabel + ",!" + everynodev1alpha1.LabelDaemonPod
		}))
	setFactory := everynodeinformers.NewSharedInformerFactoryWithOptions(c.everynode, 0, everynodeinformers.WithTransform(trimForCache))

	p, err := buildParts(ctx, partsConfig{
		opts: o, clients: c, registry: registry,
		kubeFactory: kubeFactory, podFactory: daemonPodFactory, setFactory: setFactory, appsPodFactory: appsPodFactory,
	})
	if err != nil {
		return err
	}

	var clientCAs *x509.CertPool
	if o.clientCAFile != "" {
		if clientCAs, err = certs.LoadCAPool(o.clientCAFile); err != nil {
			return fmt.Errorf("--client-ca-file: %w", err)
		}
	}
	srv, err := server.New(server.Config{
		SecureAddr:    o.secureAddr,
		HealthAddr:    o.healthAddr,
		Certificates:  src,
		Parts:         p.routes,
		Ready:         []server.Check{{Name: "informers", Check: p.synced}},
		Gatherer:      registry,
		Registerer:    registry,
		Profiling:     o.profiling,
		HTTP2:         o.http2,
		MaxInFlight:   o.maxInFlight,
		ClientCAs:     clientCAs,
		ShutdownDelay: o.shutdownDelay,
		DrainTimeout:  o.shutdownDrainTimeout,
	})
	if err != nil {
		return err
	}

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return src.Start(ctx) })
	if o.certMode == certModeSelfSigned {
		injector := certs.NewCABundleInjector(c.kube, o.namespace, o.caSecretName, o.webhookConfigurations)
		g.Go(func() error { return injector.Run(ctx) })
	}
	// The informers outlive the shutdown signal: the webhooks and the
	// extender keep answering from live caches while the server's shutdown
	// delay and drain run, and stop only once the server has returned.
	informersCtx, stopInformers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopInformers()
	kubeFactory.Start(informersCtx.Done())
	daemonPodFactory.Start(informersCtx.Done())
	appsPodFactory.Start(informersCtx.Done())
	setFactory.Start(informersCtx.Done())
	g.Go(func() error { return srv.Run(ctx) })
	if p.newController != nil {
		g.Go(func() error { return runController(ctx, o, c, p.newController) })
	}
	err = g.Wait()
	stopInformers()
	kubeFactory.Shutdown()
	daemonPodFactory.Shutdown()
	appsPodFactory.Shutdown()
	setFactory.Shutdown()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	klog.InfoS("everynode stopped")
	return err
}

// newRegistry is the registry /metrics serves, with the Go and process
// collectors; the parts and the server add theirs.
func newRegistry() *prometheus.Registry {
	registry := prometheus.NewRegistry()
	registry.MustRegister(
		// go_sched_latencies_seconds (how long goroutines wait to run) on
		// top of the defaults: it tells whether a webhook or extender call
		// that is slow outside its handler waited inside everynode for a
		// CPU or elsewhere.
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/sched/latencies:seconds$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return registry
}

func certificateSource(o *serveOptions, c *clients) (certs.Source, error) {
	switch o.certMode {
	case certModeSelfSigned:
		return certs.NewSelfSigned(certs.SelfSignedOptions{
			Namespace: o.namespace, SecretName: o.caSecretName,
			DNSNames: o.tlsDNSNames, RESTConfig: c.config,
		})
	default:
		return certs.NewFileSource(o.tlsCertFile, o.tlsKeyFile)
	}
}

// whoAmI asks the API server who our credentials are (SelfSubjectReview),
// which is the identity the pod webhook must accept as the creator of daemon
// pods.
func whoAmI(ctx context.Context, kube kubernetes.Interface) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	if review.Status.UserInfo.Username == "" {
		return "", errors.New("the API server returned an empty username")
	}
	return review.Status.UserInfo.Username, nil
}
