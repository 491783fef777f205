package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/auth"
)

func TestSecurityFlags(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	os.WriteFile(tokens, []byte("s3cret,alice,1,\"devs\"\n"), 0o600)
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string // "" = valid
	}{
		{"loopback without auth", nil, nil, ""},
		{"localhost without auth", []string{"--listen=localhost:8080"}, nil, ""},
		{"IPv6 loopback without auth", []string{"--listen=[::1]:8080"}, nil, ""},
		{"every interface without auth", []string{"--listen=:8080"}, nil, "can be reached from other hosts"},
		{"a host name without auth", []string{"--listen=kubeindex.example:8080"}, nil, "can be reached from other hosts"},
		{"every interface without auth, allowed", []string{"--listen=:8080", "--allow-unauthenticated-remote"}, nil, ""},
		{"allowed through the environment", []string{"--listen=0.0.0.0:8080"}, map[string]string{"KUBEINDEX_ALLOW_UNAUTHENTICATED_REMOTE": "true"}, ""},
		{"the demo on every interface", []string{"--listen=:8080", "--demo"}, nil, ""},
		{"tokenreview and rbac remote over TLS", []string{"--listen=:8080", "--auth=tokenreview", "--authz=rbac", "--tls-cert-file=c", "--tls-private-key-file=k"}, nil, ""},
		{"through the environment", []string{"--listen=:8080"}, map[string]string{"KUBEINDEX_AUTH": "tokenreview", "KUBEINDEX_AUTHZ": "rbac",
			"KUBEINDEX_TLS_CERT_FILE": "c", "KUBEINDEX_TLS_PRIVATE_KEY_FILE": "k"}, ""},
		{"tokens in plain HTTP remote", []string{"--listen=:8080", "--auth=tokenreview"}, nil, "in clear text"},
		{"tokens in plain HTTP on a host name", []string{"--listen=kubeindex.example:8080", "--auth=token", "--token-file=" + tokens}, nil, "in clear text"},
		{"tokens in plain HTTP remote, allowed", []string{"--listen=:8080", "--auth=tokenreview", "--allow-plain-http-remote"}, nil, ""},
		{"tokens in plain HTTP on loopback", []string{"--auth=token", "--token-file=" + tokens}, nil, ""},
		{"plain HTTP allowed with TLS", []string{"--tls-cert-file=c", "--tls-private-key-file=k", "--allow-plain-http-remote"}, nil, "applies without TLS only"},
		{"a certificate without its key", []string{"--tls-cert-file=c"}, nil, "go together"},
		{"a key without its certificate", []string{"--tls-private-key-file=k"}, nil, "go together"},
		{"a client CA without TLS", []string{"--client-ca-file=ca"}, nil, "need TLS"},
		{"a minimum version without TLS", []string{"--tls-min-version=VersionTLS13"}, nil, "need TLS"},
		{"TLS 1.3 at least", []string{"--tls-cert-file=c", "--tls-private-key-file=k", "--tls-min-version=VersionTLS13"}, nil, ""},
		{"a version spelt otherwise", []string{"--tls-cert-file=c", "--tls-private-key-file=k", "--tls-min-version=1.3"}, nil, `--tls-min-version "1.3"`},
		{"cipher suites", []string{"--tls-cert-file=c", "--tls-private-key-file=k",
			"--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"}, nil, ""},
		{"an unknown cipher suite", []string{"--tls-cert-file=c", "--tls-private-key-file=k", "--tls-cipher-suites=TLS_NOPE"}, nil, `"TLS_NOPE" is not a cipher suite`},
		{"client certificates only, remote, with rbac", []string{"--listen=:8080", "--tls-cert-file=c", "--tls-private-key-file=k", "--client-ca-file=ca", "--authz=rbac"}, nil, ""},
		{"client certificates and accepted hosts", []string{"--tls-cert-file=c", "--tls-private-key-file=k", "--client-ca-file=ca", "--accept-hosts=a.example"}, nil, "--accept-hosts applies without authentication only"},
		{"static tokens", []string{"--auth=token", "--token-file=" + tokens}, nil, ""},
		{"rbac without auth", []string{"--authz=rbac"}, nil, "--authz=rbac needs to know who asks"},
		{"token without a file", []string{"--auth=token"}, nil, "--token-file goes with --auth=token"},
		{"a file without token", []string{"--token-file=" + tokens}, nil, "--token-file goes with --auth=token"},
		{"unknown auth", []string{"--auth=basic"}, nil, `--auth "basic"`},
		{"unknown authz", []string{"--auth=token", "--token-file=x", "--authz=abac"}, nil, `--authz "abac"`},
		{"namespace access by review", []string{"--auth=token", "--token-file=" + tokens, "--authz=rbac", "--namespace-access=review"}, nil, ""},
		{"unknown namespace access", []string{"--auth=token", "--token-file=" + tokens, "--authz=rbac", "--namespace-access=all"}, nil, `--namespace-access "all"`},
		{"audiences without tokenreview", []string{"--token-audiences=a"}, nil, "--token-audiences applies"},
		{"tokenreview in the demo", []string{"--demo", "--auth=tokenreview"}, nil, "the simulated cluster reviews no tokens"},
		{"accepted hosts", []string{"--accept-hosts=kubeindex.kube-system.svc, kubeindex.example"}, nil, ""},
		{"accepted hosts through the environment", nil, map[string]string{"KUBEINDEX_ACCEPT_HOSTS": "*"}, ""},
		{"accepted hosts with auth", []string{"--accept-hosts=a.example", "--auth=token", "--token-file=" + tokens}, nil, "--accept-hosts applies without authentication only"},
		{"an accepted host with a port", []string{"--accept-hosts=a.example:8080"}, nil, `--accept-hosts "a.example:8080"`},
		{"an accepted host as a URL", []string{"--accept-hosts=http://a.example"}, nil, `--accept-hosts "http://a.example"`},
		{"no connections", []string{"--max-connections=0"}, nil, "--max-connections must be positive"},
		{"more per address than in all", []string{"--max-connections=10", "--max-connections-per-address=11"}, nil, "--max-connections-per-address must be between"},
		{"connections per address through the environment", nil, map[string]string{"KUBEINDEX_MAX_CONNECTIONS_PER_ADDRESS": "100"}, ""},
		{"no unauthenticated time", []string{"--unauthenticated-timeout=0s"}, nil, "--unauthenticated-timeout must be at least 100ms"},
		{"no streams", []string{"--max-streams-per-client=-1"}, nil, "--max-streams-per-client must be positive"},
		{"no token reviews", []string{"--token-reviews-per-client=0"}, nil, "--token-reviews-per-client must be positive"},
		{"NaN token reviews", []string{"--token-reviews-per-client=NaN"}, nil, "--token-reviews-per-client must be positive"},
		{"no time", []string{"--request-timeout=0s"}, nil, "--request-timeout must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseConfig(tt.args, env(tt.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.Validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("%v: %v; expect %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestSecurityBuildsWhatTheFlagsSay(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	os.WriteFile(tokens, []byte("s3cret,alice,1\n"), 0o600)
	rc := &rest.Config{Host: "https://127.0.0.1:1"}
	o, err := (&SecurityConfig{Auth: "token", TokenFile: tokens, Authz: "none"}).serverAuth(rc)
	if _, ok := o.Authenticator.(*auth.StaticTokens); !ok || o.Authorizer != nil || err != nil {
		t.Errorf("token: %+v %v", o, err)
	}
	o, err = (&SecurityConfig{Auth: "tokenreview", Authz: "rbac"}).serverAuth(rc)
	if _, ok := o.Authenticator.(*auth.TokenReviewer); !ok || err != nil {
		t.Errorf("tokenreview: %+v %v", o, err)
	}
	if _, ok := o.Authorizer.(*auth.AccessReviewer); !ok {
		t.Errorf("rbac: %+v", o)
	}
	if o, err := (&SecurityConfig{Auth: "none", Authz: "none"}).serverAuth(rc); o.Authenticator != nil || o.Authorizer != nil || err != nil {
		t.Errorf("none: %+v %v", o, err)
	}
	os.WriteFile(tokens, []byte("s3cret,alice\n"), 0o600)
	if _, err := (&SecurityConfig{Auth: "token", TokenFile: tokens}).serverAuth(rc); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad token file: %v; expect the line named", err)
	}
}

// Without list on RBAC objects, --namespace-access=rbac says so and works
// as review (no finder); review never reads them.
func TestNamespaceAccessFallsBackToReviewWhenRBACCannotBeRead(t *testing.T) {
	var reads atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reads.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,
			"message":"roles.rbac.authorization.k8s.io is forbidden: User \"kubeindex\" cannot list resource \"roles\""}`)
	}))
	defer api.Close()
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	sc := &SecurityConfig{Auth: "tokenreview", Authz: "rbac", NamespaceAccess: "rbac"}
	if f := sc.namespaceFinder(t.Context(), &rest.Config{Host: api.URL}, log); f != nil {
		t.Errorf("a finder (%T) though RBAC objects cannot be read", f)
	}
	if !strings.Contains(logs.String(), "cannot read RBAC objects") || !strings.Contains(logs.String(), "forbidden") {
		t.Errorf("the log does not say why: %s", logs.String())
	}
	sc.NamespaceAccess = "review"
	before := reads.Load()
	if f := sc.namespaceFinder(t.Context(), &rest.Config{Host: api.URL}, log); f != nil || reads.Load() != before {
		t.Errorf("--namespace-access=review: finder %v, %d requests; expect none", f, reads.Load()-before)
	}
}

func TestTLSFilesAreReadBeforeServing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.crt")
	tc := &TLSConfig{CertFile: missing, KeyFile: missing}
	if _, err := tc.serverTLS(slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !strings.Contains(err.Error(), "--tls-cert-file") {
		t.Fatalf("a missing certificate: %v, want an error naming the flags", err)
	}
	if st, err := (&TLSConfig{}).serverTLS(nil); st != nil || err != nil {
		t.Fatalf("without TLS: %v, %v", st, err)
	}
}
