package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	everynodev1alpha1 "everynode.io/everynode/api/everynode/v1alpha1"
	"everynode.io/everynode/client/clientset/versioned"
	everynodescheme "everynode.io/everynode/client/clientset/versioned/scheme"
	everynodeinformers "everynode.io/everynode/client/informers/externalversions/everynode/v1alpha1"
	"everynode.io/everynode/controller/pacing"
)

const (
	// Name is the controller's name: the event source component and the
	// work queue name.
	Name = "everynode-controller"

	// BurstReplicas caps the pod creations (and deletions) of one sync, as
	// upstream: large enough to fill a big cluster quickly, small enough not
	// to flood the API server when every create fails the same way.
	BurstReplicas = 250

	// Failed pods are recreated after a per-node backoff from 1s to 15m.
	failedPodBackoffInitial = time.Second
	failedPodBackoffMax     = 15 * time.Minute
	backoffGCInterval       = time.Minute
)

// Config holds what New needs. The informers must not have been started
// yet: New adds event handlers and indexes to them.
type Config struct {
	// KubeClient creates and deletes pods and ControllerRevisions and
	// records events.
	KubeClient kubernetes.Interface
	// Client updates DaemonSet status.
	Client versioned.Interface

	// DaemonSets, Pods, Nodes and Revisions are the shared informers the
	// controller reads. Pods gets the index package's indexes.
	DaemonSets everynodeinformers.DaemonSetInformer
	// AppsDaemonSets, in place of DaemonSets, makes this the takeover
	// controller: it reconciles apps/v1 DaemonSets (kinds.go), writing
	// their status and revisions as kube-controller-manager does.
	// kube-controller-manager's own DaemonSet controller must be off
	// (package takeover checks).
	AppsDaemonSets appsinformers.DaemonSetInformer
	Pods           coreinformers.PodInformer
	Nodes          coreinformers.NodeInformer
	Revisions      appsinformers.ControllerRevisionInformer

	// StartAfterSets and StartAfterPods, both optional, are the apps/v1
	// DaemonSets and their pods (those kube-controller-manager made: Pods
	// holds everynode's own) for spec.startAfter entries of group apps.
	// Without them such a dependency is reported missing and waited for.
	StartAfterSets appsinformers.DaemonSetInformer
	StartAfterPods coreinformers.PodInformer

	// EndpointSlices and Services, both optional, say which pods receive
	// traffic, for rollingUpdate.inPlaceGatePolicy IfServed (served.go):
	// an in-place update closes the gate of a pod an EndpointSlice lists,
	// and a new pod gets the gate when a Service selects it. EndpointSlices
	// gets an index by pod. Without EndpointSlices every pod counts as
	// listed, without Services every pod as selected: IfServed then acts
	// as Always.
	EndpointSlices discoveryinformers.EndpointSliceInformer
	Services       coreinformers.ServiceInformer

	// Recorder records events on sets. Optional: when nil the controller
	// makes its own, writing events through KubeClient (EventClient when
	// Budget is set) while Run runs.
	Recorder record.EventRecorder
	// Budget, when set, is the client-side rate limit that KubeClient and
	// Client draw on (pacing.Bucket), and the controller spends it on pod
	// work first: a status write that only moves counts waits for a spare
	// token (up to pacing.MaxStatusStaleness), and so does a Normal event
	// (up to pacing.MaxEventDelay). Events then go through EventClient,
	// which must not be rate limited itself: each takes its token from
	// Budget.
	Budget pacing.Budget
	// EventClient writes events when Budget is set.
	EventClient kubernetes.Interface
	// Clock is optional, for tests.
	Clock clock.WithTicker
	// BurstReplicas caps creations and deletions per sync; 0 means
	// BurstReplicas.
	BurstReplicas int
	// WebhookSkippedNamespaces are the namespaces the everynode webhooks'
	// namespaceSelector leaves out (the chart passes its list). A set
	// there that uses a feature only a webhook provides gets the
	// WebhooksSkipped condition and a Warning event.
	WebhookSkippedNamespaces []string
	// SchedulerName, when set, is given to the daemon pods whose template
	// names no scheduler of its own (placement.WithSchedulerName).
	SchedulerName string
}

