package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/server"
)

// docs/configuration.md's tables are generated from the flag set and the
// constants the code applies: `make docs` runs this test with -update to
// rewrite them, and `make lint` (and every go test) runs it to check
// them. The prose around the tables is written by hand.

var updateDocs = flag.Bool("update", false, "rewrite the generated tables of docs/configuration.md")

const configurationDoc = "../../docs/configuration.md"

func TestConfigurationDocIsCurrent(t *testing.T) {
	old, err := os.ReadFile(configurationDoc)
	if err != nil {
		t.Fatal(err)
	}
	fs := (&Config{}).flagSet(new(string), new(multiFlag))
	doc := old
	for _, sec := range []struct{ name, body string }{
		{"flags", flagsTable(fs)},
		{"limits", limitsTable(fs)},
	} {
		if doc, err = replaceSection(doc, sec.name, sec.body); err != nil {
			t.Fatal(err)
		}
	}
	if *updateDocs {
		if err := os.WriteFile(configurationDoc, doc, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(doc, old) {
		t.Fatalf("docs/configuration.md is not what the flags and limits say (run make docs): %s", firstDifference(old, doc))
	}
}

// firstDifference names the first line where have and want differ.
func firstDifference(have, want []byte) string {
	h, w := strings.Split(string(have), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(h), len(w)) {
		line := func(l []string) string {
			if i < len(l) {
				return l[i]
			}
			return "(end of file)"
		}
		if line(h) != line(w) {
			return fmt.Sprintf("line %d reads\n\t%s\nand should read\n\t%s", i+1, line(h), line(w))
		}
	}
	return "no line differs"
}

// replaceSection puts body between the markers of the section named name.
func replaceSection(doc []byte, name, body string) ([]byte, error) {
	begin := fmt.Sprintf("<!-- BEGIN GENERATED %s: make docs writes this table from the code; do not edit it -->\n", name)
	end := fmt.Sprintf("<!-- END GENERATED %s -->\n", name)
	before, rest, ok := bytes.Cut(doc, []byte(begin))
	if !ok {
		return nil, fmt.Errorf("docs/configuration.md lacks the line %q", begin)
	}
	_, after, ok := bytes.Cut(rest, []byte(end))
	if !ok {
		return nil, fmt.Errorf("docs/configuration.md lacks the line %q", end)
	}
	return bytes.Join([][]byte{before, []byte(begin), []byte(body), []byte(end), after}, nil), nil
}

// flagsTable lists every flag: its environment variable, its default and
// its help text, as the binary's --help gives them.
func flagsTable(fs *flag.FlagSet) string {
	var b strings.Builder
	b.WriteString("| flag | environment | default | |\n|---|---|---|---|\n")
	fs.VisitAll(func(f *flag.Flag) {
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.Name, code(envName(f.Name)), code(flagDefault(f)), cell(f.Usage))
	})
	return b.String()
}

// flagDefault is a flag's default as a person writes it: 2m, not 2m0s.
func flagDefault(f *flag.Flag) string {
	if g, ok := f.Value.(flag.Getter); ok {
		if d, ok := g.Get().(time.Duration); ok {
			return shortDuration(d)
		}
	}
	return f.DefValue
}

// limitRow is one bound of the limits table. A row set by a flag names
// it; its value is then the flag's default unless value says more.
type limitRow struct {
	bound, flag, value, beyond string
}

func limitsTable(fs *flag.FlagSet) string {
	var b strings.Builder
	b.WriteString("| bound | default | beyond it |\n|---|---|---|\n")
	for _, r := range limitRows() {
		bound, value := r.bound, r.value
		if r.flag != "" {
			f := fs.Lookup(r.flag)
			if f == nil {
				panic("the limits table names a flag that does not exist: --" + r.flag)
			}
			bound += fmt.Sprintf(" (`--%s`, `%s`)", f.Name, envName(f.Name))
			if value == "" {
				value = flagDefault(f)
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", cell(bound), cell(value), cell(r.beyond))
	}
	return b.String()
}

func limitRows() []limitRow {
	perAddress := server.DefaultMaxConnectionsPerAddress(server.DefaultMaxConnections)
	return []limitRow{
		{bound: "request headers (request line included)", value: size(server.DefaultMaxHeaderBytes), beyond: "431"},
		{bound: "request body", value: fmt.Sprintf("none accepted (the API only reads), but a batch IP lookup's: %s, %d addresses",
			size(server.MaxBatchBody), server.MaxBatchQueries), beyond: "413; 400 for more addresses"},
		{bound: "one query parameter", value: size(server.MaxQueryParamBytes) + " of UTF-8 text, no control characters", beyond: "400"},
		{bound: "one page of a list (`limit`)", value: fmt.Sprint(server.MaxPageSize), beyond: "400; on `/k8s`, pages of at most that"},
		{bound: "what an error message echoes of the request (names, selectors, `Last-Event-ID`, query parameters, `Origin`, a batch's addresses)",
			value: fmt.Sprintf("cut short (`…` marks the cut); %s per message in all", size(server.MaxErrorMessageBytes)), beyond: "—"},
		{bound: "open connections", flag: "max-connections", beyond: "the idle connection of whoever holds the most is closed to make room; with none idle, 503 and closed at once"},
		{bound: "open connections from one client IP address", flag: "max-connections-per-address",
			value: fmt.Sprintf("a quarter of `--max-connections` (%d)", perAddress), beyond: "429 and closed at once"},
		{bound: "a connection on which no request has passed authentication yet: time to send a request's headers, and to stay idle between requests",
			flag: "unauthenticated-timeout", beyond: fmt.Sprintf("closed; once authenticated: %s for headers, %s idle",
				shortDuration(server.ReadHeaderTimeout), shortDuration(server.DefaultIdleTimeout))},
		{bound: "SubjectAccessReviews of one user (`--authz=rbac`)", value: fmt.Sprintf("%d at once, %d more waiting, each for at most %s",
			auth.DefaultInFlightPerUser, auth.DefaultWaitingPerUser, shortDuration(server.DefaultAuthTimeout)), beyond: "429, for that user only"},
		{bound: "REST request, writing the response included", flag: "request-timeout", beyond: "the connection is cut; streams are exempt"},
		{bound: "open streams per client: its user when authenticated, else its IP address", flag: "max-streams-per-client", beyond: "429"},
		{bound: "subscriptions per socket, and in total", value: fmt.Sprintf("%d, %d", server.DefaultMaxSubscriptionsPerSocket, server.DefaultMaxSubscribers),
			beyond: "`ERROR` 429 or HTTP 429"},
		{bound: "terms of a query's label and field selectors together (REST lists, streams, `/k8s`): each requirement one, each value of an `in`/`notin` set one",
			value: fmt.Sprint(cache.MaxSelectorTerms), beyond: "400 naming the bound"},
		{bound: "a stream's life", flag: "stream-max-lifetime",
			value: fmt.Sprintf("%s to %s", shortDuration(server.DefaultMaxLifetime/2), shortDuration(server.DefaultMaxLifetime)), beyond: "ends resumably"},
		{bound: "a revoked token's streams", value: fmt.Sprintf("%s (the TokenReview cache's %s, then a review every %s)",
			shortDuration(auth.DefaultTokenAllowTTL+server.DefaultRecheck), shortDuration(auth.DefaultTokenAllowTTL), shortDuration(server.DefaultRecheck)),
			beyond: "close 1008, `ERROR` 401"},
		{bound: "WebSocket message", value: fmt.Sprintf("%s (`ERROR`); %s", size(server.DefaultMaxMessageBytes), size(server.CloseMessageBytes)), beyond: "close 1009"},
		{bound: "TokenReviews caused by one client address, with `--auth=tokenreview`: tokens not in the cache", flag: "token-reviews-per-client",
			value:  fmt.Sprintf("%v/s, bursts of %d× that (%d)", auth.DefaultReviewsPerSecond, auth.ReviewBurstSeconds, auth.DefaultReviewBurst(auth.DefaultReviewsPerSecond)),
			beyond: "429, no review; known tokens still answered"},
		{bound: "reconnection attempts to an unreachable API server, per informer", value: fmt.Sprintf("about 1/s (%s, doubling to %s, each stretched by up to %d%%)",
			shortDuration(cache.RetryFirst), shortDuration(cache.RetryCap), int(cache.RetryJitter*100)), beyond: "—"},
	}
}

// size writes a byte count in KiB or MiB when it is a whole number of them.
func size(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + s + "`"
}

// cell escapes what would end a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func TestSize(t *testing.T) {
	for n, want := range map[int]string{64 << 10: "64 KiB", 1 << 20: "1 MiB", 1024: "1 KiB", 1000: "1000 bytes", 1536: "1536 bytes"} {
		if got := size(n); got != want {
			t.Errorf("size(%d) = %q; expect %q", n, got, want)
		}
	}
}
