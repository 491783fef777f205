package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// k9sEnv turns TestK9s on: building k9s from its module the first time
// costs minutes more than the rest of the suite can spare in CI.
const k9sEnv = "KUBEINDEX_TEST_K9S"

// TestK9s drives k9s in tmux against the API server and against
// kubeindex's /k8s, on the same cluster: the pods view, the deployments
// view and a pod's YAML show the same rows (decorations, ages and the
// managedFields kubeindex strips aside). k9s asks a
// SelfSubjectAccessReview before it lists; without kubeindex's answer it
// falls back to its contexts view and shows no pods. Opt-in: set
// KUBEINDEX_TEST_K9S=1 (needs tmux).
func TestK9s(t *testing.T) {
	if os.Getenv(k9sEnv) == "" {
		t.Skipf("set %s=1 to build k9s and drive it in tmux", k9sEnv)
	}
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatal("tmux is needed: apt-get install tmux")
	}
	start := time.Now()
	bin, err := cluster.BuildK9s(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("k9s built in %v", time.Since(start).Round(time.Second))
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{})
	k := startKubeAPIKubeindex(t, c.Kubeconfig)

	api := startK9s(t, tmux, bin, "api", c.Kubeconfig)
	ki := startK9s(t, tmux, bin, "kubeindex", kubeconfigFor(t, k.URL+k8sPrefix))
	pod := seeded.Pods[0]

	sameRows := func(what string, want func(rows []string) bool) {
		t.Helper()
		var apiRows, kiRows []string
		eventually(t, converge, what, func() error {
			apiRows, kiRows = api.rows(), ki.rows()
			if !want(apiRows) || !want(kiRows) {
				return fmt.Errorf("not shown yet:\nAPI server:\n%s\nkubeindex:\n%s", api.screen(), ki.screen())
			}
			if d := cmp.Diff(apiRows, kiRows); d != "" {
				return fmt.Errorf("%s differ (-API server +kubeindex):\n%s", what, d)
			}
			return nil
		})
	}
	hasRow := func(name string) func([]string) bool {
		return func(rows []string) bool {
			return slices.ContainsFunc(rows, func(r string) bool { return strings.Contains(r, " "+name+" ") })
		}
	}

	sameRows("the pods", hasRow(pod.Name))
	for _, s := range []*k9sSession{api, ki} {
		s.keys(":deploy", "Enter")
	}
	sameRows("the deployments", hasRow(seeded.Deployments[0].Name))

	for _, s := range []*k9sSession{api, ki} {
		s.keys(":pods", "Enter")
	}
	sameRows("the pods again", hasRow(pod.Name))
	for _, s := range []*k9sSession{api, ki} {
		s.keys("/"+pod.Name, "Enter")
	}
	// The header and the one pod: y then shows its YAML.
	sameRows("the pod, filtered", func(rows []string) bool { return len(rows) == 2 && hasRow(pod.Name)(rows) })
	for _, s := range []*k9sSession{api, ki} {
		s.keys("y")
	}
	var apiYAML, kiYAML []string
	eventually(t, converge, "the pod's YAML", func() error {
		apiYAML, kiYAML = api.yaml(), ki.yaml()
		for _, y := range [][]string{apiYAML, kiYAML} {
			if !slices.Contains(y, "name: "+pod.Name) || !slices.Contains(y, "uid: "+string(pod.UID)) {
				return fmt.Errorf("the YAML is not shown yet:\nAPI server:\n%s\nkubeindex:\n%s", api.screen(), ki.screen())
			}
		}
		return nil
	})
	// The screen shows the top of the YAML; the API server's holds
	// managedFields there, which kubeindex strips: kubeindex's lines are
	// the API server's, less those.
	for _, l := range kiYAML {
		if !slices.Contains(apiYAML, l) {
			t.Errorf("kubeindex's YAML shows %q, the API server's does not:\nAPI server:\n%s\nkubeindex:\n%s", l, api.screen(), ki.screen())
		}
	}
}

// k9sSession is one k9s in a tmux session of its own.
type k9sSession struct {
	t          *testing.T
	tmux, name string
}

func startK9s(t *testing.T, tmux, bin, name, kubeconfig string) *k9sSession {
	t.Helper()
	home := t.TempDir()
	s := &k9sSession{t: t, tmux: tmux, name: fmt.Sprintf("k9s-%s-%d", name, time.Now().UnixNano())}
	cmd := fmt.Sprintf("env -i HOME=%s XDG_CONFIG_HOME=%s XDG_STATE_HOME=%s XDG_DATA_HOME=%s TERM=xterm-256color PATH=%s %s --kubeconfig %s --readonly --headless --logoless -A -c pods",
		home, filepath.Join(home, "config"), filepath.Join(home, "state"), filepath.Join(home, "data"), os.Getenv("PATH"), bin, kubeconfig)
	s.run("new-session", "-d", "-s", s.name, "-x", "220", "-y", "60", cmd)
	t.Cleanup(func() { _ = exec.Command(tmux, "kill-session", "-t", s.name).Run() })
	return s
}

func (s *k9sSession) run(args ...string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, s.tmux, args...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// keys types into k9s, then gives it a moment to redraw before the
// screen is read again (reads poll until what they wait for shows).
func (s *k9sSession) keys(keys ...string) {
	for _, k := range keys {
		if k == "Enter" {
			s.run("send-keys", "-t", s.name, "Enter")
		} else {
			s.run("send-keys", "-t", s.name, "-l", k)
		}
	}
}

func (s *k9sSession) screen() string { return s.run("capture-pane", "-p", "-t", s.name) }

// k9sDecoration is what k9s draws around its tables and views.
var k9sDecoration = regexp.MustCompile(`[│┌┐└┘─├┤┬┴┼]`)

// rows are the table rows on the screen as single-spaced text, without
// the AGE column (the last) and the title line, sorted.
func (s *k9sSession) rows() []string {
	var out []string
	for _, l := range strings.Split(s.screen(), "\n") {
		f := strings.Fields(k9sDecoration.ReplaceAllString(l, " "))
		// The title ("Pods(all)[12]") and the status line, which names
		// the kubeconfig's context and cluster, are decorations.
		if len(f) < 3 || strings.Contains(l, "(") && strings.Contains(l, ")[") || f[0] == "K9s" {
			continue
		}
		out = append(out, strings.Join(f[:len(f)-1], " "))
	}
	slices.Sort(out)
	return out
}

// yaml is the YAML view's lines, trimmed, outside managedFields.
func (s *k9sSession) yaml() []string {
	var out []string
	inManaged, indent := false, 0
	for _, l := range strings.Split(s.screen(), "\n") {
		l = strings.TrimRight(k9sDecoration.ReplaceAllString(l, " "), " ")
		trimmed := strings.TrimLeft(l, " ")
		depth := len(l) - len(trimmed)
		if inManaged && depth > indent {
			continue
		}
		inManaged = strings.HasPrefix(trimmed, "managedFields:")
		indent = depth
		if trimmed != "" && !inManaged && !strings.HasPrefix(trimmed, "K9s ") { // the status line names the context
			out = append(out, trimmed)
		}
	}
	return out
}
