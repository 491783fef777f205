package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// e2eCA signs the serving certificate and client certificates of the TLS
// tests.
type e2eCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newE2ECA(t *testing.T, name string) *e2eCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &e2eCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a serving certificate for 127.0.0.1 (server) or a client
// certificate for user cn in groups orgs, returned as PEM.
func (ca *e2eCA) issue(t *testing.T, server bool, cn string, orgs ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// tlsKubeconfig writes a kubeconfig for server that trusts caPEM (none:
// the system's roots) and presents a client certificate when certPEM is
// set.
func tlsKubeconfig(t *testing.T, server string, caPEM, certPEM, keyPEM []byte) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubeindex"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["reader"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts["kubeindex"] = &clientcmdapi.Context{Cluster: "kubeindex", AuthInfo: "reader"}
	cfg.CurrentContext = "kubeindex"
	path := filepath.Join(t.TempDir(), "kubeconfig-tls")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// startTLSKubeindex runs kubeindex over HTTPS with the serving
// certificate of ca and client certificates of ca as identities, and
// returns its https:// URL once ready.
func startTLSKubeindex(t *testing.T, ca *e2eCA, args ...string) string {
	t.Helper()
	crt, key := ca.issue(t, true, "kubeindex")
	args = append(args, "--tls-cert-file", writeFile(t, "tls.crt", string(crt)), "--tls-private-key-file", writeFile(t, "tls.key", string(key)),
		"--client-ca-file", writeFile(t, "ca.crt", string(ca.pem)))
	k := launchKubeindex(t, args...)
	hostPort := strings.TrimPrefix(k.URL, "http://")
	if _, port, err := net.SplitHostPort(hostPort); err == nil && !strings.HasPrefix(hostPort, "127.0.0.1:") {
		hostPort = "127.0.0.1:" + port // listening on every address: reach it where the certificate names it
	}
	base := "https://" + hostPort
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	eventually(t, readyTimeout, "kubeindex /readyz over HTTPS to answer 200", func() error {
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		return nil
	})
	return base
}

// unauthorized is how kubectl says 401.
const unauthorized = "the server has asked for the client to provide credentials"

// TestTLSKubectl: kubectl reaches kubeindex over HTTPS with the CA in its
// kubeconfig and verification on, authenticated by a client certificate
// (CN the user, O the groups) and authorized by the cluster's RBAC.
func TestTLSKubectl(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, _ := c.Clients(t)
	ctx := t.Context()
	create := func(what string, err error) {
		t.Helper()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %s: %v", what, err)
		}
	}
	for _, ns := range []string{"tls-a", "tls-b"} {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		create(ns, err)
		_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		create(ns+"/default", err)
		_, err = cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-of-" + ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "tls:1"}}}}, metav1.CreateOptions{})
		create(ns+"/pod", err)
	}
	_, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "tls-pods"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods"}}}}, metav1.CreateOptions{})
	create("ClusterRole tls-pods", err)
	// The group, not the user: the certificate's O must be read as groups.
	_, err = cs.RbacV1().RoleBindings("tls-a").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tls-team"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "tls-team"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "tls-pods"}}, metav1.CreateOptions{})
	create("RoleBinding tls-team", err)

	ca, stranger := newE2ECA(t, "kubeindex-e2e-ca"), newE2ECA(t, "another-ca")
	teamCrt, teamKey := ca.issue(t, false, "tls-reader", "tls-team")
	loneCrt, loneKey := ca.issue(t, false, "tls-reader")
	strangerCrt, strangerKey := stranger.issue(t, false, "tls-reader", "tls-team")

	t.Run("RBAC", func(t *testing.T) {
		base := startTLSKubeindex(t, ca, "--kubeconfig", c.Kubeconfig, "--resources", "pods,namespaces", "--authz=rbac")
		kubectl := func(caPEM, crt, key []byte) *kubectlCmd {
			return newKubectl(t, "kubeindex", tlsKubeconfig(t, base+k8sPrefix, caPEM, crt, key))
		}
		team := kubectl(ca.pem, teamCrt, teamKey)
		eventually(t, converge, "the team's kubectl to list tls-a's pod", func() error {
			out, _, err := team.run("get", "pods", "-n", "tls-a", "-o", "name")
			if err != nil {
				return err
			}
			if strings.TrimSpace(out) != "pod/pod-of-tls-a" {
				return fmt.Errorf("got %q", out)
			}
			return nil
		})
		for _, tc := range []struct {
			name string
			k    *kubectlCmd
			args []string
			want string // in its output
		}{
			{"the team may not list tls-b", team, []string{"get", "pods", "-n", "tls-b"}, "Forbidden"},
			{"the user without the group may not list tls-a", kubectl(ca.pem, loneCrt, loneKey), []string{"get", "pods", "-n", "tls-a"}, "Forbidden"},
			{"a certificate of another CA", kubectl(ca.pem, strangerCrt, strangerKey), []string{"get", "pods", "-n", "tls-a"}, unauthorized},
			{"a kubeconfig without the CA", kubectl(nil, teamCrt, teamKey), []string{"get", "pods", "-n", "tls-a"}, "certificate signed by unknown authority"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				out, stderr, err := tc.k.run(tc.args...)
				if err == nil || !strings.Contains(out+stderr, tc.want) {
					t.Fatalf("kubectl %v: err %v\nstdout %s\nstderr %s\nwant a failure saying %q", tc.args, err, out, stderr, tc.want)
				}
			})
		}
		// Without credentials (kubectl would ask for a password before
		// sending anything): 401.
		roots := x509.NewCertPool()
		roots.AddCert(ca.cert)
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
		resp, err := client.Get(base + k8sPrefix + "/api/v1/namespaces/tls-a/pods")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("no certificate: %s, want 401", resp.Status)
		}
		// A watch over HTTP/2 with the certificate: its first event is the
		// pod; kubectl ends it at --request-timeout.
		out, _, _ := team.run("get", "pods", "-n", "tls-a", "-o", "name", "--watch", "--request-timeout", "3s")
		if !strings.Contains(out, "pod/pod-of-tls-a") {
			t.Fatalf("the team's watch of tls-a printed %q", out)
		}
	})

	t.Run("WithoutRBAC", func(t *testing.T) {
		// Certificates only (--auth=none), no authorization: any valid
		// certificate reads everything, a stranger's still nothing.
		base := startTLSKubeindex(t, ca, "--kubeconfig", c.Kubeconfig, "--resources", "pods,namespaces", "--listen", "0.0.0.0:0")
		lone := newKubectl(t, "kubeindex", tlsKubeconfig(t, base+k8sPrefix, ca.pem, loneCrt, loneKey))
		out, _, err := lone.run("get", "pods", "-n", "tls-b", "-o", "name")
		if err != nil || strings.TrimSpace(out) != "pod/pod-of-tls-b" {
			t.Fatalf("a valid certificate without RBAC: %v %q", err, out)
		}
		strangerK := newKubectl(t, "kubeindex", tlsKubeconfig(t, base+k8sPrefix, ca.pem, strangerCrt, strangerKey))
		if _, stderr, err := strangerK.run("get", "pods", "-n", "tls-b"); err == nil || !strings.Contains(stderr, unauthorized) {
			t.Fatalf("another CA's certificate without RBAC: %v %s", err, stderr)
		}
	})
}

