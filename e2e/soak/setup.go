package soak

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	versioned "everynode.io/everynode/client/clientset/versioned"

	"everynode.io/e2e/cluster"
)

// The soak's cluster: the chart, two replicas, the nodes and the sets.

func everynodeUser(c *cluster.Cluster) string {
	return "system:serviceaccount:" + c.Namespace + ":" + c.Release
}

// setup makes the cluster: the control plane with the soak's audit
// policy, the chart with takeover, everynode's two replicas in
// self-signed mode (the CA rotation needs it), the nodes and the 20 sets,
// and waits for the sets' first rollout.
func (r *runner) setup(ctx context.Context) error {
	c := r.c
	policy := filepath.Join(r.dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(AuditPolicy(everynodeUser(c))), 0o644); err != nil {
		return err
	}
	if err := c.UpControlPlane(ctx, Settings(), cluster.UpOptions{AuditPolicy: policy}); err != nil {
		return err
	}
	if err := c.InstallEverynode(ctx); err != nil {
		return err
	}
	if err := c.SetCertMode(ctx, cluster.CertSelfSigned); err != nil {
		return err
	}
	if err := c.StartReplica(ctx, 1); err != nil {
		return err
	}
	// The harness's admin client, made once here: the faults restart
	// replicas from several goroutines.
	if _, err := c.Client(); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return err
	}
	cfg.UserAgent = UserAgent + "/" + cmp.Or(r.o.Version, "dev")
	cfg.QPS, cfg.Burst = 100, 200
	// The dry-run sets copy the catalog's selectors, and every answer
	// warns of the overlap; the warnings say nothing the soak checks.
	cfg.WarningHandler = rest.NoWarnings{}
	if r.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if r.en, err = versioned.NewForConfig(cfg); err != nil {
		return err
	}
	burst := *cfg
	burst.QPS, burst.Burst = -1, 0
	if r.enBurst, err = versioned.NewForConfig(&burst); err != nil {
		return err
	}
	r.say("waiting for everynode to take over apps/v1 DaemonSets")
	if err := retry(ctx, 2*time.Minute, func(ctx context.Context) error {
		for n := range 2 {
			if text, err := r.scrape(ctx, n); err == nil && SumCounter(text, "everynode_takeover_active") == 1 {
				return nil
			}
		}
		return errors.New("everynode_takeover_active is not 1 on either replica")
	}); err != nil {
		return err
	}

	for _, ns := range []string{SetNamespace, PlainNamespace} {
		_, err := r.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	r.say("making %d kwok nodes", r.o.Nodes)
	if err := r.makeNodes(ctx); err != nil {
		return err
	}
	rec, err := newRecorder(filepath.Join(r.dir, fmt.Sprintf("records-seed%d.jsonl", r.o.Seed)))
	if err != nil {
		return err
	}
	r.rec = rec
	if err := rec.watch(ctx, r.kube, r.en); err != nil {
		return err
	}
	r.say("making the 20 sets")
	for _, s := range Catalog() {
		r.rec.act(ActObs{Kind: ActCreateSet, Set: s.Name})
		if err := retry(ctx, 2*time.Minute, func(ctx context.Context) error { return r.createSet(ctx, s) }); err != nil {
			return fmt.Errorf("set %s: %w", s.Name, err)
		}
	}
	bound := ConvergeBound(r.o.Nodes)
	r.say("waiting up to %s for the sets' first rollout", bound)
	made := time.Now()
	_, slowest, missing := r.waitConverged(ctx, bound, made)
	if len(missing) > 0 {
		return fmt.Errorf("the sets' first rollout did not finish within %s: %s", bound, strings.Join(missing, "; "))
	}
	r.logf("first rollout done; last: %s", slowest)
	return nil
}

func (r *runner) createSet(ctx context.Context, s SetSpec) error {
	var err error
	if s.Kind == KindApps {
		_, err = r.kube.AppsV1().DaemonSets(SetNamespace).Create(ctx, s.Apps(SetNamespace, s.Template("v1", 0)), metav1.CreateOptions{})
	} else {
		_, err = r.en.EverynodeV1alpha1().DaemonSets(SetNamespace).Create(ctx, s.Everynode(SetNamespace, s.Template("v1", 0)), metav1.CreateOptions{})
	}
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// makeNodes makes o.Nodes nodes, eight at a time, and waits for them
// to be Ready.
func (r *runner) makeNodes(ctx context.Context) error {
	names := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range 8 {
		wg.Go(func() {
			for i := range names {
				name, pool := fmt.Sprintf("soak-%04d", i), Pools[i%len(Pools)]
				if err := retry(ctx, time.Minute, func(ctx context.Context) error { return r.makeNode(ctx, name, pool) }); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range r.o.Nodes {
		names <- i
		r.nodes = append(r.nodes, nodeInfo{name: fmt.Sprintf("soak-%04d", i), pool: Pools[i%len(Pools)]})
	}
	close(names)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return retry(ctx, 5*time.Minute+time.Duration(r.o.Nodes)*200*time.Millisecond, func(ctx context.Context) error {
		list, err := r.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: NodeLabel + "=true", ResourceVersion: "0"})
		if err != nil {
			return err
		}
		ready := 0
		for i := range list.Items {
			if ok, _, _ := nodeServing(&list.Items[i]); ok {
				ready++
			}
		}
		if ready < r.o.Nodes {
			return fmt.Errorf("%d of %d nodes Ready", ready, r.o.Nodes)
		}
		return nil
	})
}
