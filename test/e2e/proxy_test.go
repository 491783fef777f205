package e2e

import (
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// proxy is a loopback TCP proxy between kubeindex and the API server. While
// it is down, every connection through it is closed and new ones are
// closed on accept: to kubeindex the API server is gone, while the test
// still reaches it directly.
type proxy struct {
	ln      net.Listener
	backend string

	mu    sync.Mutex
	down  bool
	hung  bool          // accept and hold connections, forward nothing
	lag   time.Duration // delay of the API server's bytes, for connections made after it is set
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, backend string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, backend: backend, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.setDown(true)
		p.wg.Wait()
	})
	return p
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.pipe(c)
	}
}

func (p *proxy) pipe(c net.Conn) {
	defer p.wg.Done()
	defer c.Close()
	b, err := net.DialTimeout("tcp", p.backend, 5*time.Second)
	if err != nil {
		return
	}
	defer b.Close()
	if !p.track(c, b) {
		return
	}
	defer p.untrack(c, b)
	done := make(chan struct{}, 2)
	go func() { p.copy(b, c); done <- struct{}{} }()
	p.mu.Lock()
	lag := p.lag
	p.mu.Unlock()
	if lag > 0 {
		go func() { copyLate(c, b, lag); done <- struct{}{} }()
	} else {
		go func() { p.copy(c, b); done <- struct{}{} }()
	}
	<-done
}

// copy forwards like io.Copy, except that while the proxy is hung it holds
// what it read: the connection stays open and carries nothing.
func (p *proxy) copy(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			for p.isHung() {
				time.Sleep(10 * time.Millisecond)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// copyLate forwards like io.Copy, each chunk lag after it was read: the
// far side gets everything, in order, late.
func copyLate(dst io.Writer, src io.Reader, lag time.Duration) {
	type chunk struct {
		at time.Time
		b  []byte
	}
	chunks := make(chan chunk, 1024)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				chunks <- chunk{time.Now(), buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	failed := false
	for c := range chunks { // drained to the end, so the reader never blocks
		if failed {
			continue
		}
		time.Sleep(time.Until(c.at.Add(lag)))
		_, err := dst.Write(c.b)
		failed = err != nil
	}
}

// setLag delays what the API server sends by lag on connections made from
// now on: a client through the proxy sees the same events, late.
func (p *proxy) setLag(lag time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lag = lag
}

func (p *proxy) isHung() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hung && !p.down
}

// setHung makes the proxy a black hole that keeps connections open (hung),
// or lets data through again.
func (p *proxy) setHung(hung bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hung = hung
}

// track registers a connection pair, unless the proxy is down.
func (p *proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

// setDown cuts every connection and refuses new ones (down), or lets them
// through again.
func (p *proxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
	}
}

// kubeconfigVia writes a copy of kubeconfig whose clusters are reached
// through the proxy. The API server's certificate is for 127.0.0.1, which
// the proxy's address is too.
func (p *proxy) kubeconfigVia(t *testing.T, kubeconfig string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		if !strings.Contains(c.Server, p.backend) {
			t.Fatalf("kubeconfig %s: server %s is not %s", kubeconfig, c.Server, p.backend)
		}
		c.Server = strings.Replace(c.Server, p.backend, p.ln.Addr().String(), 1)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-via-proxy")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
