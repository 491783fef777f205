package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/cache"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := parseConfig(nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range cfg.Resources {
		names = append(names, r.Resource)
	}
	if strings.Join(names, ",") != "pods,services,nodes,deployments.apps,replicasets.apps,namespaces" {
		t.Errorf("default resources %v", names)
	}
	configured, err := cfg.configure(fakeFound(t))
	if err != nil {
		t.Fatal(err)
	}
	if idx := indexNames(configured[0]); idx != "ip=podIP,node=nodeName,owner=owner" {
		t.Errorf("default pod indexes %v", idx)
	}
	if idx := indexNames(configured[4]); idx != "owner=owner" {
		t.Errorf("default replicaset indexes %v", idx)
	}
	if cfg.Listen != "127.0.0.1:8080" || cfg.StaleAfter != 30*time.Second || cfg.APICompression {
		t.Errorf("defaults: listen %q stale-after %s api-compression %t", cfg.Listen, cfg.StaleAfter, cfg.APICompression)
	}
}

func TestAPIHTTP2Setting(t *testing.T) {
	for args, want := range map[string]bool{"": false, "--api-http2": true, "--api-http2=false": false} {
		var argv []string
		if args != "" {
			argv = []string{args}
		}
		cfg, err := parseConfig(argv, env(nil), io.Discard)
		if err != nil || cfg.APIHTTP2 != want {
			t.Errorf("%q: api-http2 %t, %v; want %t", args, cfg.APIHTTP2, err, want)
		}
	}
	if cfg, err := parseConfig(nil, env(map[string]string{"KUBEINDEX_API_HTTP2": "true"}), io.Discard); err != nil || !cfg.APIHTTP2 {
		t.Errorf("KUBEINDEX_API_HTTP2=true: %t, %v", cfg.APIHTTP2, err)
	}
}

func TestAPICompressionSetting(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want bool
	}{
		{nil, map[string]string{"KUBEINDEX_API_COMPRESSION": "true"}, true},
		{[]string{"--api-compression"}, nil, true},
		{[]string{"--api-compression=false"}, map[string]string{"KUBEINDEX_API_COMPRESSION": "true"}, false},
	} {
		cfg, err := parseConfig(tc.args, env(tc.env), io.Discard)
		if err != nil || cfg.APICompression != tc.want {
			t.Errorf("%v %v: api-compression %t, %v; want %t", tc.args, tc.env, cfg.APICompression, err, tc.want)
		}
	}
	if _, err := parseConfig(nil, env(map[string]string{"KUBEINDEX_API_COMPRESSION": "maybe"}), io.Discard); err == nil || !strings.Contains(err.Error(), "KUBEINDEX_API_COMPRESSION") {
		t.Errorf("bad env value: %v; expect an error naming the variable", err)
	}
}

