package certs

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/cert-manager/cert-manager/pkg/server/tls/authority"
	"github.com/cert-manager/cert-manager/pkg/util/pki"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// The keys and annotations of the self-signed mode's CA Secret.
//
// The current CA sits where cert-manager's DynamicAuthority keeps it
// (tls.crt, tls.key, and ca.crt equal to tls.crt), so a replica of an
// older everynode, which ran DynamicAuthority, keeps signing with the same
// CA during an upgrade instead of regenerating it.
//
// What DynamicAuthority lacks is a CA published before it is used. A
// caller that reads its CA file once, as kube-scheduler does for an
// extender (k8s.io/kubernetes pkg/scheduler/extender.go makeTransport
// reads tlsConfig.caFile when the scheduler starts and never again), would
// otherwise fail every call from the moment the CA rotates until it is
// restarted. So the Secret also holds the next CA, and BundleKey lists
// every CA a caller must trust: the current one, the next one, and the
// previous one while replicas may still serve a certificate it signed. A
// rotation promotes the next CA, which every caller has trusted since the
// last rotation, and publishes a new next one.
const (
	// BundleKey holds the CAs a caller must trust (PEM, current first):
	// the webhook caBundles and kube-scheduler's extender caFile.
	BundleKey = "ca-bundle.crt"
	// nextCertKey and nextKeyKey hold the next CA.
	nextCertKey = "next.crt"
	nextKeyKey  = "next.key"

	// RotateAnnotation on the Secret, with any value, asks for a rotation
	// now; everynode removes it in the same write that rotates.
	RotateAnnotation = "everynode.io/rotate-ca"
	// RotatedAnnotation says when and why the CAs last changed.
	RotatedAnnotation = "everynode.io/ca-changed"

	// DefaultCADuration is the life of each CA: published as next for a
	// third of it, current for a third (so the rotation comes when a third
	// is left, as DynamicAuthority renews), trusted as previous for the
	// rest. Rotations come every year, then.
	DefaultCADuration = 3 * 365 * 24 * time.Hour
	// DefaultLeafDuration is DynamicAuthority's serving certificate life.
	DefaultLeafDuration = 7 * 24 * time.Hour
)

// caPair is one CA: its certificate and key, parsed and in PEM.
type caPair struct {
	cert            *x509.Certificate
	key             crypto.Signer
	certPEM, keyPEM []byte
}

