package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// kubectlTimeout bounds one kubectl command (not a watch).
const kubectlTimeout = time.Minute

// kubectlCmd runs the kubectl built from test/go.mod's k8s.io/kubernetes
// with one kubeconfig, in a HOME of its own: kubectl caches discovery under
// $HOME/.kube/cache, and a cache shared by two servers, or left over from a
// previous run, would answer for the server.
type kubectlCmd struct {
	name       string // "API server" or "kubeindex", for messages
	bin        string
	kubeconfig string
	home       string
}

func newKubectl(t testing.TB, name, kubeconfig string) *kubectlCmd {
	t.Helper()
	bin, err := cluster.BuildKubectl(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &kubectlCmd{name: name, bin: bin, kubeconfig: kubeconfig, home: t.TempDir()}
}

func (k *kubectlCmd) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	// Nothing from the test's environment (KUBECONFIG, a kuberc, a
	// terminal width) may change what kubectl prints.
	cmd.Env = []string{"HOME=" + k.home, "PATH=" + os.Getenv("PATH"), "KUBERC=off", "TERM=dumb"}
	return cmd
}

// run runs kubectl to completion and returns its stdout and stderr.
func (k *kubectlCmd) run(args ...string) (stdout, stderr string, err error) {
	return k.runEnv(nil, args...)
}

// runEnv is run with more environment variables (KUBE_EDITOR=...).
func (k *kubectlCmd) runEnv(env []string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := k.command(ctx, args...)
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if err != nil {
		err = fmt.Errorf("kubectl %s against the %s: %w\nstderr: %s", strings.Join(args, " "), k.name, err, errb.Bytes())
	}
	return out.String(), errb.String(), err
}

// kubectlPair is the same kubectl pointed at the API server (the oracle)
// and at kubeindex.
type kubectlPair struct{ api, ki *kubectlCmd }

// same runs args against both until kubeindex's output, normalised by norm,
// equals the API server's (kubeindex's cache follows the API server by a
// watch, so its answers converge; a wrong one never does), and fails the test
// with the last difference otherwise. It returns the API server's normalised
// output.
func (p kubectlPair) same(t *testing.T, norm func(string) string, args ...string) string {
	t.Helper()
	var want string
	eventually(t, converge, "kubectl "+strings.Join(args, " "), func() error {
		apiOut, _, err := p.api.run(args...)
		if err != nil {
			return stopPolling{err}
		}
		kiOut, _, err := p.ki.run(args...)
		if err != nil {
			return err
		}
		want = norm(apiOut)
		if d := cmp.Diff(strings.Split(want, "\n"), strings.Split(norm(kiOut), "\n")); d != "" {
			return fmt.Errorf("output differs (-API server +kubeindex):\n%s", d)
		}
		return nil
	})
	return want
}

// timeColumns are the table columns whose values are durations up to now:
// they move between two runs of the same command, so they are replaced by a
// placeholder. Nothing else in a table is normalised.
var timeColumns = map[string]bool{"AGE": true, "DURATION": true, "LAST SCHEDULE": true, "LAST SEEN": true}

// headerCell is one column heading of kubectl's table: words separated by
// single spaces ("NOMINATED NODE"); columns are at least three spaces apart.
var headerCell = regexp.MustCompile(`\S+( \S+)*`)

// tableCells rewrites kubectl's tables (one or several, separated by blank
// lines, each with its header) as cells separated by " | ", cutting each row
// at its header's column offsets (kubectl's tabwriter aligns every row of a
// table to them; cells may be empty, so splitting on spaces would not do),
// with timeColumns replaced by "<time>". Column widths then no longer depend
// on how long an age is, nor on rows that only one side has.
func tableCells(out string) string {
	var res []string
	var starts []int
	var timed []bool
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			starts = nil
			res = append(res, "")
			continue
		}
		header := starts == nil
		if header {
			timed = timed[:0]
			for _, loc := range headerCell.FindAllStringIndex(line, -1) {
				starts = append(starts, loc[0])
				timed = append(timed, timeColumns[line[loc[0]:loc[1]]])
			}
		}
		cells := make([]string, len(starts))
		for i, s := range starts {
			end := len(line)
			if i+1 < len(starts) && starts[i+1] < end {
				end = starts[i+1]
			}
			if s < end {
				cells[i] = strings.TrimSpace(line[s:end])
			}
			if timed[i] && !header && cells[i] != "" {
				cells[i] = "<time>"
			}
		}
		res = append(res, strings.Join(cells, " | "))
	}
	return strings.Join(res, "\n")
}

// asIs leaves output alone: nothing in it depends on the time of the run.
func asIs(out string) string { return out }

// watchRows splits the lines of `kubectl get -w --output-watch-events` into
// cells. Unlike tableCells it cannot use the header's offsets: kubectl
// flushes each event's row by itself, and a wider cell moves the columns
// after it. Pod rows have no empty cells and no cell holds two spaces, so
// runs of two or more spaces separate cells. The AGE column becomes
// "<time>".
func watchRows(out string) []string {
	sep := regexp.MustCompile(` {2,}`)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 || lines[0] == "" {
		return nil
	}
	header := sep.Split(strings.TrimSpace(lines[0]), -1)
	age := -1
	for i, h := range header {
		if h == "AGE" {
			age = i
		}
	}
	res := []string{strings.Join(header, " | ")}
	for _, l := range lines[1:] {
		cells := sep.Split(strings.TrimSpace(l), -1)
		if age >= 0 && age < len(cells) {
			cells[age] = "<time>"
		}
		res = append(res, strings.Join(cells, " | "))
	}
	return res
}

// kubectlWatch is a running `kubectl get -w`, its output collected.
type kubectlWatch struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	errb   bytes.Buffer
	done   chan struct{}
	cancel context.CancelFunc
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// watch starts `kubectl args...` (a watch) and stops it when the test ends.
func (k *kubectlCmd) watch(t *testing.T, args ...string) *kubectlWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &kubectlWatch{done: make(chan struct{}), cancel: cancel}
	w.cmd = k.command(ctx, args...)
	w.cmd.Stdout = lockedWriter{&w.mu, &w.out}
	w.cmd.Stderr = lockedWriter{&w.mu, &w.errb}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = w.cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-w.done
	})
	return w
}

// output returns what the watch printed so far, and whether it has exited.
func (w *kubectlWatch) output() (stdout, stderr string, exited bool) {
	select {
	case <-w.done:
		exited = true
	default:
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.String(), w.errb.String(), exited
}