func TestConfigEnvFallbackAndFlagPrecedence(t *testing.T) {
	e := env(map[string]string{"KUBEINDEX_LISTEN": "127.0.0.1:9999", "KUBEINDEX_RESOURCES": "pods,nodes", "KUBEINDEX_STALE_AFTER": "5s"})
	cfg, err := parseConfig([]string{"--stale-after=7s"}, e, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:9999" || len(cfg.Resources) != 2 || cfg.StaleAfter != 7*time.Second {
		t.Errorf("env fallback/flag precedence: %+v", cfg)
	}
	if _, err := parseConfig(nil, env(map[string]string{"KUBEINDEX_STALE_AFTER": "soon"}), io.Discard); err == nil || !strings.Contains(err.Error(), "$KUBEINDEX_STALE_AFTER") {
		t.Errorf("bad env value: %v; expect an error naming the variable", err)
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigFile(t *testing.T) {
	p := writeFile(t, `
resources:
- resource: pods
  namespaces: [team-a, team-b]
  labelSelector: app=web
  fieldSelector: status.phase=Running
  resync: 10m
  indexes:
  - {name: ip, type: podIP}
  - {name: image, path: "spec.containers.#.image"}
  - {name: app, label: app}
- resource: widgets.example.com
`)
	cfg, err := parseConfig([]string{"--config", p, "--index", "widgets:color=path:spec.color"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	configured, err := cfg.configure(fakeFound(t))
	if err != nil {
		t.Fatal(err)
	}
	pods := configured[0].Spec
	if len(pods.Indexes) != 3 || pods.Resync != 10*time.Minute || len(pods.Namespaces) != 2 {
		t.Errorf("pods spec %+v", pods)
	}
	w := configured[1].Spec
	if len(w.Indexes) != 1 || w.Indexes[0].Path != "spec.color" {
		t.Errorf("--index did not reach widgets: %+v", w.Indexes)
	}
}

// TestConfigErrorsNameTheirSetting: every start-up error says what is wrong
// and where, before anything starts.
func TestConfigErrorsNameTheirSetting(t *testing.T) {
	tests := []struct {
		name, yaml string
		args       []string
		want       []string
	}{
		{name: "bad path", yaml: "resources:\n- resource: pods\n  indexes: [{name: img, path: 'spec.containers..image'}]\n", want: []string{`resource "pods"`, `index "img"`, "empty component"}},
		{name: "bad selector", yaml: "resources:\n- resource: pods\n  labelSelector: 'app in ('\n", want: []string{`resource "pods"`, "labelSelector"}},
		{name: "bad field selector", yaml: "resources:\n- resource: pods\n  fieldSelector: 'a'\n", want: []string{"fieldSelector"}},
		{name: "unknown field", yaml: "resources:\n- resource: pods\n  selector: a=b\n", want: []string{`unknown field "selector"`}},
		{name: "bad resync", yaml: "resources:\n- resource: pods\n  resync: often\n", want: []string{"resync"}},
		{name: "bad namespace", yaml: "resources:\n- resource: pods\n  namespaces: [Team_A]\n", want: []string{"Team_A"}},
		{name: "duplicate index", yaml: "resources:\n- resource: pods\n  indexes: [{name: a, type: podIP}, {name: a, type: nodeName}]\n", want: []string{`index "a" is defined twice`}},
		{name: "unknown index type", yaml: "resources:\n- resource: pods\n  indexes: [{name: a, type: ip}]\n", want: []string{`unknown type "ip"`}},
		{name: "no resources", yaml: "resources: []\n", want: []string{"lists no resources"}},
		{name: "bad redact path", yaml: "resources:\n- resource: secrets\n  redact: ['spec.*']\n", want: []string{`resource "secrets"`, "redact path"}},
		{name: "bad listen", args: []string{"--listen", "8080"}, want: []string{"--listen"}},
		{name: "bad log level", args: []string{"--log-level", "loud"}, want: []string{"--log-level"}},
		{name: "bad --index", args: []string{"--index", "pods:x=path:a..b"}, want: []string{"--index", "empty component"}},
		{name: "--index on unknown resource", args: []string{"--demo", "--index", "widgets:x=podIP"}, want: []string{"not configured"}},
		{name: "--demo-pods without --demo", args: []string{"--demo-pods", "1000"}, want: []string{"--demo-pods needs --demo"}},
		{name: "--demo-pods too many", args: []string{"--demo", "--demo-pods", "9000000"}, want: []string{"--demo-pods must be between 0 and 1000000"}},
		{name: "stray argument", args: []string{"pods"}, want: []string{"unexpected argument"}},
		{name: "resources and config", yaml: "resources:\n- resource: pods\n", args: []string{"--resources", "pods"}, want: []string{"use one"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.yaml != "" {
				args = append([]string{"--config", writeFile(t, tt.yaml)}, args...)
			}
			err := run(context.Background(), args, env(nil), io.Discard)
			if err == nil {
				t.Fatal("expect an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestHelp(t *testing.T) {
	var out strings.Builder
	err := run(context.Background(), []string{"--help"}, env(nil), &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, want := range []string{"--kubeconfig\n", "--demo", "--config [KUBEINDEX_CONFIG]", "--index"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, out.String())
		}
	}
}

func TestStreamCoalesceSetting(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		env     map[string]string
		want    time.Duration
		invalid string // the error Validate must give, if any
	}{
		{nil, nil, 20 * time.Millisecond, ""},
		{[]string{"--stream-coalesce=0"}, nil, 0, ""},
		{nil, map[string]string{"KUBEINDEX_STREAM_COALESCE": "50ms"}, 50 * time.Millisecond, ""},
		{[]string{"--stream-coalesce=5ms"}, map[string]string{"KUBEINDEX_STREAM_COALESCE": "50ms"}, 5 * time.Millisecond, ""},
		{[]string{"--stream-coalesce=2s"}, nil, 2 * time.Second, "--stream-coalesce must be between 0 and 1s, got 2s"},
		{[]string{"--stream-coalesce=-1ms"}, nil, -time.Millisecond, "--stream-coalesce must be between 0 and 1s, got -1ms"},
	} {
		cfg, err := parseConfig(tc.args, env(tc.env), io.Discard)
		if err != nil || cfg.StreamCoalesce != tc.want {
			t.Errorf("%v %v: stream-coalesce %s, %v; want %s", tc.args, tc.env, cfg.StreamCoalesce, err, tc.want)
			continue
		}
		err = cfg.Validate()
		if tc.invalid == "" && err != nil || tc.invalid != "" && (err == nil || !strings.Contains(err.Error(), tc.invalid)) {
			t.Errorf("%v %v: Validate: %v; want %q", tc.args, tc.env, err, tc.invalid)
		}
	}
	if _, err := parseConfig([]string{"--stream-coalesce=soon"}, env(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "stream-coalesce") {
		t.Errorf("a value that is not a duration: %v; expect an error naming the flag", err)
	}
}

func TestWindowRateSetting(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		env     map[string]string
		want    float64
		invalid string
	}{
		{nil, nil, cache.DefaultWindowRate, ""},
		{[]string{"--window-rate=0.5"}, nil, 0.5, ""},
		{nil, map[string]string{"KUBEINDEX_WINDOW_RATE": "20"}, 20, ""},
		{[]string{"--window-rate=0"}, nil, 0, "--window-rate must be above 0"},
		{[]string{"--window-rate=51"}, nil, 51, "at most 50"},
	} {
		cfg, err := parseConfig(tc.args, env(tc.env), io.Discard)
		if err != nil || cfg.WindowRate != tc.want {
			t.Errorf("%v %v: window-rate %v, %v; want %v", tc.args, tc.env, cfg.WindowRate, err, tc.want)
			continue
		}
		err = cfg.Validate()
		if tc.invalid == "" && err != nil || tc.invalid != "" && (err == nil || !strings.Contains(err.Error(), tc.invalid)) {
			t.Errorf("%v %v: Validate: %v; want %q", tc.args, tc.env, err, tc.invalid)
		}
	}
}
