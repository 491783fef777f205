package bench

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
)

// latencyTargets are the lookup latency targets against the bare handler:
// kubeindex's percentile over the echo server's, same body, same rounds.
var latencyTargets = []struct {
	q      float64
	label  string
	target string
	met    func(float64) bool
}{
	{.50, "p50", "ratio <= 1.15", func(x float64) bool { return x <= 1.15 }},
	{.99, "p99", "ratio <= 1.5", func(x float64) bool { return x <= 1.5 }},
}

// lookupLatency times by-IP lookups and GETs by key against the echo
// server answering a body of the same size: one client, one request to
// each in turn (which goes first alternating), so that both see the same
// machine at the same moment. The API server's field-selector list, the
// lookup kubeindex replaces, is timed in the same rounds, as information.
func (r *runner) lookupLatency(ctx context.Context) error {
	// The API server answers JSON here, as kubeindex does.
	jsonClient, err := kubernetes.NewForConfig(r.c.RESTConfig())
	if err != nil {
		return err
	}
	rest := jsonClient.CoreV1().RESTClient()
	if b, err := rest.Get().Namespace(r.sampleRefs[0].Namespace).Resource("pods").Name(r.sampleRefs[0].Name).DoRaw(ctx); err == nil {
		r.report.Context = append(r.report.Context, fmt.Sprintf("pod JSON from the API server, with managedFields: %d bytes", len(b)))
	}
	refs := r.sampleRefs
	servers := r.servers()
	client := loopbackClient(len(servers) + 1) // one keep-alive connection to each server
	defer client.CloseIdleConnections()
	kinds := []struct {
		name string
		url  func(base string, i int) string
	}{
		{"by-IP", func(base string, i int) string { return base + "/api/v1/ip/" + refs[i%len(refs)].IP }},
		{"GET by key", func(base string, i int) string {
			ref := refs[i%len(refs)]
			return base + "/api/v1/pods/" + ref.Namespace + "/" + ref.Name
		}},
	}
	buf := make([]byte, 64<<10)
	var vsAPI [2][][2]float64 // by-IP p50, p99 against the API server
	for _, kind := range kinds {
		var urls []string
		for i := range min(50, len(refs)) {
			urls = append(urls, kind.url(r.main.base, i))
		}
		size, err := bodySize(ctx, client, urls)
		if err != nil {
			return err
		}
		echoURL := fmt.Sprintf("%s/bytes/%d", r.echoBase, size)
		// asked are the servers' URLs for round's i-th request, then
		// echo's: a body of its set in the servers' turn (requestRate).
		asked := func(round int) []func(i int) string {
			var out []func(i int) string
			for _, s := range servers {
				out = append(out, func(i int) string { return kind.url(s.k.base, i*7+round) })
			}
			return append(out, func(i int) string { return r.echoSetURL(size, (i*7+round)%len(refs)) })
		}
		// askedOne are the main kubeindex's and echo's one body, asked in
		// rounds of their own: a third server between two of a target
		// round's requests raised both sides' p50 and kubeindex's more.
		askedOne := func(round int) []func(i int) string {
			return []func(i int) string{func(i int) string { return kind.url(r.main.base, i*7+round) }, func(int) string { return echoURL }}
		}
		// Warm them up: the connections, first-use allocations.
		if _, err := interleavedLatencies(ctx, client, 200, asked(0), buf); err != nil {
			return err
		}
		if _, err := interleavedLatencies(ctx, client, 200, askedOne(0), buf); err != nil {
			return err
		}
		pairs := make([][][][2]float64, len(servers)) // by server, by target
		for s := range pairs {
			pairs[s] = make([][][2]float64, len(latencyTargets))
		}
		var onePairs [][2]float64 // the main kubeindex's p50 against echo's one body
		for round := range r.o.Rounds {
			all, err := interleavedLatencies(ctx, client, r.o.LatencyRequests, asked(round), buf)
			if err != nil {
				return err
			}
			byOne, err := interleavedLatencies(ctx, client, r.o.LatencyRequests, askedOne(round), buf)
			if err != nil {
				return err
			}
			e, mainByOne, one := all[len(servers)], byOne[0], byOne[1]
			onePairs = append(onePairs, [2]float64{ms(percentile(mainByOne, .5)), ms(percentile(one, .5))})
			r.logf("%s latency round %d, beside echo of one body: kubeindex p50 %v, echo of one body p50 %v p99 %v", kind.name, round,
				percentile(mainByOne, .5), percentile(one, .5), percentile(one, .99))
			for s, srv := range servers {
				k := all[s]
				for t, lt := range latencyTargets {
					pairs[s][t] = append(pairs[s][t], [2]float64{ms(percentile(k, lt.q)), ms(percentile(e, lt.q))})
				}
				r.logf("%s latency round %d: kubeindex p50 %v p99 %v, echo p50 %v p99 %v (%d each, %d-byte bodies)", srv.figureName(kind.name), round,
					percentile(k, .5), percentile(k, .99), percentile(e, .5), percentile(e, .99), len(k), size)
			}
			if kind.name != "by-IP" {
				continue
			}
			k := all[0]
			a, err := latencies(r.o.APIServerRequests, 30*time.Second, func(i int) error {
				ref := refs[(i*11+round)%len(refs)]
				b, err := rest.Get().Resource("pods").Param("fieldSelector", "status.podIP="+ref.IP).
					Param("resourceVersion", "0").DoRaw(ctx)
				if err == nil && !strings.Contains(string(b), `"name":"`+ref.Name+`"`) {
					err = fmt.Errorf("API server list for %s lacks %s", ref.IP, ref.Name)
				}
				return err
			})
			if err != nil {
				return err
			}
			r.logf("by-IP latency round %d: API server p50 %v p99 %v (%d)", round, percentile(a, .5), percentile(a, .99), len(a))
			for t, lt := range latencyTargets {
				vsAPI[t] = append(vsAPI[t], [2]float64{ms(percentile(k, lt.q)), ms(percentile(a, lt.q))})
			}
		}
		for s, srv := range servers {
			for t, lt := range latencyTargets {
				f := pairFigure(srv.figureName(kind.name+" latency "+lt.label), "ms", echoSame, lt.target, pairs[s][t], kOverC, lt.met)
				f.Note = fmt.Sprintf("sequential over keep-alive loopback HTTP, one client, kubeindex and echo in turn (the order permuted request by request), %d requests each per round, %d-byte bodies, echo's as many distinct as kubeindex's objects",
					r.o.LatencyRequests, size)
				r.add(f)
			}
		}
		g := pairFigure(kind.name+" latency p50 vs echo of one body", "ms", echoOne, information, onePairs, kOverC, func(float64) bool { return true })
		g.Note = "rounds of their own, the main kubeindex and echo answering one body, which stays in the CPU's caches (the comparison before echo answered a set)"
		r.add(g)
	}
	for t, lt := range latencyTargets {
		f := pairFigure("by-IP latency "+lt.label+" vs API server", "ms", "API server fieldSelector list, rv=0", information, vsAPI[t], cOverK, func(float64) bool { return true })
		f.Note = fmt.Sprintf("speed-up (API server / kubeindex), the by-IP rounds above; the API server up to %d requests/round (HTTPS, JSON)", r.o.APIServerRequests)
		r.add(f)
	}
	return nil
}

// information is the target of a figure that only informs.
const information = "(information)"

// pairedLatencies times count GETs of a(i) and as many of b(i), one of
// each in turn (which goes first alternating), and returns both sets of
// durations, sorted. Any answer but 200 is an error.
func pairedLatencies(ctx context.Context, client *http.Client, count int, a, b func(i int) string, buf []byte) (as, bs []time.Duration, err error) {
	both, err := interleavedLatencies(ctx, client, count, []func(int) string{a, b}, buf)
	if err != nil {
		return nil, nil, err
	}
	return both[0], both[1], nil
}