// parseCA returns the CA certificate and key in certPEM and keyPEM, or why
// they cannot sign at now.
func parseCA(certPEM, keyPEM []byte, now time.Time) (*caPair, error) {
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, errors.New("missing")
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("certificate and key do not match: %w", err)
	}
	cert, err := pki.DecodeX509CertificateBytes(certPEM)
	if err != nil {
		return nil, err
	}
	key, err := pki.DecodePrivateKeyBytes(keyPEM)
	if err != nil {
		return nil, err
	}
	switch {
	case !cert.IsCA:
		return nil, errors.New("not a CA")
	case now.Before(cert.NotBefore) || !now.Before(cert.NotAfter):
		return nil, fmt.Errorf("not valid now (%s to %s)", cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return &caPair{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// nearExpiry says whether less than a third of cert's life is left, when
// DynamicAuthority would regenerate it.
func nearExpiry(cert *x509.Certificate, now time.Time) bool {
	return cert.NotAfter.Sub(now) < cert.NotAfter.Sub(cert.NotBefore)/3
}

// publishedLongEnough says whether the next CA has been published for a
// third of its life, when it is promoted. Counting from the next CA, not
// from the current one, keeps the schedule when both were made together
// (the first start): the first rotation then comes a third of the way in,
// and each CA is next, current and previous for a third of its life.
func publishedLongEnough(next *x509.Certificate, now time.Time) bool {
	return now.Sub(next.NotBefore) >= next.NotAfter.Sub(next.NotBefore)/3
}

// planCAs is the self-signed mode's rule, pure: given the Secret's data,
// whether a rotation was asked for, and a way to make a new CA, it returns
// the data the Secret should hold, or nil when it holds it already, and why
// it changed. stored is not modified.
func planCAs(stored map[string][]byte, rotate bool, now time.Time, newCA func() (*caPair, error)) (map[string][]byte, string, error) {
	cur, curErr := parseCA(stored[corev1.TLSCertKey], stored[corev1.TLSPrivateKeyKey], now)
	next, nextErr := parseCA(stored[nextCertKey], stored[nextKeyKey], now)
	var prev *x509.Certificate
	var why []string
	promote := func() error {
		if next == nil {
			var err error
			if next, err = newCA(); err != nil {
				return err
			}
			why = append(why, "no usable next CA to promote, so a new one is current at once: callers that read their CA file once fail until restarted")
		}
		prev, cur, next = cur.cert, next, nil
		return nil
	}
	switch {
	case curErr != nil && next != nil:
		why = append(why, fmt.Sprintf("current CA unusable (%v): promoted the next CA", curErr))
		cur, next = next, nil
	case curErr != nil:
		c, err := newCA()
		if err != nil {
			return nil, "", err
		}
		cur = c
		why = append(why, fmt.Sprintf("no usable CA (%v): made a new one; callers trusting an older CA fail until they load %s", curErr, BundleKey))
	case rotate:
		if err := promote(); err != nil {
			return nil, "", err
		}
		why = append([]string{"rotation asked for (" + RotateAnnotation + "): promoted the next CA"}, why...)
	case next != nil && publishedLongEnough(next.cert, now):
		why = append(why, "next CA published for a third of its life: promoted it")
		prev, cur, next = cur.cert, next, nil
	case nearExpiry(cur.cert, now):
		if err := promote(); err != nil {
			return nil, "", err
		}
		why = append([]string{"current CA has less than a third of its life left: promoted the next CA"}, why...)
	}
	if next == nil {
		if nextErr != nil && len(why) == 0 {
			why = append(why, fmt.Sprintf("next CA %v: published a new one", nextErr))
		}
		n, err := newCA()
		if err != nil {
			return nil, "", err
		}
		next = n
	}
	if prev == nil {
		prev = newestOther(stored[BundleKey], now, cur.cert, next.cert)
	}

	bundle := append(append([]byte(nil), cur.certPEM...), next.certPEM...)
	if prev != nil {
		bundle = append(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: prev.Raw})...)
	}
	out := maps.Clone(stored)
	if out == nil {
		out = map[string][]byte{}
	}
	out[corev1.TLSCertKey], out[corev1.TLSPrivateKeyKey], out[caKey] = cur.certPEM, cur.keyPEM, cur.certPEM
	out[nextCertKey], out[nextKeyKey] = next.certPEM, next.keyPEM
	out[BundleKey] = bundle
	if maps.EqualFunc(out, stored, bytes.Equal) {
		return nil, "", nil
	}
	if len(why) == 0 {
		why = append(why, "wrote "+BundleKey)
	}
	return out, strings.Join(why, "; "), nil
}

// newestOther returns the newest certificate in bundlePEM that is valid at
// now and is none of not, or nil.
func newestOther(bundlePEM []byte, now time.Time, not ...*x509.Certificate) *x509.Certificate {
	var newest *x509.Certificate
	for _, c := range parseBundle(bundlePEM) {
		if now.After(c.NotAfter) || isAny(c, not) {
			continue
		}
		if newest == nil || c.NotBefore.After(newest.NotBefore) {
			newest = c
		}
	}
	return newest
}

func isAny(c *x509.Certificate, set []*x509.Certificate) bool {
	for _, s := range set {
		if bytes.Equal(c.Raw, s.Raw) {
			return true
		}
	}
	return false
}

// parseBundle returns the certificates of a PEM bundle, skipping what does
// not parse.
func parseBundle(bundlePEM []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for rest := bundlePEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return out
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

// newCAFunc returns a maker of self-signed CAs named commonName, valid for
// life from the moment they are made.
func newCAFunc(commonName string, life time.Duration, now func() time.Time) func() (*caPair, error) {
	return func() (*caPair, error) {
		key, err := pki.GenerateECPrivateKey(384)
		if err != nil {
			return nil, err
		}
		keyPEM, err := pki.EncodePrivateKey(key, cmapi.PKCS8)
		if err != nil {
			return nil, err
		}
		start := now()
		tmpl := &x509.Certificate{
			BasicConstraintsValid: true,
			PublicKeyAlgorithm:    x509.ECDSA,
			// Every CA of a bundle needs its own name: clients build the
			// chain by issuer name, and the current and next CA are made
			// in the same second at the first start. The time tells them
			// apart for people; the random part for machines.
			Subject:   pkix.Name{CommonName: fmt.Sprintf("%s-%s-%s", commonName, start.UTC().Format("20060102T150405Z"), rand.Text()[:8])},
			IsCA:      true,
			NotBefore: start,
			NotAfter:  start.Add(life),
			KeyUsage:  x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		}
		_, cert, err := pki.SignCertificate(tmpl, tmpl, key.Public(), key)
		if err != nil {
			return nil, err
		}
		certPEM, err := pki.EncodeX509(cert)
		if err != nil {
			return nil, err
		}
		return &caPair{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
	}
}

// Authority keeps the self-signed mode's CAs in one Secret (see BundleKey)
// and signs serving certificates with the current one. It is the Authority
// of cert-manager's DynamicSource, in place of DynamicAuthority. Every
// replica runs one; they agree through the Secret's resourceVersion: a
// replica whose write conflicts reads the winner's Secret and uses it.
type Authority struct {
	client                kubernetes.Interface
	namespace, secretName string
	caDuration, leaf      time.Duration
	now                   func() time.Time
	newCA                 func() (*caPair, error)
	lister                corelisters.SecretNamespaceLister

	ensureMu sync.Mutex

	mu      sync.Mutex // guards current and watches
	current *caPair
	watches []chan<- struct{}
}

var _ interface {
	Run(context.Context) error
	WatchRotation(chan<- struct{})
	StopWatchingRotation(chan<- struct{})
	Sign(*x509.Certificate) (*x509.Certificate, error)
} = &Authority{}

// NewAuthority returns the authority of the Secret namespace/secretName;
// caDuration 0 means DefaultCADuration.
func NewAuthority(client kubernetes.Interface, namespace, secretName string, caDuration time.Duration) *Authority {
	if caDuration == 0 {
		caDuration = DefaultCADuration
	}
	a := &Authority{client: client, namespace: namespace, secretName: secretName,
		caDuration: caDuration, leaf: DefaultLeafDuration, now: time.Now}
	a.newCA = newCAFunc("everynode-ca", caDuration, func() time.Time { return a.now() })
	return a
}

// Run watches the Secret and keeps it as planCAs wants it until ctx ends:
// on every change, and every 10 seconds (a CA nears expiry with no event).
func (a *Authority) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(a.client, time.Minute,
		informers.WithNamespace(a.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", a.secretName).String()
		}))
	inform := factory.Core().V1().Secrets().Informer()
	a.lister = factory.Core().V1().Secrets().Lister().Secrets(a.namespace)
	ensure := func() {
		if err := a.ensure(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Keeping the CA Secret failed; retrying", "secret", klog.KRef(a.namespace, a.secretName))
		}
	}
	if _, err := inform.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { ensure() },
		UpdateFunc: func(any, any) { ensure() },
		DeleteFunc: func(any) { ensure() },
	}); err != nil {
		return fmt.Errorf("watch CA secret: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inform.HasSynced) {
		return ctx.Err()
	}
	_ = wait.PollUntilContextCancel(ctx, 10*time.Second, true, func(context.Context) (bool, error) {
		ensure()
		return false, nil
	})
	return ctx.Err()
}

