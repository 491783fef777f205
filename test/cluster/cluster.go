// Package cluster runs the real test cluster (cmd/testcluster: embedded etcd
// and kube-apiserver on 127.0.0.1) for end-to-end tests, and seeds it with the
// objects those tests look up.
//
// Typical use from a test package:
//
//	func TestMain(m *testing.M) { os.Exit(cluster.RunTests(m)) }
//
//	func TestSomething(t *testing.T) {
//		c := cluster.StartForTest(t) // shared by the whole test binary
//		cs, dyn := c.Clients(t)
//		seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{})
//		...
//	}
//
// What a real cluster would do but this one does not: no controller-manager
// (no default ServiceAccounts, no garbage collection, namespaces never finish
// terminating, Deployments never get ReplicaSets by themselves), no scheduler
// and no kubelet (pods stay Pending unless a client writes their status, as
// Seed does).
package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Timeouts used when the caller's context has no deadline.
const (
	DefaultStartTimeout = 2 * time.Minute
	StopTimeout         = time.Minute
)

// Cluster is a running (or stopped) testcluster process. Its methods are
// safe for concurrent use, but Stop and Restart affect every user of the
// cluster: only its owner should call them.
type Cluster struct {
	// Dir holds the cluster's state: etcd data, certificates, tokens.
	Dir string
	// Kubeconfig is the path of a kubeconfig for the admin user
	// (system:masters), verifying the server against the cluster's CA.
	Kubeconfig string
	// Host is the API server's URL, https://127.0.0.1:PORT. It stays the
	// same across Restart.
	Host string
	// Token is the admin user's bearer token.
	Token string
	// CAData is the PEM CA that signed the API server's certificate.
	CAData []byte
	// LogPath is the file receiving the process's logs (etcd and
	// kube-apiserver), appended to across restarts.
	LogPath string

	bin string

	mu   sync.Mutex
	proc *process
}

// process is one run of the binary.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed after Wait returned
	err    error         // Wait's result; read after exited
}

// Start builds the binary if needed and starts a cluster whose state lives
// in dir (created if missing). A dir used before is reused: same port, same
// credentials, same data. Start returns once the API server is ready, or
// fails with the end of the log in the error.
//
// The caller must call Stop. If the calling process dies first, the cluster
// receives SIGTERM (Linux parent-death signal) and stops by itself.
func Start(ctx context.Context, dir string) (*Cluster, error) {
	bin, err := Build(ctx)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, err
	}
	c := &Cluster{Dir: abs, LogPath: filepath.Join(abs, "testcluster.log"), bin: bin}
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// start runs the binary and waits for its READY line. The port is the one
// saved in Dir, so a restart keeps Host.
func (c *Cluster) start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil {
		return errors.New("cluster is already running")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultStartTimeout)
		defer cancel()
	}
	logf, err := os.OpenFile(c.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "\n==== testcluster start %s ====\n", time.Now().Format(time.RFC3339Nano))

	args := []string{"--dir", c.Dir}
	if c.Host != "" {
		args = append(args, "--port", portOf(c.Host))
	}
	ready := make(chan string, 1)
	cmd := exec.Command(c.bin, args...)
	cmd.Stdout = &stdoutWatcher{log: logf, ready: ready}
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.exited)
	}()

	select {
	case kubeconfig := <-ready:
		c.proc = p
		if err := c.load(kubeconfig); err != nil {
			c.stopLocked()
			return err
		}
		return nil
	case <-p.exited:
		return fmt.Errorf("testcluster exited before it was ready (%v); end of %s:\n%s", p.err, c.LogPath, tail(c.LogPath, 40))
	case <-ctx.Done():
		c.proc = p
		c.stopLocked()
		return fmt.Errorf("testcluster not ready: %w; end of %s:\n%s", ctx.Err(), c.LogPath, tail(c.LogPath, 40))
	}
}

