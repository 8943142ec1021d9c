package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// FileSource serves the certificate and key found in two PEM files. Each TLS
// handshake rereads them and, when their contents changed and form a valid
// pair, switches to the new certificate, so the very next handshake after a
// Secret volume swap presents the new certificate. Rereading two small files
// per handshake costs microseconds, and handshakes are rare: the API server
// and the scheduler keep connections alive. A half-written or mismatched pair
// is ignored and the previous certificate kept, so a rotation in progress
// never fails a request.
type FileSource struct {
	certFile, keyFile string
	now               func() time.Time

	// mu is held across a whole reload, its reads of the files and its
	// swap: two handshakes reloading across a Secret swap would otherwise
	// let the one that read the old files install them after the other
	// installed the new ones, and serve the old certificate again until the
	// next handshake. Every reader reloads first, so one lock serves both.
	mu                 sync.Mutex
	cert               *tls.Certificate
	certPEM, keyPEM    []byte
	loggedErrSinceLoad bool
}

// NewFileSource returns a source for the given files. It fails if the files
// cannot be read or do not hold a valid pair now, so a wrong flag is reported
// at start-up and not at the first request.
func NewFileSource(certFile, keyFile string) (*FileSource, error) {
	s := &FileSource{certFile: certFile, keyFile: keyFile, now: time.Now}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

// Start implements Source; a FileSource has no background work.
func (s *FileSource) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// GetCertificate implements Source.
func (s *FileSource) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reloadOrLog()
	if s.cert == nil {
		return nil, ErrNoCertificate
	}
	return s.cert, nil
}

// Healthy implements Source. It also rereads the files, so /readyz notices a
// rotation or an expiry even when no handshake happens.
func (s *FileSource) Healthy() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reloadOrLog()
	return checkValid(s.cert, s.now())
}

// reloadLocked reads both files and swaps in the pair when it changed.
// s.mu must be held.
func (s *FileSource) reloadLocked() error {
	certPEM, err := os.ReadFile(s.certFile)
	if err != nil {
		return fmt.Errorf("read certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(s.keyFile)
	if err != nil {
		return fmt.Errorf("read key: %w", err)
	}
	if bytes.Equal(certPEM, s.certPEM) && bytes.Equal(keyPEM, s.keyPEM) {
		return nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("load key pair %s, %s: %w", s.certFile, s.keyFile, err)
	}
	s.cert, s.certPEM, s.keyPEM = &pair, certPEM, keyPEM
	s.loggedErrSinceLoad = false
	klog.InfoS("Loaded serving certificate", "file", s.certFile, "notAfter", pair.Leaf.NotAfter)
	return nil
}

// reloadOrLog reloads, logging an error once per loaded certificate, not
// on every handshake. s.mu must be held.
func (s *FileSource) reloadOrLog() {
	err := s.reloadLocked()
	if err == nil || s.loggedErrSinceLoad {
		return
	}
	s.loggedErrSinceLoad = true
	klog.ErrorS(err, "Keeping the previous serving certificate")
}
