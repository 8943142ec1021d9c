package certs

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// caKey is where cert-manager's DynamicAuthority stores the CA certificate.
const caKey = "ca.crt"

// CABundleInjector copies the CA bundle of the self-signed mode's Secret
// (BundleKey: current, next and previous CA) into the caBundle of
// everynode's webhook configurations, whenever the Secret changes. A CA the
// configuration trusted that the new bundle lacks is kept until it expires
// (a CA Secret deleted and made anew has no previous CA), so the API server
// trusts the serving certificates of replicas that have not renewed yet.
type CABundleInjector struct {
	client                kubernetes.Interface
	namespace, secretName string
	validating, mutating  []string
	now                   func() time.Time
}

// NewCABundleInjector returns an injector for the named webhook
// configurations. Names that are neither a validating nor a mutating
// configuration are reported when injecting, not here, because the chart may
// create them after everynode starts.
func NewCABundleInjector(client kubernetes.Interface, namespace, secretName string, configurations []string) *CABundleInjector {
	return &CABundleInjector{
		client: client, namespace: namespace, secretName: secretName,
		validating: configurations, mutating: configurations, now: time.Now,
	}
}

// Run watches the CA Secret and injects on every change until ctx ends.
func (j *CABundleInjector) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(j.client, 10*time.Minute,
		informers.WithNamespace(j.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", j.secretName).String()
		}))
	inform := factory.Core().V1().Secrets().Informer()
	handle := func(obj interface{}) {
		secret, ok := obj.(*corev1.Secret)
		if !ok {
			return
		}
		// ca.crt alone: a Secret of an older everynode's DynamicAuthority,
		// until this version's Authority adds the bundle.
		bundle := secret.Data[BundleKey]
		if len(bundle) == 0 {
			bundle = secret.Data[caKey]
		}
		if len(bundle) == 0 {
			return
		}
		if err := j.Inject(ctx, bundle); err != nil {
			klog.ErrorS(err, "Injecting caBundle failed; will retry on the next resync")
		}
	}
	if _, err := inform.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, obj interface{}) { handle(obj) },
	}); err != nil {
		return fmt.Errorf("watch CA secret: %w", err)
	}
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
	return nil
}

// Inject writes caPEM (plus the previous, still valid CA) into every webhook
// of the configured configurations that exist.
func (j *CABundleInjector) Inject(ctx context.Context, caPEM []byte) error {
	vwc := j.client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	mwc := j.client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	for _, name := range j.validating {
		err := injectInto(ctx, caPEM, j.now(), name,
			func() (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
				return vwc.Get(ctx, name, metav1.GetOptions{})
			},
			func(c *admissionregistrationv1.ValidatingWebhookConfiguration) []*admissionregistrationv1.WebhookClientConfig {
				out := make([]*admissionregistrationv1.WebhookClientConfig, len(c.Webhooks))
				for i := range c.Webhooks {
					out[i] = &c.Webhooks[i].ClientConfig
				}
				return out
			},
			func(c *admissionregistrationv1.ValidatingWebhookConfiguration) error {
				_, err := vwc.Update(ctx, c, metav1.UpdateOptions{})
				return err
			})
		if err != nil {
			return fmt.Errorf("inject caBundle into ValidatingWebhookConfiguration %s: %w", name, err)
		}
	}
	for _, name := range j.mutating {
		err := injectInto(ctx, caPEM, j.now(), name,
			func() (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
				return mwc.Get(ctx, name, metav1.GetOptions{})
			},
			func(c *admissionregistrationv1.MutatingWebhookConfiguration) []*admissionregistrationv1.WebhookClientConfig {
				out := make([]*admissionregistrationv1.WebhookClientConfig, len(c.Webhooks))
				for i := range c.Webhooks {
					out[i] = &c.Webhooks[i].ClientConfig
				}
				return out
			},
			func(c *admissionregistrationv1.MutatingWebhookConfiguration) error {
				_, err := mwc.Update(ctx, c, metav1.UpdateOptions{})
				return err
			})
		if err != nil {
			return fmt.Errorf("inject caBundle into MutatingWebhookConfiguration %s: %w", name, err)
		}
	}
	return nil
}

// injectInto is the read-modify-write of one webhook configuration, of
// either kind: a missing configuration is skipped (the chart may not have
// created it yet), an unchanged one is not written, a conflict is retried.
func injectInto[T any](ctx context.Context, caPEM []byte, now time.Time, name string,
	get func() (T, error), clientConfigs func(T) []*admissionregistrationv1.WebhookClientConfig, update func(T) error) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg, err := get()
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		changed := false
		for _, cc := range clientConfigs(cfg) {
			b := mergeBundle(caPEM, cc.CABundle, now)
			if !bytes.Equal(b, cc.CABundle) {
				cc.CABundle, changed = b, true
			}
		}
		if !changed {
			return nil
		}
		if err := update(cfg); err != nil {
			return err
		}
		klog.InfoS("Injected caBundle", "webhookConfiguration", name)
		return nil
	})
}

// mergeBundle returns the certificates of current followed by the newest
// certificate of old that is not in current and still valid at now.
// Unparseable PEM in old is dropped.
func mergeBundle(current, old []byte, now time.Time) []byte {
	out := append([]byte(nil), bytes.TrimSpace(current)...)
	out = append(out, '\n')
	if keep := newestOther(old, now, parseBundle(current)...); keep != nil {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: keep.Raw})...)
	}
	return out
}
