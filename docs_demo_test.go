package kubeindex_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// demoMarker marks the fenced block after it as commands that run as
// written against `go run ./cmd/kubeindex --demo`.
const demoMarker = "<!-- demo -->"

// demoCommand is one curl command of a marked block.
type demoCommand struct {
	where  string // file:line
	text   string // the line as written
	method string
	url    string
	header http.Header
	body   string
	stream bool // curl -N: read the first line, then stop
	want   int  // the status the trailing comment names; 0: any 2xx
}

// TestDemoCommandsRun builds kubeindex, starts it with --demo on a free
// loopback port, and runs every curl command of the blocks marked
// runnable in README.md and docs/*.md against it, as written but for the
// port. A command fails when kubeindex answers other than 2xx (or than the
// status its trailing comment names: `# 404`), or when it cannot be run.
// The requests are made in Go: a fresh machine need not have curl.
func TestDemoCommandsRun(t *testing.T) {
	var cmds []demoCommand
	for _, doc := range append([]string{"README.md"}, must(filepath.Glob("docs/*.md"))...) {
		cmds = append(cmds, demoCommands(t, doc)...)
	}
	var tour int
	for _, c := range cmds {
		if strings.HasPrefix(c.where, "README.md:") {
			tour++
		}
	}
	if tour == 0 {
		t.Fatalf("README.md has no block marked %s: its tour is not tested", demoMarker)
	}
	t.Logf("%d commands from the documents' marked blocks, %d of them README.md's tour", len(cmds), tour)
	base := startDemo(t)
	client := &http.Client{Timeout: 30 * time.Second}
	for _, c := range cmds {
		if err := c.run(client, base); err != nil {
			t.Errorf("%s: %s\n\t%v", c.where, c.text, err)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// demoCommands returns the commands of doc's marked blocks. Every line of
// a marked block is a comment, blank, or a curl command this test can run;
// anything else fails the test, so a block cannot silently go untested. In
// a ```console block (a transcript) the commands are the lines after "$ "
// (continued by a trailing backslash) and the other lines are output.
func demoCommands(t *testing.T, doc string) []demoCommand {
	t.Helper()
	lines := strings.Split(readFile(t, doc), "\n")
	var out []demoCommand
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != demoMarker {
			continue
		}
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j == len(lines) || !strings.HasPrefix(lines[j], "```") {
			t.Errorf("%s:%d: %s is not followed by a fenced block", doc, i+1, demoMarker)
			continue
		}
		console := strings.TrimSpace(strings.TrimPrefix(lines[j], "```")) == "console"
		for j++; j < len(lines) && !strings.HasPrefix(lines[j], "```"); j++ {
			line := strings.TrimSpace(lines[j])
			where := fmt.Sprintf("%s:%d", doc, j+1)
			if console {
				// A transcript: commands follow "$ ", the rest is output.
				if !strings.HasPrefix(line, "$ ") {
					continue
				}
				line = strings.TrimPrefix(line, "$ ")
				for strings.HasSuffix(line, "\\") && j+1 < len(lines) {
					j++
					line = strings.TrimSuffix(line, "\\") + " " + strings.TrimSpace(lines[j])
				}
			}
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			c, err := parseCurl(line)
			if err != nil {
				t.Errorf("%s: %s\n\tcannot be run by this test: %v", where, line, err)
				continue
			}
			c.where = where
			out = append(out, c)
		}
		i = j
	}
	return out
}

// parseCurl reads one curl command line: the options -s, -S, -i, -N (and
// their combinations), -H, -d, -X, and a URL, in shell quoting; a trailing
// `# NNN …` comment names the status expected. Shell variables, command
// substitution and pipes are refused: the command must run as written.
func parseCurl(line string) (demoCommand, error) {
	words, comment, err := shellWords(line)
	if err != nil {
		return demoCommand{}, err
	}
	c := demoCommand{text: line, header: http.Header{}}
	if len(words) == 0 || words[0] != "curl" {
		return c, errors.New("not a curl command")
	}
	if m := regexp.MustCompile(`^(\d{3})\b`).FindStringSubmatch(comment); m != nil {
		c.want, _ = strconv.Atoi(m[1])
	}
	for i := 1; i < len(words); i++ {
		w := words[i]
		arg := func() (string, error) {
			if i+1 == len(words) {
				return "", fmt.Errorf("%s needs a value", w)
			}
			i++
			return words[i], nil
		}
		switch {
		case w == "-H" || w == "-d" || w == "-X":
			v, err := arg()
			if err != nil {
				return c, err
			}
			switch w {
			case "-H":
				name, value, ok := strings.Cut(v, ":")
				if !ok {
					return c, fmt.Errorf("header %q has no colon", v)
				}
				c.header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
			case "-d":
				c.body = v
			case "-X":
				c.method = v
			}
		case regexp.MustCompile(`^-[sSiN]+$`).MatchString(w):
			c.stream = c.stream || strings.Contains(w, "N")
		case strings.HasPrefix(w, "-"):
			return c, fmt.Errorf("option %s is not one this test runs", w)
		case c.url != "":
			return c, fmt.Errorf("a second URL %q", w)
		default:
			c.url = w
		}
	}
	if c.url == "" {
		return c, errors.New("no URL")
	}
	if c.method == "" {
		c.method = http.MethodGet
		if c.body != "" {
			c.method = http.MethodPost
		}
	}
	return c, nil
}

// shellWords splits a line as sh would for the quoting these commands
// use (single and double quotes, no escapes beyond \" in double quotes),
// and returns the comment after an unquoted #.
func shellWords(line string) (words []string, comment string, err error) {
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == ' ' || ch == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case ch == '#' && !inWord:
			return words, strings.TrimSpace(line[i+1:]), nil
		case ch == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, "", errors.New("unterminated single quote")
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case ch == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '$' || line[i] == '`' {
					return nil, "", errors.New("shell expansion inside double quotes")
				}
				if line[i] == '\\' && i+1 < len(line) && line[i+1] == '"' {
					i++
				}
				cur.WriteByte(line[i])
			}
			if i == len(line) {
				return nil, "", errors.New("unterminated double quote")
			}
			inWord = true
		case strings.IndexByte("$`|;&<>()\\", ch) >= 0:
			return nil, "", fmt.Errorf("%q outside quotes: the command must run without a shell's help", ch)
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, "", nil
}

// run sends the command to the demo at base (host:port), in place of the
// localhost:8080 the documents address.
func (c demoCommand) run(client *http.Client, base string) error {
	raw := c.url
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Host != "localhost:8080" && u.Host != "127.0.0.1:8080" {
		return fmt.Errorf("addresses %s, not the demo's localhost:8080", u.Host)
	}
	u.Host = base
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(ctx, c.method, u.String(), body)
	if err != nil {
		return err
	}
	req.Header = c.header.Clone()
	if c.body != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded") // what curl -d sends
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	var got []byte
	if c.stream {
		// A stream never ends by itself: its first line is proof enough.
		got, err = bufio.NewReader(res.Body).ReadBytes('\n')
	} else {
		got, err = io.ReadAll(res.Body)
	}
	if err != nil {
		return fmt.Errorf("reading the answer (status %d): %v", res.StatusCode, err)
	}
	ok := res.StatusCode/100 == 2
	if c.want != 0 {
		ok = res.StatusCode == c.want
	}
	if !ok {
		want := "2xx"
		if c.want != 0 {
			want = strconv.Itoa(c.want)
		}
		return fmt.Errorf("status %d, want %s: %.300s", res.StatusCode, want, got)
	}
	return nil
}

// startDemo builds cmd/kubeindex, runs it with --demo on a free loopback
// port (read from its "serving" log line), waits until it is ready, and
// returns its host:port. The process is stopped when the test ends.
func startDemo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "kubeindex")
	build := exec.Command("go", "build", "-o", bin, "./cmd/kubeindex")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kubeindex: %v\n%s", err, out)
	}
	logPath := filepath.Join(dir, "kubeindex.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--demo", "--listen", "127.0.0.1:0", "--log-format", "json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(io.TeeReader(stderr, logf))
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
		close(done)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("kubeindex log:\n%s", b)
		}
	})
	var addr string
	select {
	case addr = <-addrc:
	case <-done:
		b, _ := os.ReadFile(logPath)
		t.Fatalf("kubeindex --demo exited before serving:\n%s", b)
	case <-time.After(60 * time.Second):
		t.Fatal("kubeindex --demo did not start serving within 60s")
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubeindex --demo at %s not ready within 60s (%v)", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