func (c *Config) validate() error {
	var errs []error
	if c.KubeClient == nil {
		errs = append(errs, errors.New("KubeClient is required"))
	}
	if c.Client == nil {
		errs = append(errs, errors.New("Client is required"))
	}
	if (c.DaemonSets == nil) == (c.AppsDaemonSets == nil) {
		errs = append(errs, errors.New("exactly one of the DaemonSets and AppsDaemonSets informers is required"))
	}
	if c.Pods == nil || c.Nodes == nil || c.Revisions == nil {
		errs = append(errs, errors.New("the Pods, Nodes and Revisions informers are required"))
	}
	if c.Budget != nil && c.EventClient == nil && c.Recorder == nil {
		errs = append(errs, errors.New("EventClient is required with a Budget"))
	}
	if c.BurstReplicas < 0 {
		errs = append(errs, fmt.Errorf("BurstReplicas must not be negative, got %d", c.BurstReplicas))
	}
	return errors.Join(errs...)
}

// Controller keeps every everynode DaemonSet's (or, in takeover mode,
// apps/v1 DaemonSet's) pods, revisions and status in line with its spec.
// Make it with New and start it with Run.
type Controller struct {
	kubeClient  kubernetes.Interface
	eventClient kubernetes.Interface // nil: events go through kubeClient

	// sets is the kind of set this controller reconciles (kinds.go).
	sets       setKind
	setIndexer cache.Indexer
	podIndexer cache.Indexer
	nodeLister corelisters.NodeLister
	// nodes is the node list syncs share until a node changes.
	nodes      nodeSnapshots
	revIndexer cache.Indexer
	synced     []cache.InformerSynced
	// appsSetLister and appsPodIndexer read apps/v1 dependencies of
	// spec.startAfter; nil without Config.StartAfterSets and StartAfterPods.
	appsSetLister  appslisters.DaemonSetLister
	appsPodIndexer cache.Indexer
	// sliceIndexer and serviceLister read what inPlaceGatePolicy IfServed
	// needs (served.go); nil without Config.EndpointSlices or Services.
	sliceIndexer  cache.Indexer
	serviceLister corelisters.ServiceLister

	// queue holds sets to sync; nodeQueue holds nodes whose change may
	// concern some sets, resolved to those sets by a node worker so that
	// event handlers stay O(1).
	queue     workqueue.TypedRateLimitingInterface[cache.ObjectName]
	nodeQueue workqueue.TypedRateLimitingInterface[string]

	recorder record.EventRecorder
	// broadcasters write the events of the recorder the controller made
	// (eventRecorders); none when the recorder was given.
	broadcasters []record.EventBroadcaster

	podControl PodControl
	// pacer decides when requests go out (package pacing); state is what
	// the controller remembers of each set between syncs.
	pacer         *pacing.Pacer
	state         *setStates
	failedBackoff *flowcontrol.Backoff
	clock         clock.WithTicker
	burstReplicas int
	// webhookSkipped holds Config.WebhookSkippedNamespaces.
	webhookSkipped map[string]bool
	schedulerName  string

	// fence is the write fence of the leadership term New was made in
	// (fence.go).
	fence func() error
	// term is the leadership term New was made in, if hasTerm (fence.go).
	term    int32
	hasTerm bool

	// syncHandler is sync, replaceable in tests of the queue plumbing.
	syncHandler func(ctx context.Context, key cache.ObjectName) error

	// handlers are the event handlers on the shared informers, removed
	// when Run returns; ran makes a second Run fail.
	handlers []registeredHandler
	ran      atomic.Bool
}

