package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// newPair returns a self-signed certificate and key in PEM, with the given
// serial so a client can tell which one it got.
func newPair(t *testing.T, serial int64, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               pkix.Name{CommonName: "everynode-test"},
		DNSNames:              []string{"localhost"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// secretVolume lays files out as the kubelet does for a Secret volume:
// tls.crt -> ..data/tls.crt, ..data -> a timestamped folder, and an update
// swaps the ..data symlink atomically.
type secretVolume struct {
	t   *testing.T
	dir string
	gen int
}

func newSecretVolume(t *testing.T, certPEM, keyPEM []byte) *secretVolume {
	v := &secretVolume{t: t, dir: t.TempDir()}
	v.swap(certPEM, keyPEM)
	for _, name := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(v.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

func (v *secretVolume) swap(certPEM, keyPEM []byte) {
	v.gen++
	gen := filepath.Join(v.dir, "..gen"+string(rune('a'+v.gen)))
	if err := os.Mkdir(gen, 0o755); err != nil {
		v.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gen, "tls.crt"), certPEM, 0o600); err != nil {
		v.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gen, "tls.key"), keyPEM, 0o600); err != nil {
		v.t.Fatal(err)
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(gen), tmp); err != nil {
		v.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		v.t.Fatal(err)
	}
}

func (v *secretVolume) certFile() string { return filepath.Join(v.dir, "tls.crt") }
func (v *secretVolume) keyFile() string  { return filepath.Join(v.dir, "tls.key") }

// TestFileSourceHotReload serves HTTPS from a FileSource, swaps the Secret
// volume under it while requests keep flowing, and checks that the very next
// handshake presents the new certificate and that no request failed.
func TestFileSourceHotReload(t *testing.T) {
	now := time.Now()
	cert1, key1 := newPair(t, 1, now.Add(-time.Hour), now.Add(time.Hour))
	cert2, key2 := newPair(t, 2, now.Add(-time.Hour), now.Add(time.Hour))
	vol := newSecretVolume(t, cert1, key1)

	src, err := NewFileSource(vol.certFile(), vol.keyFile())
	if err != nil {
		t.Fatal(err)
	}
	// A plain listener, not httptest's StartTLS: that one installs its own
	// certificate, which crypto/tls prefers over GetCertificate.
	ln, err := tls.Listen("tcp", "127.0.0.1:0", TLSConfig(src, nil))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	url := "https://" + ln.Addr().String()

	// Every request is a new connection, so every request is a handshake.
	// Only the probe records the serial it saw: the concurrent traffic's
	// handshakes (on a client of its own) must not be taken for get's.
	newClient := func(verify func(tls.ConnectionState) error) *http.Client {
		return &http.Client{Transport: &http.Transport{
			DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{
				InsecureSkipVerify: true, // the test checks the serial itself
				VerifyConnection:   verify,
			},
		}}
	}
	var mu sync.Mutex
	var lastSerial int64
	probe := newClient(func(cs tls.ConnectionState) error {
		lastSerial = cs.PeerCertificates[0].SerialNumber.Int64()
		return nil
	})
	client := newClient(nil)
	get := func() int64 {
		t.Helper()
		resp, err := probe.Get(url)
		if err != nil {
			t.Fatalf("request failed: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return lastSerial
	}

	// Concurrent traffic across the swap must never fail.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failures []error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := client.Get(url)
			if err != nil {
				mu.Lock()
				failures = append(failures, err)
				mu.Unlock()
				continue
			}
			resp.Body.Close()
		}
	}()

	if got := get(); got != 1 {
		t.Fatalf("before the swap: serial %d, want 1", got)
	}
	vol.swap(cert2, key2)
	if got := get(); got != 2 {
		t.Fatalf("first handshake after the swap: serial %d, want 2", got)
	}
	close(stop)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d requests failed during the swap, first: %v", len(failures), failures[0])
	}
	if err := src.Healthy(); err != nil {
		t.Fatalf("Healthy after swap: %v", err)
	}
}

func TestFileSourceKeepsOldPairOnBadUpdate(t *testing.T) {
	now := time.Now()
	cert1, key1 := newPair(t, 1, now.Add(-time.Hour), now.Add(time.Hour))
	_, otherKey := newPair(t, 2, now.Add(-time.Hour), now.Add(time.Hour))
	vol := newSecretVolume(t, cert1, key1)
	src, err := NewFileSource(vol.certFile(), vol.keyFile())
	if err != nil {
		t.Fatal(err)
	}
	vol.swap(cert1, otherKey) // mismatched pair, as a careless writer could leave
	got, err := src.GetCertificate(nil)
	if err != nil {
		t.Fatalf("GetCertificate: %v", err)
	}
	if got.Leaf.SerialNumber.Int64() != 1 {
		t.Fatalf("serial %d, want the old certificate 1", got.Leaf.SerialNumber.Int64())
	}
}

func TestFileSourceHealthy(t *testing.T) {
	now := time.Now()
	tests := map[string]struct {
		notBefore, notAfter time.Time
		wantErr             bool
	}{
		"valid":         {now.Add(-time.Hour), now.Add(time.Hour), false},
		"expired":       {now.Add(-2 * time.Hour), now.Add(-time.Hour), true},
		"not yet valid": {now.Add(time.Hour), now.Add(2 * time.Hour), true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, k := newPair(t, 1, tc.notBefore, tc.notAfter)
			vol := newSecretVolume(t, c, k)
			src, err := NewFileSource(vol.certFile(), vol.keyFile())
			if err != nil {
				t.Fatal(err)
			}
			if err := src.Healthy(); (err != nil) != tc.wantErr {
				t.Fatalf("Healthy() = %v, want error: %v", err, tc.wantErr)
			}
		})
	}
}

func TestNewFileSourceRejectsMissingFiles(t *testing.T) {
	if _, err := NewFileSource("/nonexistent/tls.crt", "/nonexistent/tls.key"); err == nil {
		t.Fatal("want an error for missing files")
	}
}

func TestMergeBundle(t *testing.T) {
	now := time.Now()
	oldCA, _ := newPair(t, 1, now.Add(-2*time.Hour), now.Add(time.Hour))
	expiredCA, _ := newPair(t, 2, now.Add(-3*time.Hour), now.Add(-time.Hour))
	newCA, _ := newPair(t, 3, now.Add(-time.Minute), now.Add(time.Hour))
	serials := func(b []byte) []int64 {
		var out []int64
		for rest := b; ; {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				return out
			}
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, c.SerialNumber.Int64())
		}
	}
	tests := map[string]struct {
		old  []byte
		want []int64
	}{
		"empty bundle":          {nil, []int64{3}},
		"same CA again":         {newCA, []int64{3}},
		"keeps previous CA":     {oldCA, []int64{3, 1}},
		"drops expired CA":      {expiredCA, []int64{3}},
		"garbage dropped":       {[]byte("not pem"), []int64{3}},
		"previous plus expired": {append(append([]byte{}, expiredCA...), oldCA...), []int64{3, 1}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := serials(mergeBundle(newCA, tc.old, now))
			if len(got) != len(tc.want) {
				t.Fatalf("serials %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("serials %v, want %v", got, tc.want)
				}
			}
		})
	}
}
