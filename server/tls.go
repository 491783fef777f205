package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/kubeindex/kubeindex/auth"
)

// TLSOptions serves HTTPS (HTTP/2 and HTTP/1.1) with a certificate read
// from files, and optionally takes client certificates as identities.
// Files are read again when they change (a Secret updated by
// cert-manager): connections opened after the change get the new
// certificate, open ones keep theirs, so no stream is dropped.
type TLSOptions struct {
	// CertFile and KeyFile hold the serving certificate (PEM, the chain
	// after the leaf) and its private key.
	CertFile, KeyFile string
	// MinVersion is the lowest TLS version accepted. Default TLS 1.2,
	// as the API server's.
	MinVersion uint16
	// CipherSuites restricts the TLS 1.2 cipher suites (TLS 1.3's are not
	// configurable). nil: Go's defaults.
	CipherSuites []uint16
	// ClientCAFile, when set, makes a client certificate signed by one of
	// its CAs an identity, as the API server's --client-ca-file does: the
	// subject's common name is the user, its organizations the groups.
	ClientCAFile string
	// Recheck is how often at most the files are looked at again, on a
	// handshake. Default 1s.
	Recheck time.Duration
	Logger  *slog.Logger
}

// TLS is the serving side of TLSOptions, its files read. Safe for
// concurrent use.
type TLS struct {
	keyPair   *reloading[*tls.Certificate]
	clientCAs *reloading[*x509.CertPool] // nil: client certificates are no identity
	config    *tls.Config
}

// NewTLS reads the files once; an error names the file that cannot be
// used. It starts nothing.
func NewTLS(o TLSOptions) (*TLS, error) {
	if o.Recheck <= 0 {
		o.Recheck = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MinVersion == 0 {
		o.MinVersion = tls.VersionTLS12
	}
	if o.CertFile == "" || o.KeyFile == "" {
		return nil, errors.New("TLS needs both a certificate file and a key file")
	}
	kp, err := newReloading("serving certificate", o.Recheck, o.Logger, loadKeyPair(o.CertFile, o.KeyFile), o.CertFile, o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	t := &TLS{keyPair: kp}
	if o.ClientCAFile != "" {
		if t.clientCAs, err = newReloading("client CA", o.Recheck, o.Logger, loadCertPool(o.ClientCAFile), o.ClientCAFile); err != nil {
			return nil, fmt.Errorf("client CA: %w", err)
		}
	}
	t.config = &tls.Config{
		MinVersion:   o.MinVersion,
		CipherSuites: o.CipherSuites,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return t.keyPair.get(), nil
		},
	}
	if t.clientCAs != nil {
		// Asked for, verified per request against the CAs of the moment
		// (certIdentity), as the API server does: a certificate that does
		// not verify is a 401 that says why, not a failed handshake.
		t.config.ClientAuth = tls.RequestClientCert
	}
	return t, nil
}

// clientCerts reports whether client certificates are identities.
func (t *TLS) clientCerts() bool { return t != nil && t.clientCAs != nil }

// certIdentity is what a connection's client certificate was found to be,
// against one pool of CAs; kept on the connection, whose certificate
// never changes.
type certIdentity struct {
	pool     *x509.CertPool
	user     *auth.User
	err      error
	notAfter time.Time // the earliest expiry in the chain
}

// errNoCommonName: the API server does not take such a certificate
// either.
var errNoCommonName = errors.New("the client certificate names no user (its subject has no common name)")

// certUser is the user the request's client certificate names: nil
// without a certificate (or when certificates are no identity), an error
// when it does not verify against the client CAs.
func (s *Server) certUser(r *http.Request) (*auth.User, error) {
	if !s.opts.TLS.clientCerts() || r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, nil
	}
	pool, now := s.opts.TLS.clientCAs.get(), time.Now()
	lc := connOf(r)
	if lc != nil {
		if id := lc.certID.Load(); id != nil && id.pool == pool && now.Before(id.notAfter) {
			return id.user, id.err
		}
	}
	id := verifyClientCert(r.TLS.PeerCertificates, pool, now)
	if lc != nil {
		lc.certID.Store(id)
	}
	return id.user, id.err
}

func verifyClientCert(chain []*x509.Certificate, pool *x509.CertPool, now time.Time) *certIdentity {
	leaf := chain[0]
	id := &certIdentity{pool: pool, notAfter: leaf.NotAfter}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	verified, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	switch {
	case err != nil:
		id.err = fmt.Errorf("the client certificate is not valid: %w", err)
		id.notAfter = now.Add(time.Minute) // try again later: the CAs or the clock may change
		return id
	case leaf.Subject.CommonName == "":
		id.err = errNoCommonName
		return id
	}
	for _, c := range verified[0] {
		if c.NotAfter.Before(id.notAfter) {
			id.notAfter = c.NotAfter
		}
	}
	id.user = &auth.User{Name: leaf.Subject.CommonName, Groups: append([]string(nil), leaf.Subject.Organization...)}
	return id
}
