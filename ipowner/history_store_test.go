package ipowner

import (
	"context"
	"errors"
	"testing"
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
