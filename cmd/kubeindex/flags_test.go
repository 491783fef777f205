package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// shippedEnvNames are the environment variables kubeindex has read since
// they were introduced: deployments set them, so each must keep working
// whatever derives the names now.
var shippedEnvNames = map[string]string{
	"context": "KUBEINDEX_CONTEXT", "listen": "KUBEINDEX_LISTEN",
	"config": "KUBEINDEX_CONFIG", "demo": "KUBEINDEX_DEMO", "resources": "KUBEINDEX_RESOURCES",
	"stale-after": "KUBEINDEX_STALE_AFTER", "watch-idle-timeout": "KUBEINDEX_WATCH_IDLE_TIMEOUT",
	"api-compression": "KUBEINDEX_API_COMPRESSION", "api-http2": "KUBEINDEX_API_HTTP2",
	"stream-coalesce": "KUBEINDEX_STREAM_COALESCE", "stream-max-lifetime": "KUBEINDEX_STREAM_MAX_LIFETIME",
	"window-rate": "KUBEINDEX_WINDOW_RATE", "ip-history": "KUBEINDEX_IP_HISTORY", "ip-history-skew": "KUBEINDEX_IP_HISTORY_SKEW",
	"ip-history-max": "KUBEINDEX_IP_HISTORY_MAX", "ip-history-dir": "KUBEINDEX_IP_HISTORY_DIR",
	"log-level": "KUBEINDEX_LOG_LEVEL", "log-format": "KUBEINDEX_LOG_FORMAT",
	"auth": "KUBEINDEX_AUTH", "token-file": "KUBEINDEX_TOKEN_FILE", "token-audiences": "KUBEINDEX_TOKEN_AUDIENCES",
	"authz": "KUBEINDEX_AUTHZ", "namespace-access": "KUBEINDEX_NAMESPACE_ACCESS",
	"allow-unauthenticated-remote": "KUBEINDEX_ALLOW_UNAUTHENTICATED_REMOTE", "accept-hosts": "KUBEINDEX_ACCEPT_HOSTS",
	"max-connections": "KUBEINDEX_MAX_CONNECTIONS", "max-connections-per-address": "KUBEINDEX_MAX_CONNECTIONS_PER_ADDRESS",
	"unauthenticated-timeout": "KUBEINDEX_UNAUTHENTICATED_TIMEOUT", "max-streams-per-client": "KUBEINDEX_MAX_STREAMS_PER_CLIENT",
	"token-reviews-per-client": "KUBEINDEX_TOKEN_REVIEWS_PER_CLIENT", "request-timeout": "KUBEINDEX_REQUEST_TIMEOUT",
}

// TestKubeconfigMayListPaths: $KUBECONFIG, read when --kubeconfig is not
// given, is a list of paths merged as kubectl merges them.
func TestKubeconfigMayListPaths(t *testing.T) {
	first := writeFile(t, "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://first.example}\n"+
		"users:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n")
	second := writeFile(t, "apiVersion: v1\nkind: Config\ncurrent-context: x\n")
	env := map[string]string{"KUBECONFIG": first + string(filepath.ListSeparator) + second}
	getenv := func(k string) string { return env[k] }
	cfg, err := parseConfig(nil, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := clusterConfig(cfg, getenv)
	if err != nil || rc.Host != "https://first.example" {
		t.Fatalf("KUBECONFIG=%s: %v, %v; expect the cluster of the first file and the context of the second", env["KUBECONFIG"], rc, err)
	}
}

func testFlagSet() *flag.FlagSet { return (&Config{}).flagSet(new(string), new(multiFlag)) }

func TestShippedEnvironmentNamesStillWork(t *testing.T) {
	fs := testFlagSet()
	for name, env := range shippedEnvNames {
		if fs.Lookup(name) == nil {
			t.Errorf("--%s, backed by $%s, is gone", name, env)
		} else if got := envName(name); got != env {
			t.Errorf("--%s is backed by $%s; deployments set $%s", name, got, env)
		}
	}
}

// TestEnvironmentNamesAreDerived: a flag's variable is its name under
// KUBEINDEX_, unless it is a listed exception; no two flags share one.
func TestEnvironmentNamesAreDerived(t *testing.T) {
	fs := testFlagSet()
	for name := range envExceptions {
		if fs.Lookup(name) == nil {
			t.Errorf("envExceptions lists --%s, which does not exist", name)
		}
	}
	owner := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		env := envName(f.Name)
		if _, exception := envExceptions[f.Name]; !exception && env != "KUBEINDEX_"+strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_")) {
			t.Errorf("--%s is backed by $%s, not derived from its name", f.Name, env)
		}
		if env == "" {
			return
		}
		if other, ok := owner[env]; ok {
			t.Errorf("$%s backs both --%s and --%s", env, other, f.Name)
		}
		owner[env] = f.Name
	})
}

// TestEveryEnvironmentVariableSetsItsFlag sets each variable to a value
// other than its flag's default and expects the flag to take it.
func TestEveryEnvironmentVariableSetsItsFlag(t *testing.T) {
	fs := testFlagSet()
	values := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if envName(f.Name) == "" {
			return
		}
		v := "x7"
		switch f.Value.(flag.Getter).Get().(type) {
		case bool:
			v = fmt.Sprint(f.DefValue != "true")
		case time.Duration:
			v = "7s"
		case int, float64:
			v = "7"
		}
		values[envName(f.Name)] = v
	})
	if err := applyEnv(fs, func(k string) string { return values[k] }); err != nil {
		t.Fatal(err)
	}
	fs.VisitAll(func(f *flag.Flag) {
		if env := envName(f.Name); env != "" && f.Value.String() != values[env] {
			t.Errorf("$%s=%s left --%s at %q", env, values[env], f.Name, f.Value.String())
		}
	})
}

func TestHelpNamesEveryFlagAndVariable(t *testing.T) {
	fs := testFlagSet()
	var out strings.Builder
	usage(&out, fs)
	fs.VisitAll(func(f *flag.Flag) {
		want := "--" + f.Name
		if env := envName(f.Name); env != "" {
			want += " [" + env + "]"
		}
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("the help lacks %q", want)
		}
	})
	if _, err := parseConfig([]string{"--help"}, func(string) string { return "" }, io.Discard); err != flag.ErrHelp {
		t.Errorf("--help: %v; expect flag.ErrHelp", err)
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Hour: "1h", 2 * time.Minute: "2m", 80 * time.Second: "1m20s", 90 * time.Minute: "1h30m",
		20 * time.Millisecond: "20ms", 10 * time.Second: "10s", 0: "0s", time.Hour + time.Second: "1h0m1s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%s) = %q; expect %q", d, got, want)
		}
	}
}
