package soak

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Admission traffic: ordinary pods created and bound, and server-side dry
// runs of sets and pods; invariant 3 is checked on their answers.

// plainPod is an ordinary pod of the traffic: no daemon label, so no
// everynode webhook sees it, and no marker resource, so kube-scheduler
// never calls everynode's extender for it.
func plainPod(name, batch string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: PlainNamespace, Labels: map[string]string{PlainLabel: batch}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{NodeLabel: "true"},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}}},
		},
	}
}

// refused records a create of an ordinary pod that failed: invariant 3
// if everynode is named in the answer.
func (r *runner) refused(name string, dryRun bool, err error) {
	if !mentionsEverynode(err.Error()) {
		r.admit("ordinary pods refused, not by everynode ("+errClass(err)+")", 1)
		return
	}
	r.admit("ordinary pods refused by everynode", 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violations = append(r.violations, Violation{At: time.Now(), Invariant: InvAdmission,
		Message: fmt.Sprintf("an ordinary pod create (dry run %t) was refused: %v", dryRun, err), Objects: []string{"pod " + PlainNamespace + "/" + name}})
}

// plainPods creates n ordinary pods, waits for them to be bound (a
// minute at most), and deletes them.
func (r *runner) plainPods(ctx context.Context, n int) error {
	r.mu.Lock()
	r.plainSeq++
	batch := fmt.Sprintf("b%05d", r.plainSeq)
	r.mu.Unlock()
	var created []string
	for i := range n {
		if ctx.Err() != nil {
			break // cut at the schedule's end: not a refusal
		}
		name := fmt.Sprintf("plain-%s-%02d", batch, i)
		if _, err := r.kube.CoreV1().Pods(PlainNamespace).Create(ctx, plainPod(name, batch), metav1.CreateOptions{}); err != nil {
			r.refused(name, false, err)
			continue
		}
		created = append(created, name)
	}
	r.admit("ordinary pods created", len(created))
	defer func() {
		_ = retry(context.WithoutCancel(ctx), time.Minute, func(ctx context.Context) error {
			return r.kube.CoreV1().Pods(PlainNamespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)},
				metav1.ListOptions{LabelSelector: PlainLabel + "=" + batch})
		})
	}()
	if len(created) == 0 {
		return nil
	}
	start := time.Now()
	err := retry(ctx, time.Minute, func(ctx context.Context) error {
		list, err := r.kube.CoreV1().Pods(PlainNamespace).List(ctx, metav1.ListOptions{LabelSelector: PlainLabel + "=" + batch})
		if err != nil {
			return err
		}
		bound := 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		if bound < len(created) {
			return fmt.Errorf("%d of %d ordinary pods bound", bound, len(created))
		}
		return nil
	})
	if err == nil {
		r.admit("ordinary pods bound", len(created))
		r.mu.Lock()
		r.bindWaits = append(r.bindWaits, time.Since(start))
		r.mu.Unlock()
	}
	return err
}

// dryRuns sends n server-side dry-run creates: sets (through everynode's
// webhooks: they may fail while everynode is down) and ordinary pods
// (never through them: they must not fail for everynode).
func (r *runner) dryRuns(ctx context.Context, n int) error {
	cat := Catalog()
	dry := []string{metav1.DryRunAll}
	var errs []error
	for i := range n {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if i%2 == 0 {
			spec := cat[(i/2)%16] // the everynode sets come first
			ds := spec.Everynode(SetNamespace, spec.Template("v1", 1))
			ds.Name, ds.GenerateName = "", "dry-"
			ds.Spec.StartAfter = nil
			_, err := r.en.EverynodeV1alpha1().DaemonSets(SetNamespace).Create(ctx, ds, metav1.CreateOptions{DryRun: dry})
			if err != nil {
				r.admit("set dry runs failed ("+errClass(err)+")", 1)
				errs = append(errs, err)
			} else {
				r.admit("set dry runs admitted", 1)
			}
			continue
		}
		p := plainPod("", "dry")
		p.GenerateName = "dry-"
		if _, err := r.kube.CoreV1().Pods(PlainNamespace).Create(ctx, p, metav1.CreateOptions{DryRun: dry}); err != nil {
			r.refused("(dry run)", true, err)
			errs = append(errs, err)
		} else {
			r.admit("ordinary pod dry runs admitted", 1)
		}
	}
	return errors.Join(errs...)
}
