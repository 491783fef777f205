package server

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/auth/authtest"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// testCA signs certificates for the tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serials atomic.Int64

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serials.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a certificate for a server (usage ServerAuth, for
// 127.0.0.1) or a client (ClientAuth, user cn in groups orgs), and
// returns its certificate and key as PEM and its serial number.
func (ca *testCA) issue(t *testing.T, server bool, cn string, orgs ...string) (certPEM, keyPEM []byte, serial *big.Int) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serials.Add(1)), Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), tmpl.SerialNumber
}

func (ca *testCA) clientCert(t *testing.T, cn string, orgs ...string) tls.Certificate {
	t.Helper()
	c, k, _ := ca.issue(t, false, cn, orgs...)
	kp, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// writeAtomically replaces a file as a Secret volume does: a new file
// renamed over the old one.
func writeAtomically(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// tlsEnv serves the real stack over HTTPS: a serving certificate from
// files in dir, client certificates of ca as identities.
type tlsEnv struct {
	ca        *testCA
	dir, addr string
	roots     *x509.CertPool
	f         *cachetest.Fixture
	s         *Server
}

func startTLS(t *testing.T, opts Options) *tlsEnv {
	t.Helper()
	e := &tlsEnv{ca: newTestCA(t, "kubeindex-test-ca"), dir: t.TempDir(), roots: x509.NewCertPool()}
	e.roots.AddCert(e.ca.cert)
	c, k, _ := e.ca.issue(t, true, "kubeindex")
	writeAtomically(t, e.path("tls.crt"), c)
	writeAtomically(t, e.path("tls.key"), k)
	writeAtomically(t, e.path("ca.crt"), e.ca.pem)
	tl, err := NewTLS(TLSOptions{CertFile: e.path("tls.crt"), KeyFile: e.path("tls.key"), ClientCAFile: e.path("ca.crt"),
		Recheck: time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	opts.TLS = tl
	e.f = cachetest.Start(t, cachetest.DefaultSpecs()...)
	e.s, e.addr = serveReal(t, e.f.Cache, opts)
	return e
}

func (e *tlsEnv) path(name string) string { return filepath.Join(e.dir, name) }

// client is an HTTP/2 client that verifies the server against the CA,
// presenting certs.
func (e *tlsEnv) client(certs ...tls.Certificate) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: e.roots, Certificates: certs}, ForceAttemptHTTP2: true}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func (e *tlsEnv) get(t *testing.T, c *http.Client, path, token string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "https://"+e.addr+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func TestTLSServesHTTP2WithAVerifiedCertificate(t *testing.T) {
	e := startTLS(t, Options{})
	resp, _ := e.get(t, e.client(), "/readyz", "")
	if resp.ProtoMajor != 2 || resp.TLS == nil {
		t.Fatalf("proto %s, TLS %v: want HTTP/2 over TLS", resp.Proto, resp.TLS != nil)
	}
	// A client that does not trust the CA fails the handshake.
	_, err := (&http.Client{Timeout: 5 * time.Second}).Get("https://" + e.addr + "/readyz")
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("an untrusting client: %v, want a certificate error", err)
	}
	// Plain HTTP on the TLS port is not served.
	resp, err = (&http.Client{Timeout: 5 * time.Second}).Get("http://" + e.addr + "/readyz")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("plain HTTP on the TLS port: %d, want 400 or an error", resp.StatusCode)
		}
	}
}

func TestTLSMinVersionAndCipherSuites(t *testing.T) {
	ca := newTestCA(t, "ca")
	dir := t.TempDir()
	c, k, _ := ca.issue(t, true, "kubeindex")
	writeAtomically(t, filepath.Join(dir, "tls.crt"), c)
	writeAtomically(t, filepath.Join(dir, "tls.key"), k)
	tl, err := NewTLS(TLSOptions{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"),
		MinVersion: tls.VersionTLS13, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	_, addr := serveReal(t, f.Cache, Options{TLS: tl})
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	if _, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, MaxVersion: tls.VersionTLS12}); err == nil {
		t.Fatal("TLS 1.2 accepted with a minimum of 1.3")
	}
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if v := conn.ConnectionState().Version; v != tls.VersionTLS13 {
		t.Fatalf("version %x, want TLS 1.3", v)
	}
}

