package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/test/kubeindexbin"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubeindexbin.Remove()
	os.Exit(code)
}

// kubeindex is a running kubeindex process.
type kubeindex struct {
	Addr string // host:port it serves on
	URL  string // http://Addr
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startKubeindex runs the binary on a free loopback port with args, waits
// until /readyz answers 200, and stops it when the test ends.
func startKubeindex(t *testing.T, args ...string) *kubeindex {
	t.Helper()
	return startKubeindexWithin(t, 90*time.Second, args...)
}

// startKubeindexWithin is startKubeindex for a server that may take up to
// ready to sync (a large simulated cluster).
func startKubeindexWithin(t *testing.T, ready time.Duration, args ...string) *kubeindex {
	t.Helper()
	bin := kubeindexBinary(t)
	logPath := filepath.Join(t.TempDir(), "kubeindex.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args = append([]string{"--listen", "127.0.0.1:0", "--log-format", "json"}, args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBEINDEX_LOG_LEVEL=info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	k := &kubeindex{cmd: cmd, log: logPath, done: make(chan struct{})}
	addrc := make(chan string, 1)
	go func() {
		// The serving address is in the log line {"msg":"serving","addr":…}.
		sc := bufio.NewScanner(io.TeeReader(stderr, logf))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "serving" && line.Addr != "" {
				select {
				case addrc <- line.Addr:
				default:
				}
			}
		}
	}()
	go func() {
		cmd.Wait()
		logf.Close()
		close(k.done)
	}()
	t.Cleanup(func() {
		k.stop(t)
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("kubeindex log (%s):\n%s", logPath, tailLines(string(b), 40))
		}
	})
	select {
	case k.Addr = <-addrc:
	case <-k.done:
		b, _ := os.ReadFile(logPath)
		t.Fatalf("kubeindex %s exited before serving:\n%s", strings.Join(args, " "), tailLines(string(b), 40))
	case <-time.After(max(60*time.Second, ready)): // a demo generates its cluster first
		t.Fatalf("kubeindex did not start serving within %v", max(60*time.Second, ready))
	}
	k.URL = "http://" + k.Addr
	deadline := time.Now().Add(ready)
	for {
		res, err := http.Get(k.URL + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return k
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubeindex at %s not ready within %v (%v)", k.URL, ready, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop ends the process: SIGTERM, then SIGKILL after 15s.
func (k *kubeindex) stop(t *testing.T) {
	select {
	case <-k.done:
		return
	default:
	}
	k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(15 * time.Second):
		t.Errorf("kubeindex did not stop within 15s of SIGTERM; killing it")
		k.cmd.Process.Kill()
		<-k.done
	}
}

// getJSON decodes GET url into out, failing the test on any error.
func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	getJSONAs(t, url, "", out)
}

// getJSONAs is getJSON with a bearer token.
func getJSONAs(t *testing.T, url, token string, out any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, b)
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// resourceStatus is the part of /api/v1/resources/{r} the tests read.
type resourceStatus struct {
	Count           int    `json:"count"`
	ResourceVersion string `json:"resourceVersion"`
	Stale           bool   `json:"stale"`
	WatchConnected  bool   `json:"watchConnected"`
}

func podStatus(t *testing.T, base string) resourceStatus {
	t.Helper()
	var st resourceStatus
	getJSON(t, base+"/api/v1/resources/pods", &st)
	return st
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// proxy is a loopback TCP proxy in front of kubeindex. Cutting it drops
// every connection (the browser sees its WebSocket die, as on a network
// failure); its backend can be switched to another server.
type proxy struct {
	ln net.Listener

	mu      sync.Mutex
	backend string
	conns   map[net.Conn]struct{}
}

func startProxy(t *testing.T, backend string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, backend: backend, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() {
		ln.Close()
		p.cut()
	})
	go p.serve()
	return p
}

func (p *proxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

func (p *proxy) pipe(c net.Conn) {
	p.mu.Lock()
	backend := p.backend
	p.mu.Unlock()
	b, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(context.Background(), "tcp", backend)
	if err != nil {
		c.Close()
		return
	}
	p.track(c, b)
	done := make(chan struct{}, 2)
	go func() { io.Copy(b, c); done <- struct{}{} }()
	go func() { io.Copy(c, b); done <- struct{}{} }()
	<-done
	c.Close()
	b.Close()
	p.untrack(c, b)
}

func (p *proxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
}

func (p *proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

// cut closes every open connection; new ones are accepted as before.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *proxy) setBackend(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backend = addr
}

// kubeindexBinary is the binary built once for this test binary.
func kubeindexBinary(t *testing.T) string {
	t.Helper()
	bin, err := kubeindexbin.Path()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
