package bench

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The protobuf figure (proto): typed client-go pod informers syncing every
// seeded pod from kubeindex's /k8s, asking for protobuf against asking for
// JSON, side by side in each round. The client's CPU is that of the
// benchinformer process from its start to its informers synced; kubeindex's
// is the main kubeindex's over the same span.

// protoInformers is how many informers the server-side figure runs at once.
const protoInformers = 10

// informerSync is one benchinformer run's CPU to sync.
type informerSync struct {
	client, server time.Duration
}

// syncInformers runs n informers asking for content ("json" or
// "protobuf") against the main kubeindex's /k8s until they have synced,
// and checks that they hold every seeded pod.
func (r *runner) syncInformers(ctx context.Context, content string, n int) (informerSync, error) {
	var s informerSync
	k0, err := r.main.cpu()
	if err != nil {
		return s, err
	}
	p, err := startProc("informer-"+content, r.informer, []string{"--server", r.main.base + "/k8s", "--content", content,
		"--informers", fmt.Sprint(n), "--selector", podSelector}, nil)
	if err != nil {
		return s, err
	}
	defer p.stop()
	timeout := time.After(10 * time.Minute)
	for {
		select {
		case line := <-p.stdoutC:
			switch {
			case line == "SYNCED":
				if s.client, err = p.cpu(); err != nil {
					return s, err
				}
				k1, err := r.main.cpu()
				if err != nil {
					return s, err
				}
				s.server = k1 - k0
			case strings.HasPrefix(line, "COUNT "):
				var count int
				if _, err := fmt.Sscan(strings.TrimPrefix(line, "COUNT "), &count); err != nil {
					return s, err
				}
				if count != n*r.p.n {
					return s, fmt.Errorf("%d %s informers hold %d pods, want %d each", n, content, count, r.p.n)
				}
				return s, nil
			}
		case <-p.exited:
			return s, fmt.Errorf("informer exited: %v: %s", p.err, p.logTail())
		case <-timeout:
			return s, fmt.Errorf("%d %s informers not synced in 10m", n, content)
		case <-ctx.Done():
			return s, ctx.Err()
		}
	}
}

// protobufInformers measures the proto figures. The first protobuf
// informer is the first reader of each pod's protobuf: kubeindex encodes
// every pod for it (an information figure, beside a JSON informer's sync);
// the rounds after it share those encodings, as every later protobuf
// client does.
func (r *runner) protobufInformers(ctx context.Context) error {
	warmJSON, err := r.syncInformers(ctx, "json", 1)
	if err != nil {
		return err
	}
	first, err := r.syncInformers(ctx, "protobuf", 1)
	if err != nil {
		return err
	}
	r.logf("proto: first protobuf informer: kubeindex %v CPU (a JSON one just before: %v); client %v (JSON %v)",
		first.server, warmJSON.server, first.client, warmJSON.client)
	var client, server, one [][2]float64 // (protobuf, json) seconds per round
	for round := range r.o.slowRounds() {
		var got [2][2]informerSync // [protobuf, json][1 informer, protoInformers]
		order := []int{0, 1}
		if round%2 == 1 {
			order = []int{1, 0} // neither always follows the other
		}
		for _, i := range order {
			content := [2]string{"protobuf", "json"}[i]
			if got[i][0], err = r.syncInformers(ctx, content, 1); err != nil {
				return err
			}
			if got[i][1], err = r.syncInformers(ctx, content, protoInformers); err != nil {
				return err
			}
		}
		r.logf("proto round %d: 1 informer client CPU protobuf %v, JSON %v; kubeindex serving %d: protobuf %v, JSON %v", round,
			got[0][0].client, got[1][0].client, protoInformers, got[0][1].server, got[1][1].server)
		client = append(client, [2]float64{got[0][0].client.Seconds(), got[1][0].client.Seconds()})
		server = append(server, [2]float64{got[0][1].server.Seconds(), got[1][1].server.Seconds()})
		one = append(one, [2]float64{got[0][0].server.Seconds(), got[1][0].server.Seconds()})
	}
	f := pairFigure("typed informer sync client CPU, protobuf", "s", "the same informer over JSON", "ratio <= 0.5", client, kOverC, func(x float64) bool { return x <= 0.5 })
	f.Note = fmt.Sprintf("a typed client-go SharedIndexInformer syncing %d pods from /k8s (client-go's watch-list by default), in its own process", r.p.n)
	r.add(f)
	single := pairFigure("", "", "", "", one, kOverC, func(float64) bool { return true }) // kubeindex serving 1 informer
	f = pairFigure(fmt.Sprintf("kubeindex CPU serving %d protobuf informers", protoInformers), "s", "serving as many JSON informers", "ratio <= 1.2", server, kOverC, func(x float64) bool { return x <= 1.2 })
	f.Note = fmt.Sprintf("each a client-go Reflector over its own connection, decoding every pod, its store keeping keys; every pod's protobuf encoded before, by the first protobuf informer; serving 1 informer: ratio %s (%s s against %s s)",
		ratioText(single.Ratio), num(single.Kubeindex), num(single.Comparison))
	r.add(f)
	g := pairFigure("kubeindex CPU serving the first protobuf informer", "s", "serving a JSON informer", information,
		[][2]float64{{first.server.Seconds(), warmJSON.server.Seconds()}}, kOverC, func(float64) bool { return true })
	g.Note = fmt.Sprintf("it encodes every pod's protobuf, kept for later readers: %.0f µs of CPU per pod beyond a protobuf sync once encoded (%s s, the rounds' median)",
		(first.server.Seconds()-single.Kubeindex)*1e6/float64(r.p.n), num(single.Kubeindex))
	r.add(g)
	return nil
}