// New makes a controller from cfg and registers its event handlers and
// indexes on the informers. Call it before the informer factories start.
func New(ctx context.Context, cfg Config) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("everynode controller config: %w", err)
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	burst := cfg.BurstReplicas
	if burst == 0 {
		burst = BurstReplicas
	}
	var sets setKind
	if cfg.AppsDaemonSets != nil {
		sets = appsSets{inf: cfg.AppsDaemonSets, lister: cfg.AppsDaemonSets.Lister(), client: cfg.KubeClient}
	} else {
		sets = everynodeSets{inf: cfg.DaemonSets, lister: cfg.DaemonSets.Lister(), client: cfg.Client}
	}
	c := &Controller{
		kubeClient: cfg.KubeClient,
		sets:       sets,
		setIndexer: sets.informer().GetIndexer(),
		podIndexer: cfg.Pods.Informer().GetIndexer(),
		nodeLister: cfg.Nodes.Lister(),
		revIndexer: cfg.Revisions.Informer().GetIndexer(),
		synced: []cache.InformerSynced{
			sets.informer().HasSynced,
			cfg.Pods.Informer().HasSynced,
			cfg.Nodes.Informer().HasSynced,
			cfg.Revisions.Informer().HasSynced,
		},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: Name, MetricsProvider: queueMetrics{}, Clock: clk},
		),
		nodeQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name + "-nodes", MetricsProvider: queueMetrics{}, Clock: clk},
		),
		pacer: pacing.NewPacer(cfg.Budget, clk),
		// "Fake" only means "with this clock": the real one in production.
		failedBackoff:  flowcontrol.NewFakeBackOff(failedPodBackoffInitial, failedPodBackoffMax, clk),
		clock:          clk,
		burstReplicas:  burst,
		webhookSkipped: make(map[string]bool, len(cfg.WebhookSkippedNamespaces)),
		schedulerName:  cfg.SchedulerName,
		fence:          fenceOf(ctx),
	}
	c.term, c.hasTerm = LeaderTerm(ctx)
	for _, ns := range cfg.WebhookSkippedNamespaces {
		c.webhookSkipped[ns] = true
	}
	if cfg.DaemonSets != nil && cfg.StartAfterSets != nil && cfg.StartAfterPods != nil {
		c.appsSetLister = cfg.StartAfterSets.Lister()
		c.appsPodIndexer = cfg.StartAfterPods.Informer().GetIndexer()
		c.synced = append(c.synced, cfg.StartAfterSets.Informer().HasSynced, cfg.StartAfterPods.Informer().HasSynced)
		if err := addIndexer(cfg.StartAfterPods.Informer(), appsPodsByNode, appsPodNode); err != nil {
			return nil, err
		}
	}
	if cfg.EndpointSlices != nil {
		c.sliceIndexer = cfg.EndpointSlices.Informer().GetIndexer()
		c.synced = append(c.synced, cfg.EndpointSlices.Informer().HasSynced)
		if err := addIndexer(cfg.EndpointSlices.Informer(), slicesByPod, slicePodKeys); err != nil {
			return nil, err
		}
	}
	if cfg.Services != nil {
		c.serviceLister = cfg.Services.Lister()
		c.synced = append(c.synced, cfg.Services.Informer().HasSynced)
	}
	c.state = newSetStates(clk, c.pacer)
	if cfg.Budget != nil {
		// Events take their tokens from the budget (pacing.EventSink), so
		// their own client must not be rate limited.
		c.eventClient = cfg.EventClient
	}
	c.recorder = cfg.Recorder
	if c.recorder == nil {
		c.recorder, c.broadcasters = pacing.EventRecorders(ctx, eventScheme(), corev1.EventSource{Component: Name})
	}
	c.podControl = realPodControl{client: cfg.KubeClient, recorder: c.recorder}
	c.syncHandler = c.sync

	if err := addPodIndexers(cfg.Pods.Informer()); err != nil {
		return nil, err
	}
	if err := addSetIndexers(sets); err != nil {
		return nil, err
	}
	if err := addRevisionIndexers(cfg.Revisions.Informer()); err != nil {
		return nil, err
	}
	if err := c.addEventHandlers(ctx, cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// eventScheme knows both the built-in kinds and everynode's, so events can
// reference a DaemonSet of everynode.io/v1alpha1.
func eventScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(kubescheme.AddToScheme(s))
	utilruntime.Must(everynodescheme.AddToScheme(s))
	return s
}

