package cache

import (
	"context"
	"errors"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Retrying while the API server is unreachable is done here, inside the
// ListerWatcher, not by client-go's reflector: the reflector's backoff
// (0.8s doubling to a 30s cap, jittered up to 60s, not configurable through
// client-go's informers) left the cache up to a minute behind a server that had
// come back. The schedule below reaches its cap within a second and a half:
// after a heal the next attempt is at most RetryCap·(1+RetryJitter) away,
// and however long the outage, each informer asks at most about once a
// second.
const (
	RetryFirst  = 200 * time.Millisecond
	RetryCap    = time.Second
	RetryJitter = 0.25
)

// retrySchedule is the delay before each retry of one failing request: 200ms,
// 400ms, 800ms, then 1s, each stretched by up to a quarter at random so that
// the informers of a restarted kubeindex do not ask in step.
func retrySchedule() wait.Backoff {
	return wait.Backoff{Duration: RetryFirst, Factor: 2, Jitter: RetryJitter, Steps: 10, Cap: RetryCap}
}

// retrying calls attempt until it succeeds, fails for good or ctx ends,
// waiting on the retry schedule in between. attempt says whether its error
// is worth retrying; the last error is returned.
func retrying[T any](ctx context.Context, attempt func() (T, bool, error)) (T, error) {
	b := retrySchedule()
	for {
		v, again, err := attempt()
		if err == nil || !again || ctx.Err() != nil {
			return v, err
		}
		t := time.NewTimer(b.Step())
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
	}
}

// transient reports whether a request failed in a way that asking again
// may mend: the server could not be reached or answered that it is
// overloaded or unavailable. Any other answer (403, 404, 410 Gone…) goes to
// the reflector, which knows what each means.
func transient(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return true // no answer at all: refused, reset, timed out, hung
	}
	switch st.Status().Code {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}