// ensure writes the Secret planCAs asks for, if any, and makes its current
// CA the one that signs.
func (a *Authority) ensure(ctx context.Context) error {
	a.ensureMu.Lock()
	defer a.ensureMu.Unlock()
	stored, err := a.lister.Get(a.secretName)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	var data map[string][]byte
	rotate := false
	if stored != nil {
		data = stored.Data
		_, rotate = stored.Annotations[RotateAnnotation]
	}
	want, why, err := planCAs(data, rotate, a.now(), a.newCA)
	if err != nil {
		return err
	}
	if want == nil { // a rotation asked for always changes the data
		return a.use(data)
	}
	changed := a.now().UTC().Format(time.RFC3339) + " " + why
	if stored == nil {
		_, err = a.client.CoreV1().Secrets(a.namespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: a.secretName, Namespace: a.namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "everynode"},
				Annotations: map[string]string{
					// As DynamicAuthority: cert-manager's cainjector may read it.
					cmapi.AllowsInjectionFromSecretAnnotation: "true",
					RotatedAnnotation:                         changed,
				},
			},
			Data: want,
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil // another replica made it; its watch event comes next
		}
	} else {
		s := stored.DeepCopy()
		s.Data = want
		delete(s.Annotations, RotateAnnotation)
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[RotatedAnnotation] = changed
		_, err = a.client.CoreV1().Secrets(a.namespace).Update(ctx, s, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return nil // another replica wrote first; its watch event comes next
		}
	}
	if err != nil {
		return err
	}
	klog.InfoS("Changed the CA Secret", "secret", klog.KRef(a.namespace, a.secretName), "why", why)
	return a.use(want)
}

// use makes the current CA of data the signing one, and tells the
// watchers (DynamicSource then signs a new serving certificate) when it
// changed.
func (a *Authority) use(data map[string][]byte) error {
	cur, err := parseCA(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey], a.now())
	if err != nil {
		return fmt.Errorf("current CA: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.current != nil && bytes.Equal(a.current.certPEM, cur.certPEM) {
		return nil
	}
	a.current = cur
	for _, ch := range a.watches {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return nil
}

// WatchRotation asks for a signal on ch whenever the signing CA changes.
func (a *Authority) WatchRotation(ch chan<- struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.watches = append(a.watches, ch)
}

// StopWatchingRotation undoes WatchRotation.
func (a *Authority) StopWatchingRotation(ch chan<- struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, c := range a.watches {
		if c == ch {
			a.watches = append(a.watches[:i], a.watches[i+1:]...)
			return
		}
	}
}

// Sign signs template with the current CA for the leaf duration (cut to
// the CA's own end).
func (a *Authority) Sign(template *x509.Certificate) (*x509.Certificate, error) {
	a.mu.Lock()
	ca := a.current
	a.mu.Unlock()
	if ca == nil {
		// DynamicSource retries quietly on exactly this error.
		return nil, authority.ErrCertificateNotAvailable
	}
	template.BasicConstraintsValid = true
	template.NotBefore = a.now()
	template.NotAfter = template.NotBefore.Add(a.leaf)
	if ca.cert.NotAfter.Before(template.NotAfter) {
		template.NotAfter = ca.cert.NotAfter
	}
	_, cert, err := pki.SignCertificate(template, ca.cert, template.PublicKey, ca.key)
	return cert, err
}
