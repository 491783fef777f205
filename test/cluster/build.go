package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
)

// modulePath is the module holding cmd/testcluster.
const modulePath = "github.com/kubeindex/kubeindex/test"

// toolBinary is one program of this module's build list, built at most once per
// test process.
type toolBinary struct {
	sync.Mutex
	name string // file name in the cache directory
	pkg  string // package to build, as `go build` takes it
	// dir is the directory, under this module's, of the module to build
	// in: "" for this one, or a tool's module of its own.
	dir     string
	ldflags string
	path    string // set once built
}

var (
	testcluster = &toolBinary{name: "testcluster", pkg: "./cmd/testcluster"}
	// kubectl comes from the k8s.io/kubernetes that test/go.mod requires (a
	// `tool` there), so it is the same release as the test API server.
	kubectl = &toolBinary{name: "kubectl", pkg: "k8s.io/kubernetes/cmd/kubectl"}
	// kubectl128 is kubectl 1.28, the oldest the tests point at kubeindex,
	// from a module of its own (tools/kubectl128), its version stamped as
	// the release's build stamps it.
	kubectl128 = &toolBinary{name: "kubectl-1.28", pkg: ".", dir: "tools/kubectl128",
		ldflags: "-X k8s.io/component-base/version.gitVersion=v1.28.15 -X k8s.io/component-base/version.gitMajor=1 " +
			"-X k8s.io/component-base/version.gitMinor=28 -X k8s.io/client-go/pkg/version.gitVersion=v1.28.15"}
	// k9s, from a module of its own (tools/k9s).
	k9s = &toolBinary{name: "k9s", pkg: ".", dir: "tools/k9s"}
	// ctrlrt, a controller-runtime manager's cache, from a module of its
	// own (tools/ctrlrt).
	ctrlrt = &toolBinary{name: "ctrlrt", pkg: ".", dir: "tools/ctrlrt"}
)

// Build compiles cmd/testcluster into a stable cache directory and returns
// the binary's path. It is safe to call concurrently, from any number of test
// processes: the first call in a process runs `go build`, which relies on
// Go's build cache and leaves an up-to-date binary untouched, so only the
// very first build on a machine compiles kube-apiserver (minutes); later ones
// take seconds. Later calls in the same process return the same path.
//
// The binary goes under $KUBEINDEX_TESTCLUSTER_CACHE if set, else
// os.UserCacheDir()/kubeindex-testcluster, in a directory named after the
// checkout.
func Build(ctx context.Context) (string, error) { return testcluster.build(ctx) }

// BuildKubectl is Build for kubectl (k8s.io/kubernetes/cmd/kubectl at the
// version test/go.mod pins), so that tests never depend on a kubectl
// installed on the machine, nor on its version. The first build on a machine
// compiles kubectl's own packages (minutes on a small machine).
func BuildKubectl(ctx context.Context) (string, error) { return kubectl.build(ctx) }

// BuildKubectl128 is BuildKubectl for kubectl 1.28 (its first build
// downloads and compiles its own dependencies: minutes).
func BuildKubectl128(ctx context.Context) (string, error) { return kubectl128.build(ctx) }

// BuildK9s is BuildKubectl for k9s. Its first build downloads and
// compiles a large dependency graph (see TestK9s for what it costs).
func BuildK9s(ctx context.Context) (string, error) { return k9s.build(ctx) }

// BuildCtrlrt is BuildKubectl for tools/ctrlrt, controller-runtime's cache
// as an operator runs it (its first build downloads and compiles
// controller-runtime).
func BuildCtrlrt(ctx context.Context) (string, error) { return ctrlrt.build(ctx) }

func (b *toolBinary) build(ctx context.Context) (string, error) {
	b.Lock()
	defer b.Unlock()
	if b.path != "" {
		return b.path, nil
	}
	modDir, err := moduleDir()
	if err != nil {
		return "", err
	}
	binDir, err := cacheDir(modDir)
	if err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(binDir, "."+b.name+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()

	bin := filepath.Join(binDir, b.name)
	args := []string{"build", "-o", bin}
	if b.ldflags != "" {
		args = append(args, "-ldflags", b.ldflags)
	}
	cmd := exec.CommandContext(ctx, goTool(), append(args, b.pkg)...)
	cmd.Dir = filepath.Join(modDir, b.dir)
	if flags, ok := os.LookupEnv("GOFLAGS"); ok {
		cmd.Env = append(os.Environ(), "GOFLAGS="+withoutRace(flags))
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s in %s: %w\n%s", b.pkg, modDir, err, out.Bytes())
	}
	b.path = bin
	return bin, nil
}

// withoutRace drops -race from GOFLAGS: cmd/testcluster is not built with
// the race detector (see its package documentation), nor is kubectl, which
// is a tool the tests run, not code under test.
func withoutRace(goflags string) string {
	var keep []string
	for _, f := range strings.Fields(goflags) {
		if f != "-race" && f != "--race" && f != "-race=true" {
			keep = append(keep, f)
		}
	}
	return strings.Join(keep, " ")
}

// cacheDir is where the binary of the module in modDir goes: one directory
// per checkout, so two checkouts never run each other's binary.
func cacheDir(modDir string) (string, error) {
	base := os.Getenv("KUBEINDEX_TESTCLUSTER_CACHE")
	if base == "" {
		if d, err := os.UserCacheDir(); err == nil {
			base = filepath.Join(d, "kubeindex-testcluster")
		} else {
			base = filepath.Join(os.TempDir(), "kubeindex-testcluster")
		}
	}
	sum := sha256.Sum256([]byte(modDir))
	dir := filepath.Join(base, hex.EncodeToString(sum[:6]))
	return dir, os.MkdirAll(dir, 0o755)
}

// moduleDir finds the test module's directory: from this source file's path
// when it is known (no -trimpath), else by walking up from the working
// directory, which `go test` sets to the package's directory.
func moduleDir() (string, error) {
	var starts []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, dir := range starts {
		for d := dir; ; d = filepath.Dir(d) {
			if isTestModule(filepath.Join(d, "go.mod")) {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", fmt.Errorf("module %s not found above %v", modulePath, starts)
}

func isTestModule(gomod string) bool {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(first) == "module "+modulePath
}

// goTool is the go command on PATH. `go test` puts its own GOROOT/bin first
// on the test's PATH, so the binary is built by the toolchain running the
// tests.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

// lockFile takes an exclusive flock on path; two test binaries building at
// once would otherwise race to write the same output file.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
