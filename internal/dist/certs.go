package dist

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
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TLSCAKeyFile is the CA's private key beside ca.crt in the directory
// braid certs keeps the CA in; it never goes into a node's directory.
const TLSCAKeyFile = "ca.key"

// CA is a cluster's certificate authority: what braid certs makes once and
// signs every node's certificate with.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
}

// NewCA makes a self-signed CA (ECDSA P-256) valid from now for validFor.
func NewCA(name string, validFor time.Duration) (*CA, error) {
	if validFor <= 0 {
		return nil, fmt.Errorf("dist: CA validity %v: want a positive duration", validFor)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("dist: CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"braid cluster"}},
		NotBefore:             now.Add(-time.Hour), // clocks of a cluster's nodes differ a little
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("dist: CA certificate: %w", err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: c, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// LoadCA reads a CA written by WriteCA (ca.crt and ca.key in dir).
func LoadCA(dir string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, TLSCAFile), filepath.Join(dir, TLSCAKeyFile)
	cp, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("dist: reading the CA certificate: %w", err)
	}
	kp, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("dist: reading the CA key: %w", err)
	}
	cb, _ := pem.Decode(cp)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("dist: %s: no PEM CERTIFICATE block", certPath)
	}
	c, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("dist: %s: %w", certPath, err)
	}
	if !c.IsCA {
		return nil, fmt.Errorf("dist: %s: %q is not a CA certificate", certPath, c.Subject.String())
	}
	kb, _ := pem.Decode(kp)
	if kb == nil {
		return nil, fmt.Errorf("dist: %s: no PEM block", keyPath)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("dist: %s: %w", keyPath, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("dist: %s: the key cannot sign", keyPath)
	}
	if !publicKeysEqual(signer.Public(), c.PublicKey) {
		return nil, fmt.Errorf("dist: %s is not the key of %s", keyPath, certPath)
	}
	return &CA{Cert: c, Key: signer, CertPEM: pem.EncodeToMemory(cb)}, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}

// WriteCA writes ca.crt and ca.key (mode 0600) into dir, refusing to
// overwrite a CA there: every node's certificate hangs on it.
func (ca *CA) WriteCA(dir string) error {
	kd, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return fmt.Errorf("dist: CA key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("dist: %w", err)
	}
	if err := writeNew(filepath.Join(dir, TLSCAKeyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		return err
	}
	return writeNew(filepath.Join(dir, TLSCAFile), ca.CertPEM, 0o644)
}

// Issue makes a node certificate (ECDSA P-256) for both roles a node has,
// server and client, with hosts (names or IP addresses) as its subject
// alternative names for tools that check them; braid's peers check the
// CA only (see TLS).
func (ca *CA) Issue(name string, hosts []string, validFor time.Duration) (certPEM, keyPEM []byte, err error) {
	if name == "" {
		return nil, nil, errors.New("dist: a node certificate needs a name")
	}
	if validFor <= 0 {
		return nil, nil, fmt.Errorf("dist: certificate validity %v: want a positive duration", validFor)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("dist: node key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	notAfter := now.Add(validFor)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"braid cluster"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("dist: node certificate: %w", err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}), nil
}

// WriteNodeDir writes a node's TLS directory (what --tls-dir reads):
// the CA's certificate, the node's certificate and its key (mode 0600).
// It refuses to overwrite a file there.
func (ca *CA) WriteNodeDir(dir string, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("dist: %w", err)
	}
	for _, f := range []struct {
		name string
		b    []byte
		mode os.FileMode
	}{{TLSKeyFile, keyPEM, 0o600}, {TLSCertFile, certPEM, 0o644}, {TLSCAFile, ca.CertPEM, 0o644}} {
		if err := writeNew(filepath.Join(dir, f.name), f.b, f.mode); err != nil {
			return err
		}
	}
	return nil
}

func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("dist: %s exists; not overwritten (remove it first to replace it)", path)
		}
		return fmt.Errorf("dist: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("dist: writing %s: %w", path, err)
	}
	return f.Close()
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("dist: certificate serial: %w", err)
	}
	return n, nil
}