// stdoutWatcher reports the READY line and copies everything else to the
// log. exec.Cmd calls Write from one goroutine and Wait waits for it, so it
// needs no lock and never loses the end of the output.
type stdoutWatcher struct {
	log   io.Writer
	ready chan<- string
	buf   []byte
}

func (w *stdoutWatcher) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		if kubeconfig, ok := strings.CutPrefix(line, "READY "); ok {
			select {
			case w.ready <- kubeconfig:
			default:
			}
			continue
		}
		_, _ = io.WriteString(w.log, line+"\n")
	}
}

// load reads the kubeconfig the process wrote and fills in the fields.
func (c *Cluster) load(kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	c.Kubeconfig = kubeconfig
	c.Host = cfg.Host
	c.Token = cfg.BearerToken
	c.CAData = cfg.CAData
	return nil
}

// Stop sends SIGTERM and waits for a graceful exit (API server, then etcd),
// killing the process after StopTimeout. Stopping a stopped cluster is a
// no-op. The state in Dir is kept: Restart, or Start on the same Dir, picks
// it up.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopLocked()
}

func (c *Cluster) stopLocked() error {
	p := c.proc
	if p == nil {
		return nil
	}
	c.proc = nil
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(StopTimeout)
	defer t.Stop()
	select {
	case <-p.exited:
		if p.err != nil {
			return fmt.Errorf("testcluster exited with %v; end of %s:\n%s", p.err, c.LogPath, tail(c.LogPath, 40))
		}
		return nil
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("testcluster did not stop within %v after SIGTERM; killed", StopTimeout)
	}
}

// Kill ends the process at once with SIGKILL, as a crashed node or an
// OOM kill would: no graceful shutdown, open connections are reset and new
// ones refused. Killing a stopped cluster is a no-op. The state in Dir
// survives (etcd recovers from its log): Restart brings it back.
func (c *Cluster) Kill() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.proc
	if p == nil {
		return nil
	}
	c.proc = nil
	if err := p.cmd.Process.Kill(); err != nil {
		return err
	}
	<-p.exited
	return nil
}

// Restart stops the cluster and starts it again on the same Dir and port.
// What was written to the API server before survives; clients built from
// RESTConfig or Kubeconfig keep working once it is back.
func (c *Cluster) Restart(ctx context.Context) error {
	if err := c.Stop(); err != nil {
		return err
	}
	return c.start(ctx)
}

// Running reports whether the process is up (it may have exited on its own;
// then Stop reports why).
func (c *Cluster) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return false
	}
	select {
	case <-c.proc.exited:
		return false
	default:
		return true
	}
}

// PID is the process ID of the API server and etcd (one process), or 0
// when the cluster is not running: for measuring what they cost.
func (c *Cluster) PID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return 0
	}
	return c.proc.cmd.Process.Pid
}

// RESTConfig returns a new client config for the admin user.
func (c *Cluster) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            c.Host,
		BearerToken:     c.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: bytes.Clone(c.CAData)},
		// Seeding creates objects in bursts; the client-side defaults
		// (QPS 5) would make it the slowest part of a test.
		QPS:   200,
		Burst: 400,
	}
}

// Clientset returns a typed client for the admin user.
func (c *Cluster) Clientset() (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(c.RESTConfig())
}

// Dynamic returns a dynamic client for the admin user.
func (c *Cluster) Dynamic() (*dynamic.DynamicClient, error) {
	return dynamic.NewForConfig(c.RESTConfig())
}

// Log returns the last n lines of the cluster's log, for failure messages.
func (c *Cluster) Log(n int) string { return tail(c.LogPath, n) }

func portOf(host string) string {
	i := strings.LastIndexByte(host, ':')
	if i < 0 {
		return "0"
	}
	if _, err := strconv.Atoi(host[i+1:]); err != nil {
		return "0"
	}
	return host[i+1:]
}

// tail returns the last n lines of a file, reading at most its last 64 KiB.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	const max = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