// Run waits for the informer caches, catches up with the API server
// (catchUp), then syncs sets with workers goroutines (and as many node
// workers) until ctx is done. When it returns, every worker has returned
// and the controller's event handlers are off the informers: no request of
// this controller goes out after Run. It returns an error only when the
// caches never sync. A Controller runs once; a replica that loses and wins
// back the leader Lease makes a new one, with empty expectations built up
// again from the caches.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	if workers < 1 {
		return fmt.Errorf("everynode controller: workers must be at least 1, got %d", workers)
	}
	if c.ran.Swap(true) {
		return errors.New("everynode controller: Run called twice; make a new Controller")
	}
	logger := klog.FromContext(ctx)
	defer func() {
		if err := c.removeHandlers(); err != nil {
			logger.Error(err, "Removing the controller's event handlers")
		}
	}()
	eventClient := c.kubeClient
	if c.eventClient != nil {
		eventClient = c.eventClient
	}
	for _, b := range c.broadcasters {
		b.StartStructuredLogging(3)
		b.StartRecordingToSink(c.pacer.EventSink(ctx, eventClient))
		defer b.Shutdown()
	}

	var wg sync.WaitGroup
	defer func() {
		logger.Info("Shutting down everynode controller")
		c.queue.ShutDown()
		c.nodeQueue.ShutDown()
		wg.Wait()
	}()

	logger.Info("Starting everynode controller", "workers", workers)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return fmt.Errorf("everynode controller: informer caches did not sync: %w", context.Cause(ctx))
	}
	if err := c.catchUpWithRetry(ctx); err != nil {
		// Only when ctx is done: stopping, not failing.
		logger.Info("Stopped before catching up with the API server", "reason", err)
		return nil
	}
	for i := 0; i < workers; i++ {
		wg.Go(func() { wait.UntilWithContext(ctx, c.runWorker, time.Second) })
		wg.Go(func() { wait.UntilWithContext(ctx, c.runNodeWorker, time.Second) })
	}
	wg.Go(func() {
		wait.UntilWithContext(ctx, func(context.Context) {
			c.failedBackoff.GC()
			c.state.dropIdleMemos()
		}, backoffGCInterval)
	})
	<-ctx.Done()
	return nil
}

func (c *Controller) runWorker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

// processNextWorkItem syncs one set; it returns false when the queue shuts
// down.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)

	start := c.clock.Now()
	err := c.syncHandler(ctx, key)
	syncDuration.WithLabelValues(resultLabel(err)).Observe(c.clock.Since(start).Seconds())
	if err == nil {
		c.queue.Forget(key)
		return true
	}
	if errors.Is(err, errStatusConflict) {
		// Expected now and then; the cache catches up within the backoff.
		klog.FromContext(ctx).V(2).Info("Status write conflicted; requeuing", "daemonset", key.String())
	} else {
		utilruntime.HandleErrorWithContext(ctx, err, "Error syncing DaemonSet; requeuing", "daemonset", key.String())
	}
	c.queue.AddRateLimited(key)
	return true
}

// enqueue adds a set to the queue.
func (c *Controller) enqueue(ds *everynodev1alpha1.DaemonSet) {
	c.queue.Add(cache.MetaObjectToName(ds))
}

// enqueueAfter adds a set to the queue after d.
func (c *Controller) enqueueAfter(ds *everynodev1alpha1.DaemonSet, d time.Duration) {
	c.queue.AddAfter(cache.MetaObjectToName(ds), d)
}
