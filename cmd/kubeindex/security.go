package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/server"
)

// minUnauthenticatedTimeout is the least --unauthenticated-timeout
// accepted.
const minUnauthenticatedTimeout = 100 * time.Millisecond

func (sc *SecurityConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&sc.Auth, "auth", "none", "authentication: none, token (--token-file) or tokenreview (Kubernetes TokenReview)")
	fs.StringVar(&sc.TokenFile, "token-file", "", "static bearer tokens for --auth=token, as kube-apiserver's --token-auth-file: token,user,uid,\"group1,group2\"")
	fs.StringVar(&sc.TokenAudiences, "token-audiences", "", "comma-separated audiences tokens must be meant for, with --auth=tokenreview (default: the API server's)")
	fs.StringVar(&sc.Authz, "authz", "none", "authorization: none (an authenticated caller reads everything) or rbac (Kubernetes SubjectAccessReview)")
	fs.StringVar(&sc.NamespaceAccess, "namespace-access", "rbac", "with --authz=rbac, which namespaces a restricted caller's list or stream across namespaces asks the API server about: rbac (those where the cluster's RoleBindings grant it, read by watching RBAC objects; falls back to review when kubeindex may not list them) or review (every namespace that could hold an answer)")
	fs.BoolVar(&sc.AllowUnauthenticatedRemote, "allow-unauthenticated-remote", false, "with --auth=none, serve on an address other hosts can reach")
	fs.StringVar(&sc.AcceptHosts, "accept-hosts", "", "with --auth=none, comma-separated Host names served besides loopback addresses and localhost (* for any), as kubectl proxy's --accept-hosts: other names are refused, so a web page that rebinds its DNS name to this address reads nothing")
	fs.IntVar(&sc.MaxConnections, "max-connections", server.DefaultMaxConnections, "open client connections at most; beyond, an idle one of whoever holds the most is closed to make room, or with none idle the next is answered 503")
	fs.IntVar(&sc.MaxConnectionsPerAddress, "max-connections-per-address", 0, "open connections from one client IP address at most (0: a quarter of --max-connections); the next is answered 429. Everyone behind one NAT, proxy or ingress shares it")
	fs.DurationVar(&sc.UnauthenticatedTimeout, "unauthenticated-timeout", server.DefaultUnauthenticatedTimeout, fmt.Sprintf(
		"how long a connection on which no request has passed authentication yet may take to send its headers, or stay idle; authenticated connections keep %s for headers and %s idle; at least %s",
		shortDuration(server.ReadHeaderTimeout), shortDuration(server.DefaultIdleTimeout), shortDuration(minUnauthenticatedTimeout)))
	fs.IntVar(&sc.MaxStreamsPerClient, "max-streams-per-client", server.DefaultMaxStreamsPerClient, "open streams per client (user, or IP address without authentication)")
	fs.Float64Var(&sc.TokenReviewsPerClient, "token-reviews-per-client", auth.DefaultReviewsPerSecond, fmt.Sprintf(
		"with --auth=tokenreview, TokenReviews a second one client address may cause (each token not in the cache costs one; bursts of %d times as many); beyond, new tokens get 429",
		auth.ReviewBurstSeconds))
	fs.DurationVar(&sc.RequestTimeout, "request-timeout", server.DefaultRequestTimeout, "bound on a REST request, writing the response included (streams are exempt)")
	sc.TLS.flags(fs)
}

// authenticating: callers say who they are, with a bearer token or a
// client certificate.
func (sc *SecurityConfig) authenticating() bool {
	return sc.Auth != "none" || sc.TLS.ClientCAFile != ""
}