func TestTLSFilesThatCannotBeUsedStopStartUp(t *testing.T) {
	ca := newTestCA(t, "ca")
	dir := t.TempDir()
	c, k, _ := ca.issue(t, true, "kubeindex")
	_, otherKey, _ := ca.issue(t, true, "other")
	files := map[string][]byte{"tls.crt": c, "tls.key": k, "other.key": otherKey, "empty.crt": []byte("not PEM\n")}
	for name, data := range files {
		writeAtomically(t, filepath.Join(dir, name), data)
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, tc := range []struct {
		name string
		opts TLSOptions
		want string
	}{
		{"no key", TLSOptions{CertFile: p("tls.crt")}, "both"},
		{"a missing file", TLSOptions{CertFile: p("missing.crt"), KeyFile: p("tls.key")}, "serving certificate"},
		{"a key of another certificate", TLSOptions{CertFile: p("tls.crt"), KeyFile: p("other.key")}, "serving certificate"},
		{"a client CA file without a certificate", TLSOptions{CertFile: p("tls.crt"), KeyFile: p("tls.key"), ClientCAFile: p("empty.crt")}, "client CA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewTLS(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func TestClientCertificateIsAnIdentity(t *testing.T) {
	api := authtest.New(t, authUsers, authRules()...)
	ar, _ := auth.NewAccessReviewerForConfig(api.Config(), auth.AccessReviewOptions{})
	e := startTLS(t, Options{Auth: AuthOptions{Authorizer: ar}}) // certificates only: no bearer tokens
	other := newTestCA(t, "another-ca")
	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
		token string
		path  string
		code  int
		want  string
	}{
		{"no certificate", nil, "", "/api/v1/resources", 401, "client certificate"},
		{"a token where only certificates count", nil, "alice-token", "/api/v1/resources", 401, "takes no bearer tokens"},
		{"CN alice may list team-a's pods", []tls.Certificate{e.ca.clientCert(t, "alice")}, "", "/api/v1/pods?namespace=team-a", 200, ""},
		{"CN alice may not list team-b's", []tls.Certificate{e.ca.clientCert(t, "alice")}, "", "/api/v1/pods?namespace=team-b", 403, ""},
		{"O admins is the group admins", []tls.Certificate{e.ca.clientCert(t, "carol", "admins")}, "", "/api/v1/pods?namespace=team-b", 200, ""},
		{"O admins may read /metrics", []tls.Certificate{e.ca.clientCert(t, "carol", "admins")}, "", "/metrics", 200, ""},
		{"a certificate of another CA", []tls.Certificate{other.clientCert(t, "carol", "admins")}, "", "/api/v1/pods", 401, "not valid"},
		{"no common name", []tls.Certificate{e.ca.clientCert(t, "", "admins")}, "", "/api/v1/pods", 401, "no common name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := e.get(t, e.client(tc.certs...), tc.path, tc.token)
			if resp.StatusCode != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("%d %s, want %d with %q", resp.StatusCode, body, tc.code, tc.want)
			}
		})
	}
}

func TestClientCertificateAlongsideTokens(t *testing.T) {
	e := startTLS(t, Options{Auth: AuthOptions{Authenticator: staticTokens(t)}})
	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
		token string
		code  int
		want  string
	}{
		{"neither", nil, "", 401, "or a client certificate"},
		{"a token", nil, "alice-token", 200, ""},
		{"a certificate", []tls.Certificate{e.ca.clientCert(t, "alice")}, "", 200, ""},
		{"a certificate of another CA, no token", []tls.Certificate{newTestCA(t, "x").clientCert(t, "alice")}, "", 401, "not valid"},
		{"a certificate of another CA and a good token", []tls.Certificate{newTestCA(t, "x").clientCert(t, "alice")}, "alice-token", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := e.get(t, e.client(tc.certs...), "/api/v1/resources", tc.token)
			if resp.StatusCode != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("%d %s, want %d with %q", resp.StatusCode, body, tc.code, tc.want)
			}
		})
	}
}

