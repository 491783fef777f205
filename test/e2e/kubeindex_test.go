package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/test/kubeindexbin"
)

// Timeouts for the kubeindex process.
const (
	serveTimeout = 60 * time.Second // from exec to the "serving" log line
	readyTimeout = 90 * time.Second // from serving to /readyz 200
	stopTimeout  = 20 * time.Second // from SIGTERM to exit
)

// kubeindex is a running kubeindex process.
type kubeindex struct {
	URL     string // http://127.0.0.1:PORT
	args    []string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has exited
	stopped bool
}

// startKubeindex runs the binary as a user would, with args after
// --listen 127.0.0.1:0 (the port is read from its "serving" log line), waits
// until /readyz answers 200, and registers a cleanup that stops it with
// SIGTERM and fails the test unless it exits 0.
func startKubeindex(t *testing.T, args ...string) *kubeindex {
	t.Helper()
	k := launchKubeindex(t, args...)
	k.waitReady(t, readyTimeout)
	return k
}

// launchKubeindex starts the process and waits until it serves HTTP, not
// until it is ready.
func launchKubeindex(t *testing.T, args ...string) *kubeindex {
	t.Helper()
	return launchKubeindexEnv(t, nil, args...)
}

// launchKubeindexEnv is launchKubeindex with env (KEY=value) added to the
// process's otherwise empty environment.
func launchKubeindexEnv(t *testing.T, env []string, args ...string) *kubeindex {
	t.Helper()
	bin := kubeindexBinary(t)
	k := &kubeindex{
		args:    append([]string{"--listen", "127.0.0.1:0", "--log-format", "json"}, args...),
		logPath: filepath.Join(t.TempDir(), "kubeindex.log"),
		done:    make(chan struct{}),
	}
	logf, err := os.Create(k.logPath)
	if err != nil {
		t.Fatal(err)
	}
	k.cmd = exec.Command(bin, k.args...)
	// Nothing from the test's environment (KUBECONFIG, KUBEINDEX_*) may
	// change what the flags say.
	k.cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, env...)
	stderr, err := k.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	k.cmd.Stdout = logf
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(io.TeeReader(stderr, logf))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "serving" && line.Addr != "" {
				select {
				case addr <- line.Addr:
				default:
				}
			}
		}
		io.Copy(logf, stderr)
	}()
	go func() {
		<-copied // Wait closes the pipe: read it all first
		_ = k.cmd.Wait()
		logf.Close()
		close(k.done)
	}()
	t.Cleanup(func() {
		k.stop(t)
		if t.Failed() {
			t.Logf("kubeindex %s\nend of its log %s:\n%s", strings.Join(k.args, " "), k.logPath, k.logTail(40))
		}
	})
	select {
	case a := <-addr:
		k.URL = "http://" + a
	case <-k.done:
		t.Fatalf("kubeindex %s exited (%v) before serving:\n%s", strings.Join(k.args, " "), k.cmd.ProcessState, k.logTail(40))
	case <-time.After(serveTimeout):
		t.Fatalf("kubeindex did not log that it serves within %v", serveTimeout)
	}
	return k
}

// waitReady polls /readyz until it answers 200.
func (k *kubeindex) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, "kubeindex /readyz to answer 200", func() error {
		select {
		case <-k.done:
			return stopPolling{fmt.Errorf("kubeindex exited: %v", k.cmd.ProcessState)}
		default:
		}
		r, err := k.try("/readyz")
		if err != nil {
			return err
		}
		if r.code != http.StatusOK {
			return fmt.Errorf("/readyz: %d %s", r.code, r.body)
		}
		return nil
	})
}

// stop sends SIGTERM and fails the test unless the process exits 0 within
// stopTimeout. Stopping twice is a no-op.
func (k *kubeindex) stop(t *testing.T) {
	t.Helper()
	if k.stopped {
		return
	}
	k.stopped = true
	select {
	case <-k.done:
		t.Errorf("kubeindex exited before it was stopped: %v", k.cmd.ProcessState)
		return
	default:
	}
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
		if code := k.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("kubeindex exited with code %d after SIGTERM, want 0", code)
		}
	case <-time.After(stopTimeout):
		_ = k.cmd.Process.Kill()
		<-k.done
		t.Errorf("kubeindex did not exit within %v of SIGTERM; killed", stopTimeout)
	}
}

// kill ends the process with SIGKILL, as the OOM killer or a node's loss
// does: no shutdown, no goodbye to its clients.
func (k *kubeindex) kill(t *testing.T) {
	t.Helper()
	k.stopped = true
	if err := k.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-k.done
}

func (k *kubeindex) logTail(n int) string {
	b, _ := os.ReadFile(k.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// response is one HTTP answer, read whole.
type response struct {
	code   int
	header http.Header
	body   []byte
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// try GETs path from kubeindex.
func (k *kubeindex) try(path string) (response, error) {
	res, err := httpClient.Get(k.URL + path)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, fmt.Errorf("GET %s: reading the body: %w", path, err)
	}
	return response{code: res.StatusCode, header: res.Header, body: b}, nil
}

// get GETs path, failing the test if kubeindex cannot be reached.
func (k *kubeindex) get(t testing.TB, path string) response {
	t.Helper()
	r, err := k.try(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// getJSON GETs path and decodes a 200 answer into out.
func (k *kubeindex) getJSON(path string, out any) error {
	r, err := k.try(path)
	if err != nil {
		return err
	}
	if r.code != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, r.code, r.body)
	}
	if err := json.Unmarshal(r.body, out); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}

// stopPolling ends eventually early: the condition can no longer come true.
type stopPolling struct{ error }

// eventually polls check every 100ms until it returns nil, and fails the
// test with check's last error if timeout passes first. Answers from a cache
// fed by a watch converge; a broken one never does, so a deadline (never a
// fixed sleep) separates the two.
func eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		var stop stopPolling
		if errors.As(err, &stop) {
			t.Fatalf("waiting for %s: %v", what, stop.error)
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kubeindexBinary is the binary built once for this test binary.
func kubeindexBinary(t testing.TB) string {
	t.Helper()
	bin, err := kubeindexbin.Path()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

var repoRoot = kubeindexbin.RepoRoot
