package ipowner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestHistorySurvivesARestart: given a history kept in a directory, when
// kubeindex stops and starts again, then moments before the stop answer as
// they did, the time it was down is refused, owners the new lists no
// longer hold are ended, and the ones still there carry on.
func TestHistorySurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	clk := &handClock{t: t0}
	x, err := NewHistory(HistoryOptions{Dir: dir}, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { x.Run(ctx); close(done) }()
	const ip, kept = "10.1.0.5", "10.1.0.6"
	clk.t = sec(10)
	x.Observe(podHolding("A", false, ip))
	x.Observe(podHolding("K", false, kept))
	clk.t = sec(20)
	x.Observe(gone(podHolding("A", false)))
	clk.t = sec(30)
	x.Observe(podHolding("B", false, ip))
	clk.t = sec(40)
	cancel() // the last flush, at +40s
	<-done

	clk.t = sec(100)
	y, err := NewHistory(HistoryOptions{Dir: dir}, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	defer y.db.Close()
	y.Observe(Holding{Owner: podHolding("K", false).Owner, Held: podHolding("K", false, kept).Held, Begin: sec(5).UnixNano(), Since: "start"}) // K is listed again
	y.Reconcile()                                                                                                                              // B is not
	clk.t = sec(110)
	for _, tt := range []struct {
		ip   string
		at   float64
		want string
	}{
		{ip, 15, "exact: A"}, {ip, 25, "nobody"}, {ip, 35, "exact: B"}, {ip, 50, "beforeHistory"}, {ip, 105, "nobody"},
		{kept, 35, "exact: K"}, {kept, 105, "exact: K"}, {ip, 5, "nobody"}, {ip, -5, "beforeHistory"},
	} {
		ans, _, err := y.at(tt.ip, sec(tt.at), nil)
		if got := ownersOf(ans, err); got != tt.want {
			t.Errorf("%s at %gs after the restart: %s; expect %s", tt.ip, tt.at, got, tt.want)
		}
	}
	if _, _, err := y.at(ip, sec(50), nil); !errors.Is(err, ErrBeforeHistory) {
		t.Errorf("the downtime: %v", err)
	}
	if ans, _, _ := y.at(kept, sec(105), nil); ans.Owners[0].From != sec(10) {
		t.Errorf("K carries on from %s; expect +10s", ans.Owners[0].From)
	}
	// Without a directory a restart begins anew, and says so.
	z := newHistory(HistoryOptions{}, clk.now)
	if _, _, err := z.at(ip, sec(35), nil); !errors.Is(err, ErrBeforeHistory) {
		t.Errorf("a fresh history answered for before it began: %v", err)
	}
}

// TestHistoryPortsSurviveARestart: given a Service whose ports changed
// while it held its address, when kubeindex restarts with the history
// kept in a directory, then each moment still answers with the ports
// declared then; and an interval as files of the previous version hold
// it (the latest ports only) loads with those ports.
func TestHistoryPortsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	clk := &handClock{t: t0}
	x, err := NewHistory(HistoryOptions{Dir: dir}, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	const ip = "10.9.0.7"
	s := svcHolding("S", RoleExternalIP, ip)
	s.Ports = []Port{{80, "TCP"}}
	clk.t = sec(10)
	x.Observe(s)
	clk.t = sec(20)
	s.Ports = []Port{{443, "TCP"}}
	x.Observe(s)
	clk.t = sec(30)
	if err := x.flush(); err != nil {
		t.Fatal(err)
	}
	// An interval written by the previous version: no "pb".
	old := []byte(`{"ip":"10.9.0.8","k":"Service","ns":"ns","n":"s-O","u":"O","r":"externalIP","f":` +
		fmt.Sprint(sec(10).UnixNano()) + `,"p":[{"Number":53,"Protocol":"UDP"}]}`)
	if err := x.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketIntervals).Put(idKey(1000), old) }); err != nil {
		t.Fatal(err)
	}
	x.db.Close()

	clk.t = sec(40)
	y, err := NewHistory(HistoryOptions{Dir: dir}, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	defer y.db.Close()
	for _, c := range []struct {
		ip   string
		at   float64
		want []Port
	}{
		{ip, 15, []Port{{80, "TCP"}}}, {ip, 25, []Port{{443, "TCP"}}}, {"10.9.0.8", 25, []Port{{53, "UDP"}}},
	} {
		ans, _, err := y.at(c.ip, sec(c.at), nil)
		if err != nil || len(ans.Owners) != 1 || !slices.Equal(ans.Owners[0].Ports, c.want) {
			t.Errorf("%s at %gs after the restart: %+v, %v; want ports %v", c.ip, c.at, ans.Owners, err, c.want)
		}
	}
}