func (sc *SecurityConfig) validate(listen string, demo bool) []error {
	var errs []error
	if !oneOf(sc.Auth, "none", "token", "tokenreview") {
		errs = append(errs, fmt.Errorf("--auth %q: want none, token or tokenreview", sc.Auth))
	}
	if !oneOf(sc.Authz, "none", "rbac") {
		errs = append(errs, fmt.Errorf("--authz %q: want none or rbac", sc.Authz))
	}
	if !oneOf(sc.NamespaceAccess, "rbac", "review") {
		errs = append(errs, fmt.Errorf("--namespace-access %q: want rbac or review", sc.NamespaceAccess))
	}
	if sc.Authz == "rbac" && !sc.authenticating() {
		errs = append(errs, fmt.Errorf("--authz=rbac needs to know who asks: add --auth=tokenreview (or token, or --client-ca-file)"))
	}
	if (sc.Auth == "token") != (sc.TokenFile != "") {
		errs = append(errs, fmt.Errorf("--token-file goes with --auth=token, and --auth=token needs it"))
	}
	if !(sc.TokenReviewsPerClient > 0) || sc.TokenReviewsPerClient > 1e6 {
		errs = append(errs, fmt.Errorf("--token-reviews-per-client must be positive, at most 1e6, got %v", sc.TokenReviewsPerClient))
	}
	if sc.TokenAudiences != "" && sc.Auth != "tokenreview" {
		errs = append(errs, fmt.Errorf("--token-audiences applies to --auth=tokenreview only"))
	}
	if demo && (sc.Auth == "tokenreview" || sc.Authz == "rbac") {
		errs = append(errs, fmt.Errorf("--demo: the simulated cluster reviews no tokens or access; use --auth=token with --authz=none"))
	}
	if !sc.authenticating() && !isLoopback(listen) && !sc.AllowUnauthenticatedRemote && !demo {
		errs = append(errs, fmt.Errorf("--listen %q can be reached from other hosts, and with --auth=none anyone there reads everything cached: "+
			"use --auth=tokenreview, listen on 127.0.0.1, or pass --allow-unauthenticated-remote", listen))
	}
	if sc.AcceptHosts != "" && sc.authenticating() {
		errs = append(errs, fmt.Errorf("--accept-hosts applies without authentication only (--auth=none, no --client-ca-file): authenticated callers are served under any name"))
	}
	for _, h := range splitList(sc.AcceptHosts) {
		if h != "*" && strings.ContainsAny(h, "/:@ ") {
			errs = append(errs, fmt.Errorf("--accept-hosts %q: want host names (kubeindex.example), without scheme or port", h))
		}
	}
	if sc.MaxConnections <= 0 {
		errs = append(errs, fmt.Errorf("--max-connections must be positive, got %d", sc.MaxConnections))
	}
	if sc.MaxConnectionsPerAddress < 0 || sc.MaxConnectionsPerAddress > sc.MaxConnections {
		errs = append(errs, fmt.Errorf("--max-connections-per-address must be between 0 (a quarter of --max-connections) and --max-connections (%d), got %d",
			sc.MaxConnections, sc.MaxConnectionsPerAddress))
	}
	if sc.UnauthenticatedTimeout < minUnauthenticatedTimeout {
		errs = append(errs, fmt.Errorf("--unauthenticated-timeout must be at least %s, got %s", minUnauthenticatedTimeout, sc.UnauthenticatedTimeout))
	}
	if sc.MaxStreamsPerClient <= 0 {
		errs = append(errs, fmt.Errorf("--max-streams-per-client must be positive, got %d", sc.MaxStreamsPerClient))
	}
	if sc.RequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--request-timeout must be positive, got %s", sc.RequestTimeout))
	}
	return append(errs, sc.TLS.validate(listen, demo, sc.authenticating())...)
}

// isLoopback: only an address no other host can reach counts. A host name
// other than localhost might resolve anywhere.
func isLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serverAuth builds the authenticator and authorizer: the token file is
// read, the review clients made, before anything starts.
func (sc *SecurityConfig) serverAuth(rc *rest.Config) (server.AuthOptions, error) {
	var o server.AuthOptions
	switch sc.Auth {
	case "token":
		st, err := auth.LoadStaticTokens(sc.TokenFile)
		if err != nil {
			return o, fmt.Errorf("--token-file: %w", err)
		}
		o.Authenticator = st
	case "tokenreview":
		tr, err := auth.NewTokenReviewerForConfig(rc, auth.TokenReviewOptions{Audiences: splitList(sc.TokenAudiences),
			ReviewsPerSecond: sc.TokenReviewsPerClient, ReviewBurst: auth.DefaultReviewBurst(sc.TokenReviewsPerClient)})
		if err != nil {
			return o, err
		}
		o.Authenticator = tr
	}
	var err error
	o.Authorizer, err = sc.authorizer(rc)
	return o, err
}