// TestTLSPlainHTTPRefused: with authentication on, plain HTTP where other
// hosts can reach refuses to start without --allow-plain-http-remote.
func TestTLSPlainHTTPRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), serveTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubeindexBinary(t), "--auth=token", "--token-file", writeFile(t, "tokens.csv", "tok,alice,1\n"), "--listen", "0.0.0.0:0")
	cmd.Env = []string{"HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "in clear text") || !strings.Contains(string(out), "--allow-plain-http-remote") {
		t.Fatalf("kubeindex with tokens in plain HTTP on 0.0.0.0: %v\n%s\nwant a refusal to start naming --allow-plain-http-remote", err, out)
	}
}

// TestTLSRotationKeepsKubectlWatching: new certificate files are served to
// new connections while a kubectl watch opened before goes on receiving
// events (kubectl get --watch ends when its watch does; it does not
// reconnect).
func TestTLSRotationKeepsKubectlWatching(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, _ := c.Clients(t)
	ctx := t.Context()
	const ns = "tls-rotation"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ca := newE2ECA(t, "kubeindex-rotation-ca")
	dir := t.TempDir()
	crtPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	rotate := func() *big.Int {
		t.Helper()
		crt, key := ca.issue(t, true, "kubeindex")
		// As a Secret volume changes: each file replaced whole.
		for path, data := range map[string][]byte{keyPath: key, crtPath: crt} {
			if err := os.WriteFile(path+".new", data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".new", path); err != nil {
				t.Fatal(err)
			}
		}
		block, _ := pem.Decode(crt)
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return cert.SerialNumber
	}
	first := rotate()
	k := launchKubeindex(t, "--kubeconfig", c.Kubeconfig, "--resources", "pods,namespaces", "--tls-cert-file", crtPath, "--tls-private-key-file", keyPath,
		"--client-ca-file", writeFile(t, "ca.crt", string(ca.pem)))
	addr := strings.TrimPrefix(k.URL, "http://")
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	servedSerial := func() (*big.Int, error) {
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots})
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber, nil
	}
	crt, key := ca.issue(t, false, "rotation-reader")
	kubectl := newKubectl(t, "kubeindex", tlsKubeconfig(t, "https://"+addr+k8sPrefix, ca.pem, crt, key))
	eventually(t, readyTimeout, "kubectl to list over HTTPS", func() error {
		_, _, err := kubectl.run("get", "pods", "-n", ns)
		return err
	})

	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch := kubectl.command(watchCtx, "get", "pods", "-n", ns, "-o", "name", "--watch")
	var out lockedBuffer
	watch.Stdout, watch.Stderr = &out, &out
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer watch.Wait()
	defer cancel()

	second := rotate()
	eventually(t, converge, "a new connection to get the new certificate", func() error {
		got, err := servedSerial()
		if err != nil {
			return err
		}
		if got.Cmp(second) != 0 {
			return fmt.Errorf("serial %v; the first was %v, the new one %v", got, first, second)
		}
		return nil
	})
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "after-rotation"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "tls:1"}}}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	eventually(t, converge, "the watch opened before the rotation to print the pod created after it", func() error {
		if s := out.String(); !strings.Contains(s, "pod/after-rotation") {
			return fmt.Errorf("the watch printed %q", s)
		}
		return nil
	})
}

// lockedBuffer is a bytes.Buffer a process writes while the test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
