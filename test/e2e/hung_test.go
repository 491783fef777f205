package e2e

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// TestHungConnectionIsReplaced: the connection to the API server stays open
// but carries nothing (a stuck proxy or load balancer), so no error ever
// comes. kubeindex must notice within --watch-idle-timeout, say it is stale,
// and once traffic flows again converge on what changed meanwhile.
func TestHungConnectionIsReplaced(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{Namespaces: 1, Nodes: 1, Replicas: 1, Widgets: 1})
	api := newAPIServer(t, c)
	px := startProxy(t, strings.TrimPrefix(c.Host, "https://"))
	const idle = 3 * time.Second
	k := startKubeindex(t, "--kubeconfig", px.kubeconfigVia(t, c.Kubeconfig),
		"--stale-after", "1s", "--watch-idle-timeout", idle.String())
	ctx := t.Context()
	ns := seeded.Pods[0].Namespace
	eventually(t, converge, "kubeindex to match the API server first", func() error {
		return sameList(ctx, k, api, podsR, ns, url.Values{"namespace": {ns}}, nil)
	})

	px.setHung(true)
	hung := time.Now()
	eventually(t, idle+converge, "a hung watch to be noticed and answers marked stale", func() error {
		if f := freshnessOf(k.get(t, podsR.kiPath(ns, seeded.Pods[0].Name))); f != stale {
			return fmt.Errorf("headers %+v, want %+v", f, stale)
		}
		if m := string(k.get(t, "/metrics").body); !strings.Contains(m, `kubeindex_stale{resource="pods"} 1`) ||
			!strings.Contains(m, `kubeindex_watch_connected{resource="pods"} 0`) {
			return fmt.Errorf("/metrics does not say pods are stale and disconnected")
		}
		return readyzSays(k, true)
	})
	t.Logf("stale %v after the connection hung (idle timeout %v)", time.Since(hung).Round(time.Millisecond), idle)

	// Changed behind kubeindex's back while nothing gets through.
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, probePod(ns, "while-hung", map[string]string{"app": "probe"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	victim := seeded.Pods[0]
	if err := cs.CoreV1().Pods(ns).Delete(ctx, victim.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}

	px.setHung(false)
	eventually(t, 2*converge, "kubeindex to converge once traffic flows", func() error {
		if err := sameList(ctx, k, api, podsR, ns, url.Values{"namespace": {ns}}, nil); err != nil {
			return err
		}
		if err := absent(k, podsR, ns, victim.Name); err != nil {
			return err
		}
		if f := freshnessOf(k.get(t, podsR.kiPath(ns, "while-hung"))); f != fresh {
			return fmt.Errorf("headers %+v, want %+v", f, fresh)
		}
		return nil
	})
}

// TestHungConnectionStaleWithDefaultFlags: with kubeindex's default flags,
// a quiet cluster stays fresh past --watch-idle-timeout (the API server's
// bookmarks, about one a minute, keep the watches alive), and a connection
// whose bytes stop is reported stale within 90s. It takes about three
// minutes: the bookmark interval is the API server's.
func TestHungConnectionStaleWithDefaultFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the API server's bookmark interval")
	}
	c := cluster.StartForTest(t)
	cs, dyn := c.Clients(t)
	seeded := cluster.SeedForTest(t, cs, dyn, cluster.SeedOptions{Namespaces: 1, Nodes: 1, Replicas: 1, Widgets: 1})
	api := newAPIServer(t, c)
	px := startProxy(t, strings.TrimPrefix(c.Host, "https://"))
	k := startKubeindex(t, "--kubeconfig", px.kubeconfigVia(t, c.Kubeconfig))
	ctx := t.Context()
	ns := seeded.Pods[0].Namespace
	path := podsR.kiPath(ns, seeded.Pods[0].Name)
	eventually(t, converge, "kubeindex to match the API server first", func() error {
		return sameList(ctx, k, api, podsR, ns, url.Values{"namespace": {ns}}, nil)
	})

	// Nothing changes for longer than the 80s idle timeout: only bookmarks
	// arrive. The condition must hold throughout, so it is checked every
	// second for the whole span.
	const quiet = 95 * time.Second
	for start := time.Now(); time.Since(start) < quiet; time.Sleep(time.Second) {
		if f := freshnessOf(k.get(t, path)); f != fresh {
			t.Fatalf("quiet cluster, %v in: %+v, want %+v", time.Since(start).Round(time.Second), f, fresh)
		}
	}

	px.setHung(true)
	hung := time.Now()
	eventually(t, 90*time.Second, "a hung connection to be reported stale", func() error {
		if f := freshnessOf(k.get(t, path)); f.stale != "true" {
			return fmt.Errorf("headers %+v, want stale", f)
		}
		return nil
	})
	t.Logf("stale %v after the connection hung, with the default flags", time.Since(hung).Round(time.Millisecond))
	px.setHung(false)
	eventually(t, 2*converge, "kubeindex to be fresh again once traffic flows", func() error {
		if f := freshnessOf(k.get(t, path)); f != fresh {
			return fmt.Errorf("headers %+v, want %+v", f, fresh)
		}
		return nil
	})
}
