package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The harness's certificates, made once per checkout in .e2e/pki and kept:
//   - ca.crt: the CA the webhook configurations and the scheduler's
//     extender config trust; tls.crt and tls.key: everynode's serving
//     certificate for 127.0.0.1 and localhost, signed by it;
//   - client-ca.crt: a second CA, for client certificates only, so the
//     serving CA signs no client; apiserver-client.* and
//     scheduler-client.*: what kube-apiserver (as webhook client) and
//     kube-scheduler (as extender client) present to everynode, checked
//     when client authentication is on (ClientAuth).

// ensurePKI makes whatever of the certificates is missing.
func (c *Cluster) ensurePKI() error {
	dir := c.PKI()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ca, err := loadOrMakeCA(dir, "ca", "everynode-e2e-ca")
	if err != nil {
		return err
	}
	if err := ensureLeaf(dir, "tls", ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "everynode"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return err
	}
	clientCA, err := loadOrMakeCA(dir, "client-ca", "everynode-e2e-client-ca")
	if err != nil {
		return err
	}
	for _, who := range []string{"apiserver", "scheduler"} {
		if err := ensureLeaf(dir, who+"-client", clientCA, &x509.Certificate{
			Subject:     pkix.Name{CommonName: "kube-" + who},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}); err != nil {
			return err
		}
	}
	return nil
}

type keyPair struct {
	cert *x509.Certificate
	// key is a P-256 key for the harness's own pairs; kwokctl's CA, which
	// signs the real node's identities, may hold an RSA one.
	key crypto.Signer
}

func loadOrMakeCA(dir, name, cn string) (keyPair, error) {
	if kp, err := loadPair(dir, name); err == nil {
		return kp, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return kp, err
	}
	return makePair(dir, name, &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil)
}

func ensureLeaf(dir, name string, ca keyPair, tmpl *x509.Certificate) error {
	if _, err := loadPair(dir, name); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	_, err := makePair(dir, name, tmpl, &ca)
	return err
}

// makePair makes a P-256 key and a certificate of tmpl valid for a year,
// signed by parent (itself if nil), and writes name.crt and name.key.
func makePair(dir, name string, tmpl *x509.Certificate, parent *keyPair) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return keyPair{}, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(365 * 24 * time.Hour)
	var signer crypto.Signer = key
	signerCert := tmpl
	if parent != nil {
		signer, signerCert = parent.key, parent.cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signer)
	if err != nil {
		return keyPair{}, fmt.Errorf("certificate %s: %w", name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return keyPair{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return keyPair{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return keyPair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	return keyPair{cert: cert, key: key}, err
}

func loadPair(dir, name string) (keyPair, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, name+".crt"))
	if err != nil {
		return keyPair{}, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, name+".key"))
	if err != nil {
		return keyPair{}, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return keyPair{}, fmt.Errorf("%s: not PEM", filepath.Join(dir, name))
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return keyPair{}, fmt.Errorf("%s.crt: %w", name, err)
	}
	var key crypto.Signer
	if ec, err := x509.ParseECPrivateKey(kb.Bytes); err == nil {
		key = ec
	} else if r, errRSA := x509.ParsePKCS1PrivateKey(kb.Bytes); errRSA == nil {
		key = r
	} else {
		// openssl writes PKCS#8 ("PRIVATE KEY").
		k, err8 := x509.ParsePKCS8PrivateKey(kb.Bytes)
		signer, ok := k.(crypto.Signer)
		if err8 != nil || !ok {
			return keyPair{}, fmt.Errorf("%s.key: %w", name, err)
		}
		key = signer
	}
	if time.Now().After(cert.NotAfter.Add(-24 * time.Hour)) {
		return keyPair{}, fmt.Errorf("%s.crt expires %s: remove %s to make new certificates", name, cert.NotAfter, dir)
	}
	return keyPair{cert: cert, key: key}, nil
}
