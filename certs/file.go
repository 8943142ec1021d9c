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

	// reloadMu makes each reload's read and swap one step: two handshakes
	// reloading across a Secret swap would otherwise let the one that read
	// the old files install them after the other installed the new ones,
	// and serve the old certificate again until the next handshake.
	reloadMu sync.Mutex

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
	if err := s.reload(); err != nil {
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
	if err := s.reload(); err != nil {
		s.logOnce(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cert == nil {
		return nil, ErrNoCertificate
	}
	return s.cert, nil
}

// Healthy implements Source. It also rereads the files, so /readyz notices a
// rotation or an expiry even when no handshake happens.
func (s *FileSource) Healthy() error {
	if err := s.reload(); err != nil {
		s.logOnce(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return checkValid(s.cert, s.now())
}

// reload reads both files and swaps in the pair when it changed.
func (s *FileSource) reload() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	certPEM, err := os.ReadFile(s.certFile)
	if err != nil {
		return fmt.Errorf("read certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(s.keyFile)
	if err != nil {
		return fmt.Errorf("read key: %w", err)
	}
	s.mu.Lock()
	unchanged := bytes.Equal(certPEM, s.certPEM) && bytes.Equal(keyPEM, s.keyPEM)
	s.mu.Unlock()
	if unchanged {
		return nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("load key pair %s, %s: %w", s.certFile, s.keyFile, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cert, s.certPEM, s.keyPEM = &pair, certPEM, keyPEM
	s.loggedErrSinceLoad = false
	klog.InfoS("Loaded serving certificate", "file", s.certFile, "notAfter", pair.Leaf.NotAfter)
	return nil
}

// logOnce logs a reload error once per loaded certificate, not on every
// handshake.
func (s *FileSource) logOnce(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loggedErrSinceLoad {
		return
	}
	s.loggedErrSinceLoad = true
	klog.ErrorS(err, "Keeping the previous serving certificate")
}
