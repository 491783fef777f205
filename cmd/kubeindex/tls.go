package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/kubeindex/kubeindex/server"
)

// TLSConfig is how kubeindex serves HTTPS, with the API server's flag
// names and values.
type TLSConfig struct {
	CertFile     string // --tls-cert-file
	KeyFile      string // --tls-private-key-file
	MinVersion   string // --tls-min-version: VersionTLS12, VersionTLS13 ("": TLS 1.2)
	CipherSuites string // --tls-cipher-suites: comma-separated IANA names
	ClientCAFile string // --client-ca-file: client certificates signed by these CAs are identities
	// AllowPlainHTTPRemote: --allow-plain-http-remote
	AllowPlainHTTPRemote bool
}

// tlsVersions are --tls-min-version's values, as the API server spells
// them.
var tlsVersions = map[string]uint16{
	"VersionTLS10": tls.VersionTLS10, "VersionTLS11": tls.VersionTLS11,
	"VersionTLS12": tls.VersionTLS12, "VersionTLS13": tls.VersionTLS13,
}

func (tc *TLSConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&tc.CertFile, "tls-cert-file", "", "serve HTTPS (HTTP/2 and HTTP/1.1) with this PEM certificate, its chain after it; read again when it changes (a Secret rotated by cert-manager), for new connections, while open ones and their streams keep theirs")
	fs.StringVar(&tc.KeyFile, "tls-private-key-file", "", "the PEM private key of --tls-cert-file")
	fs.StringVar(&tc.MinVersion, "tls-min-version", "", "the lowest TLS version accepted: "+strings.Join(slices.Sorted(maps.Keys(tlsVersions)), ", ")+" (default VersionTLS12)")
	fs.StringVar(&tc.CipherSuites, "tls-cipher-suites", "", "comma-separated TLS 1.2 cipher suites accepted, by their IANA names (TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256); TLS 1.3's are not configurable (default: Go's)")
	fs.StringVar(&tc.ClientCAFile, "client-ca-file", "", "with TLS, a client certificate signed by one of these PEM CAs is an identity, as the API server reads it: the common name the user, the organizations the groups; authorized like any caller. Read again when it changes. Enough to turn authentication on with --auth=none (then only certificates count)")
	fs.BoolVar(&tc.AllowPlainHTTPRemote, "allow-plain-http-remote", false, "with authentication on and no TLS, serve plain HTTP on an address other hosts can reach, where TLS ends before kubeindex (a mesh, an ingress): credentials cross the network in clear text otherwise")
}

func (tc *TLSConfig) serving() bool { return tc.CertFile != "" }

// validate checks the TLS flags; authenticating says whether callers
// send credentials.
func (tc *TLSConfig) validate(listen string, demo, authenticating bool) []error {
	var errs []error
	if (tc.CertFile == "") != (tc.KeyFile == "") {
		errs = append(errs, fmt.Errorf("--tls-cert-file and --tls-private-key-file go together"))
	}
	if !tc.serving() && (tc.MinVersion != "" || tc.CipherSuites != "" || tc.ClientCAFile != "") {
		errs = append(errs, fmt.Errorf("--tls-min-version, --tls-cipher-suites and --client-ca-file need TLS: add --tls-cert-file and --tls-private-key-file"))
	}
	if _, ok := tlsVersions[tc.MinVersion]; tc.MinVersion != "" && !ok {
		errs = append(errs, fmt.Errorf("--tls-min-version %q: want one of %s", tc.MinVersion, strings.Join(slices.Sorted(maps.Keys(tlsVersions)), ", ")))
	}
	if _, err := cipherSuites(tc.CipherSuites); err != nil {
		errs = append(errs, err)
	}
	if authenticating && !tc.serving() && !isLoopback(listen) && !tc.AllowPlainHTTPRemote && !demo {
		errs = append(errs, fmt.Errorf("--listen %q can be reached from other hosts, and callers would send their credentials there in clear text: "+
			"serve TLS (--tls-cert-file, --tls-private-key-file), listen on 127.0.0.1, or pass --allow-plain-http-remote where TLS ends before kubeindex (a mesh, an ingress)", listen))
	}
	if tc.AllowPlainHTTPRemote && tc.serving() {
		errs = append(errs, fmt.Errorf("--allow-plain-http-remote applies without TLS only"))
	}
	return errs
}

// cipherSuites reads --tls-cipher-suites: Go's names, which are the IANA
// names the API server takes, insecure ones included as there.
func cipherSuites(list string) ([]uint16, error) {
	byName := map[string]uint16{}
	for _, cs := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		byName[cs.Name] = cs.ID
	}
	var ids []uint16
	for _, name := range splitList(list) {
		id, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("--tls-cipher-suites: %q is not a cipher suite Go knows (IANA names, such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)", name)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// serverTLS reads the certificate and CA files: nil, nil without TLS.
func (tc *TLSConfig) serverTLS(log *slog.Logger) (*server.TLS, error) {
	if !tc.serving() {
		return nil, nil
	}
	suites, err := cipherSuites(tc.CipherSuites)
	if err != nil {
		return nil, err
	}
	t, err := server.NewTLS(server.TLSOptions{CertFile: tc.CertFile, KeyFile: tc.KeyFile, MinVersion: tlsVersions[tc.MinVersion],
		CipherSuites: suites, ClientCAFile: tc.ClientCAFile, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file, --tls-private-key-file or --client-ca-file: %w", err)
	}
	return t, nil
}

// warnPlain says loudly that credentials cross a network in clear text.
func (tc *TLSConfig) warnPlain(log *slog.Logger, listen string, authenticating bool) {
	if !tc.serving() && authenticating && !isLoopback(listen) {
		log.Warn("PLAIN HTTP with authentication on an address other hosts can reach (--allow-plain-http-remote): "+
			"credentials cross the network in clear text unless TLS ends before kubeindex (serve TLS with --tls-cert-file)", "listen", listen)
	}
}
