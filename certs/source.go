package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"
)

// Source provides the serving certificate.
type Source interface {
	// GetCertificate is used as tls.Config.GetCertificate.
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Start runs background work (if any) until ctx ends.
	Start(ctx context.Context) error
	// Healthy returns nil when a certificate valid at this moment is loaded.
	Healthy() error
}

// ErrNoCertificate means no certificate has been loaded yet.
var ErrNoCertificate = errors.New("no serving certificate loaded")

// checkValid says whether cert is usable at now.
func checkValid(cert *tls.Certificate, now time.Time) error {
	if cert == nil {
		return ErrNoCertificate
	}
	leaf := cert.Leaf
	if leaf == nil {
		return errors.New("serving certificate has no parsed leaf")
	}
	if now.Before(leaf.NotBefore) {
		return fmt.Errorf("serving certificate is not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	if now.After(leaf.NotAfter) {
		return fmt.Errorf("serving certificate expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// TLSConfig returns the server TLS settings every everynode listener uses:
// TLS 1.2 at least, certificates from src. With clientCAs, every client
// must present a certificate one of them signed (the handshake fails
// otherwise, before any request is read). The protocols offered (ALPN)
// are left to the http.Server's Protocols, which fills them in.
func TLSConfig(src Source, clientCAs *x509.CertPool) *tls.Config {
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: src.GetCertificate,
	}
	if clientCAs != nil {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = clientCAs
	}
	return cfg
}

// LoadCAPool reads a PEM bundle of CA certificates. A file with no
// certificate in it is an error: it would refuse every client.
func LoadCAPool(path string) (*x509.CertPool, error) {
	pemData, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read client CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, fmt.Errorf("client CA bundle %s holds no PEM certificate", path)
	}
	return pool, nil
}
