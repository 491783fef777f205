//go:build !race

package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
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

// The static admin token's user; its group system:masters passes every
// authorization check.
const (
	adminUser  = "admin"
	adminGroup = "system:masters"
)

// files are the paths of everything the control plane reads from --dir.
type files struct {
	caCert, caKey         string // the CA that signs the serving certificate
	servingCert, servKey  string // kube-apiserver's serving certificate
	saKey                 string // RSA key signing and verifying service account tokens
	tokens                string // static token file
	adminToken            string // the admin token itself (read from tokens)
	etcdDir, kubeconfigAt string
}

// ensurePKI creates the CA, serving certificate, service account key and
// admin token under dir/pki unless they already exist. Existing files are
// reused as they are: a restarted cluster keeps the same identity, so tokens
// and kubeconfigs issued before the restart stay valid.
func ensurePKI(dir string) (files, error) {
	pki := filepath.Join(dir, "pki")
	f := files{
		caCert:       filepath.Join(pki, "ca.crt"),
		caKey:        filepath.Join(pki, "ca.key"),
		servingCert:  filepath.Join(pki, "apiserver.crt"),
		servKey:      filepath.Join(pki, "apiserver.key"),
		saKey:        filepath.Join(pki, "sa.key"),
		tokens:       filepath.Join(pki, "tokens.csv"),
		etcdDir:      filepath.Join(dir, "etcd"),
		kubeconfigAt: filepath.Join(dir, "kubeconfig"),
	}
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return f, err
	}
	steps := []struct {
		path string
		make func() error
	}{
		{f.caCert, func() error { return makeCA(f.caCert, f.caKey) }},
		{f.servingCert, func() error { return makeServingCert(f) }},
		{f.saKey, func() error { return makeRSAKey(f.saKey) }},
		{f.tokens, func() error { return makeTokenFile(f.tokens) }},
	}
	for _, s := range steps {
		if exists, err := fileExists(s.path); err != nil {
			return f, err
		} else if !exists {
			if err := s.make(); err != nil {
				return f, fmt.Errorf("creating %s: %w", s.path, err)
			}
		}
	}
	tok, err := readAdminToken(f.tokens)
	if err != nil {
		return f, err
	}
	f.adminToken = tok
	return f, nil
}

func fileExists(path string) (bool, error) {
	_, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// makeCA writes a self-signed ECDSA CA. The key is written before the
// certificate, so an interrupted run that left only the key is redone.
func makeCA(certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := certTemplate("testcluster-ca")
	tmpl.IsCA = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return err
	}
	if err := writeKey(keyPath, key); err != nil {
		return err
	}
	return writeFileAtomic(certPath, pemBlock("CERTIFICATE", der), 0o644)
}

// makeServingCert signs a serving certificate for every name a client on this
// machine, or a pod-style client, would use for the API server.
func makeServingCert(f files) error {
	caCert, caKey, err := loadCA(f.caCert, f.caKey)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := certTemplate("kube-apiserver")
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 96, 0, 1)}
	tmpl.DNSNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		return err
	}
	if err := writeKey(f.servKey, key); err != nil {
		return err
	}
	return writeFileAtomic(f.servingCert, pemBlock("CERTIFICATE", der), 0o644)
}

func makeRSAKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	return writeKey(path, key)
}

// makeTokenFile writes kube-apiserver's static token file with one admin
// user. Format: token,user,uid,"group1,group2".
func makeTokenFile(path string) error {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	line := fmt.Sprintf("%s,%s,%s,%q\n", hex.EncodeToString(b), adminUser, adminUser, adminGroup)
	return writeFileAtomic(path, []byte(line), 0o600)
}

func readAdminToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for i, c := range b {
		if c == ',' {
			return string(b[:i]), nil
		}
	}
	return "", fmt.Errorf("%s: no token found", path)
}

func certTemplate(cn string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"kubeindex testcluster"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		BasicConstraintsValid: true,
	}
}

func loadCA(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	cb, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, err
	}
	kb, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	cp, _ := pem.Decode(cb)
	kp, _ := pem.Decode(kb)
	if cp == nil || kp == nil {
		return nil, nil, errors.New("CA files are not PEM")
	}
	cert, err := x509.ParseCertificate(cp.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParsePKCS8PrivateKey(kp.Bytes)
	if err != nil {
		return nil, nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("CA key is not a signer")
	}
	return cert, signer, nil
}

func writeKey(path string, key any) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, pemBlock("PRIVATE KEY", der), 0o600)
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