// authorizer is who decides what a caller may read in the cluster rc
// reaches: nil without --authz=rbac.
func (sc *SecurityConfig) authorizer(rc *rest.Config) (auth.Authorizer, error) {
	if sc.Authz != "rbac" {
		return nil, nil
	}
	ar, err := auth.NewAccessReviewerForConfig(rc, auth.AccessReviewOptions{})
	if err != nil {
		return nil, err
	}
	return ar, nil
}

// namespaceFinder, with --authz=rbac --namespace-access=rbac, watches
// RBAC objects to narrow the namespaces a restricted caller is asked
// about, until ctx ends. When kubeindex may not list RBAC objects, it says
// so and every namespace that could hold an answer is asked about, as
// with --namespace-access=review. nil when not narrowing.
func (sc *SecurityConfig) namespaceFinder(ctx context.Context, rc *rest.Config, log *slog.Logger) auth.NamespaceFinder {
	if sc.Authz != "rbac" || sc.NamespaceAccess != "rbac" {
		return nil
	}
	r, err := auth.NewRBACNamespacesForConfig(ctx, rc)
	if err != nil {
		log.Warn("kubeindex cannot read RBAC objects: a restricted caller's list across namespaces asks about every namespace holding objects "+
			"(--namespace-access=review); grant list and watch on roles, rolebindings, clusterroles and clusterrolebindings (deploy/clusterrole.yaml)", "err", err)
		return nil
	}
	// Read before serving, so that the first lists are narrowed already;
	// until read, every namespace is asked about (correct, only dearer).
	r.Start(ctx.Done())
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if r.WaitReady(waitCtx) {
		log.Info("a restricted caller's list across namespaces asks about the namespaces where RoleBindings grant it (--namespace-access=rbac)")
	} else {
		log.Warn("RBAC objects not read within 30s: restricted lists ask about every namespace until they are")
		go func() { r.WaitReady(ctx) }()
	}
	return r // its watches end with ctx
}

// hosts are the Host values served while authentication is off. A server
// other hosts may reach without authentication (allowed, or the demo's
// simulated cluster) is reached by address too.
func (sc *SecurityConfig) hosts(demo bool) server.HostOptions {
	return server.HostOptions{AcceptHosts: splitList(sc.AcceptHosts), AcceptIPs: sc.AllowUnauthenticatedRemote || demo}
}

func (sc *SecurityConfig) limits() server.LimitOptions {
	return server.LimitOptions{MaxConnections: sc.MaxConnections, MaxConnectionsPerAddress: sc.MaxConnectionsPerAddress,
		UnauthenticatedTimeout: sc.UnauthenticatedTimeout, MaxStreamsPerClient: sc.MaxStreamsPerClient,
		RequestTimeout: sc.RequestTimeout}
}

// warn says loudly what the security settings leave open.
func (sc *SecurityConfig) warn(log *slog.Logger, listen string) {
	switch {
	case !sc.authenticating() && !isLoopback(listen):
		log.Warn("AUTHENTICATION IS OFF and kubeindex listens on an address other hosts can reach: "+
			"anyone who can connect reads everything cached (use --auth=tokenreview --authz=rbac)", "listen", listen)
	case !sc.authenticating():
		log.Info("authentication is off; kubeindex listens on loopback only", "listen", listen)
	case sc.Authz == "none":
		log.Warn("authorization is off: every authenticated caller reads everything cached (use --authz=rbac)", "auth", sc.Auth, "clientCertificates", sc.TLS.ClientCAFile != "")
	default:
		log.Info("callers are authenticated and see what their RBAC allows", "auth", sc.Auth, "clientCertificates", sc.TLS.ClientCAFile != "", "authz", sc.Authz)
	}
	sc.TLS.warnPlain(log, listen, sc.authenticating())
}