func TestCertificateRotationKeepsOpenStreams(t *testing.T) {
	e := startTLS(t, Options{})
	alice := e.ca.clientCert(t, "alice")
	serialOf := func() *big.Int {
		t.Helper()
		conn, err := tls.Dial("tcp", e.addr, &tls.Config{RootCAs: e.roots})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber
	}
	first := serialOf()

	// A watch held open over HTTP/2 through the rotation.
	client := e.client(alice)
	req, _ := http.NewRequest(http.MethodGet, "https://"+e.addr+"/k8s/api/v1/namespaces/default/pods?watch=true", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Fatalf("watch: %s %s", resp.Status, resp.Proto)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()

	c, k, serial := e.ca.issue(t, true, "kubeindex")
	writeAtomically(t, e.path("tls.key"), k)
	writeAtomically(t, e.path("tls.crt"), c)
	cachetest.Eventually(t, "a new connection gets the new certificate", func() bool { return serialOf().Cmp(serial) == 0 })
	if first.Cmp(serial) == 0 {
		t.Fatal("the first certificate was the new one")
	}

	if err := e.f.Sim.Apply("pods", teamPod("default", "after-rotation", "10.77.1.1")); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the open watch ended with the rotation")
			}
			if strings.Contains(l, `"after-rotation"`) {
				return
			}
		case <-deadline:
			t.Fatal("the open watch saw no event after the rotation")
		}
	}
}

func TestUnreadableNewFilesKeepTheCertificate(t *testing.T) {
	e := startTLS(t, Options{})
	_, otherKey, _ := e.ca.issue(t, true, "other")
	writeAtomically(t, e.path("tls.key"), otherKey) // the key of a certificate not written yet
	for range 3 {
		time.Sleep(5 * time.Millisecond) // a few rechecks: each sees files it cannot use
		if _, err := tls.Dial("tcp", e.addr, &tls.Config{RootCAs: e.roots}); err != nil {
			t.Fatalf("a half-written rotation broke the handshake: %v", err)
		}
	}
}

func TestUnauthenticatedHTTP2ConnectionIsClosedWhenIdle(t *testing.T) {
	tokens := staticTokens(t)
	for _, tc := range []struct {
		name, path, token string
		closed            bool
	}{
		{"only a public route asked", "/healthz", "", true},
		{"authenticated", "/api/v1/resources", "alice-token", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startTLS(t, Options{Auth: AuthOptions{Authenticator: tokens},
				Limits: LimitOptions{UnauthenticatedTimeout: 200 * time.Millisecond}})
			resp, _ := e.get(t, e.client(), tc.path, tc.token)
			if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
				t.Fatalf("%s %s", resp.Status, resp.Proto)
			}
			open := func() bool { conns, _, _ := e.s.limits.counts(); return conns > 0 }
			if tc.closed {
				cachetest.Eventually(t, "the idle unauthenticated connection is closed", func() bool { return !open() })
				return
			}
			time.Sleep(time.Second) // five times the timeout: what does not happen needs a bound
			if !open() {
				t.Fatal("an authenticated HTTP/2 connection was closed within a second of idleness")
			}
		})
	}
}

func staticTokens(t *testing.T) *auth.StaticTokens {
	t.Helper()
	st, err := auth.ParseStaticTokens([]byte("alice-token,alice,1\n"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestConnectionBeyondTheLimitIsRefusedOverTLS(t *testing.T) {
	e := startTLS(t, Options{Limits: LimitOptions{MaxConnections: 1}})
	held, err := tls.Dial("tcp", e.addr, &tls.Config{RootCAs: e.roots})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	cachetest.Eventually(t, "the first connection holds the slot", func() bool { conns, _, _ := e.s.limits.counts(); return conns == 1 })
	// A verifying HTTP/2 client reads the refusal as an answer, not as a
	// broken handshake.
	resp, body := e.get(t, e.client(), "/healthz", "")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "maximum of connections") {
		t.Fatalf("beyond the limit: %s %s, want 503", resp.Status, body)
	}
}

func TestWebSocketOverTLSWithAClientCertificate(t *testing.T) {
	e := startTLS(t, Options{})
	d := websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: e.roots, Certificates: []tls.Certificate{e.ca.clientCert(t, "alice")}}}
	conn, resp, err := d.Dial("wss://"+e.addr+"/api/v1/pods?watch=true", nil)
	if err != nil {
		t.Fatalf("wss: %v (%v)", err, resp)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, msg, err := conn.ReadMessage(); err != nil || !strings.Contains(string(msg), `"type"`) {
		t.Fatalf("first message: %s, %v", msg, err)
	}
}
