package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// build compiles pkg of the module in dir into out.
func build(ctx context.Context, dir, pkg, out string) error {
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", out, pkg)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build %s in %s: %w\n%s", pkg, dir, err, b)
	}
	return nil
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

// moduleDirs finds the test module (holding this package) and the root
// module above it.
func moduleDirs() (test, root string, err error) {
	_, file, _, ok := runtime.Caller(0)
	var starts []string
	if ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, s := range starts {
		for d := s; filepath.Dir(d) != d; d = filepath.Dir(d) {
			if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil &&
				strings.HasPrefix(string(b), "module github.com/kubeindex/kubeindex/test\n") {
				return d, filepath.Dir(d), nil
			}
		}
	}
	return "", "", fmt.Errorf("module github.com/kubeindex/kubeindex/test not found above %v", starts)
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// proc is a child process whose CPU and memory the harness reads from
// /proc, and whose stderr it scans for the Go runtime's GC trace.
type proc struct {
	name    string
	cmd     *exec.Cmd
	started time.Time
	exited  chan struct{}
	err     error

	mu       sync.Mutex
	liveMB   []int // live heap after each GC (GODEBUG=gctrace=1), MB
	stacksMB []int // goroutine stacks at each GC, MB
	tail     []string
	stdoutC  chan string
	// stdin is the process's standard input (benchinformer -hold waits
	// on it).
	stdin io.WriteCloser
}

// startProc runs bin with args and env added to the harness's own. Lines on
// stdout are delivered on stdoutC (dropped when nobody reads). The process
// runs without a Go memory limit whatever the harness's environment says:
// a GOMEMLIMIT there is for the test cluster, which inherits it (at
// 150,000 pods its API server would otherwise not leave room for the
// processes measured), not for them.
func startProc(name, bin string, args, env []string) (*proc, error) {
	p := &proc{name: name, exited: make(chan struct{}), stdoutC: make(chan string, 64)}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(append(os.Environ(), "GOMEMLIMIT=off"), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.scanStderr(stderr) })
	wg.Go(func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case p.stdoutC <- sc.Text():
			default:
			}
		}
	})
	go func() {
		wg.Wait()
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// gcLine matches gctrace's "A->B->C MB": C is the heap marked live.
// The stacks figure follows the goal: "N MB goal, S MB stacks".
var (
	gcLine   = regexp.MustCompile(`^gc \d+ @.* (\d+)->(\d+)->(\d+) MB`)
	gcStacks = regexp.MustCompile(` (\d+) MB stacks`)
)

func (p *proc) scanStderr(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		if m := gcLine.FindStringSubmatch(line); m != nil {
			live, _ := strconv.Atoi(m[3])
			p.liveMB = append(p.liveMB, live)
			stacks := 0
			if m := gcStacks.FindStringSubmatch(line); m != nil {
				stacks, _ = strconv.Atoi(m[1])
			}
			p.stacksMB = append(p.stacksMB, stacks)
		} else {
			p.tail = append(p.tail, line)
			if len(p.tail) > 20 {
				p.tail = p.tail[1:]
			}
		}
		p.mu.Unlock()
	}
}

// stacks returns the goroutine stacks (MB) at the last GC.
func (p *proc) stacks() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.stacksMB) == 0 {
		return 0
	}
	return p.stacksMB[len(p.stacksMB)-1]
}

// gcs returns how many GCs have run and their live heaps.
func (p *proc) gcs() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.liveMB...)
}

func (p *proc) logTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// stop kills the process and waits for it.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// clockTicks is USER_HZ, which is 100 on every Linux this runs on.
const clockTicks = 100

// cpu returns the process's CPU time so far.
func (p *proc) cpu() (time.Duration, error) { return cpuOf(p.cmd.Process.Pid) }

// cpuOf returns a process's CPU time so far (os.Getpid() for the harness
// itself), all its threads, those that ended included. It reads the
// kernel's CPU clock of the process, which counts in nanoseconds: /proc's
// user and system times count 10 ms ticks, so a round that costs a process
// less than a tick read as no CPU at all, and a ratio against it as not
// computable. /proc stays as the fallback of a kernel that refuses the
// clock.
func cpuOf(pid int) (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(processCPUClock(pid), &ts); err == nil {
		return time.Duration(ts.Nano()), nil
	}
	return ticksOf(pid)
}

// processCPUClock is the clock id clock_getcpuclockid(3) gives for pid: the
// process-wide clock that sums its threads' scheduled run time
// (MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) in the kernel's
// posix-timers.h).
func processCPUClock(pid int) int32 {
	const cpuClockSched = 2
	return int32(^pid)<<3 | cpuClockSched
}

// ticksOf returns a process's user+system CPU time from /proc/<pid>/stat,
// in 10 ms ticks.
func ticksOf(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// rss returns the process's resident set size.
func (p *proc) rss() (int64, error) { return rssOf(p.cmd.Process.Pid) }

// rssOf returns a process's resident set size.
func rssOf(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, errors.New("short /proc statm")
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize()), nil
}

// raiseFileLimit lifts the soft limit on open files to the hard one: a
// thousand WebSocket clients and their server ends need more than the
// usual 1024. Children inherit it.
func raiseFileLimit() error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Cur >= l.Max {
		return nil
	}
	l.Cur = l.Max
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}
