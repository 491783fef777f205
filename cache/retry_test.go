package cache

import (
	"errors"
	"net/http"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestRetryScheduleHealsFastAndStaysCheap plays the retry schedule on a
// virtual clock through outages of several lengths: the first attempt after
// the server returns is at most 1.25s later, and a long outage costs about
// one attempt a second.
func TestRetryScheduleHealsFastAndStaysCheap(t *testing.T) {
	for _, outage := range []time.Duration{300 * time.Millisecond, 5 * time.Second, 40 * time.Second, 10 * time.Minute} {
		for run := 0; run < 200; run++ { // the jitter is random: many draws
			b := retrySchedule()
			var now time.Duration // the first attempt fails at 0
			attempts := 1
			for now < outage {
				d := b.Step()
				if d > RetryCap*5/4 {
					t.Fatalf("outage %v: a wait of %v, over the 1.25s bound", outage, d)
				}
				if now > 2*time.Second && d < RetryCap {
					t.Fatalf("outage %v: a wait of %v at %v, more than one attempt a second", outage, d, now)
				}
				now += d
				attempts++
			}
			if heal := now - outage; heal > RetryCap*5/4 {
				t.Fatalf("outage %v: first attempt %v after the heal, want at most 1.25s", outage, heal)
			}
			if limit := int(outage/time.Second) + 4; attempts > limit {
				t.Fatalf("outage %v: %d attempts, want at most %d", outage, attempts, limit)
			}
		}
	}
}

func TestTransientErrors(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"), true},
		{errors.New("EOF"), true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewServiceUnavailable("starting"), true},
		{apierrors.NewGenericServerResponse(http.StatusBadGateway, "GET", gr, "", "", 0, false), true},
		{apierrors.NewForbidden(gr, "", errors.New("no")), false},
		{apierrors.NewResourceExpired("too old"), false},
		{apierrors.NewNotFound(gr, ""), false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
