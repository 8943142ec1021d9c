package certs

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	cmtls "github.com/cert-manager/cert-manager/pkg/server/tls"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// SelfSigned keeps CAs in a Secret and serves a certificate signed by the
// current one, renewing both before they expire. It is cert-manager's
// DynamicSource over everynode's Authority, which publishes the next CA a
// rotation ahead: every replica shares the CAs through the Secret, so the
// caBundle the API server trusts is the same whichever replica answers, and
// a rotation fails no caller that loaded the bundle since the last one.
type SelfSigned struct {
	src *cmtls.DynamicSource
	now func() time.Time
}

// SelfSignedOptions configure NewSelfSigned.
type SelfSignedOptions struct {
	// Namespace and SecretName locate the CA Secret; it is created when missing.
	Namespace, SecretName string
	// DNSNames go into the serving certificate, e.g. the Service's names.
	DNSNames []string
	// RESTConfig reaches the API server holding the Secret.
	RESTConfig *rest.Config
	// CADuration is each CA's life; 0 means DefaultCADuration.
	CADuration time.Duration
}

// NewSelfSigned validates opts and returns the source; Start runs it.
func NewSelfSigned(opts SelfSignedOptions) (*SelfSigned, error) {
	switch {
	case opts.Namespace == "" || opts.SecretName == "":
		return nil, fmt.Errorf("self-signed certificates need a namespace and a CA secret name")
	case len(opts.DNSNames) == 0:
		return nil, fmt.Errorf("self-signed certificates need at least one DNS name")
	case opts.RESTConfig == nil:
		return nil, fmt.Errorf("self-signed certificates need a connection to the API server")
	}
	client, err := kubernetes.NewForConfig(opts.RESTConfig)
	if err != nil {
		return nil, err
	}
	return &SelfSigned{
		now: time.Now,
		src: &cmtls.DynamicSource{
			DNSNames:  opts.DNSNames,
			Authority: NewAuthority(client, opts.Namespace, opts.SecretName, opts.CADuration),
		},
	}, nil
}

// Start implements Source: it creates or loads the CA and keeps the serving
// certificate renewed until ctx ends.
func (s *SelfSigned) Start(ctx context.Context) error {
	klog.InfoS("Starting self-signed certificate authority")
	return s.src.Start(ctx)
}

// GetCertificate implements Source.
func (s *SelfSigned) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.src.GetCertificate(hello)
}

// Healthy implements Source.
func (s *SelfSigned) Healthy() error {
	cert, err := s.src.GetCertificate(nil)
	if err != nil {
		return ErrNoCertificate
	}
	return checkValid(cert, s.now())
}
