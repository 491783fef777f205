package bench

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestTransientSeedErrors: what a loaded API server answers now and not
// later is tried again; what no retry mends stops the seed.
func TestTransientSeedErrors(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("pod 1: %w", apierrors.NewInternalError(errors.New("etcdserver: request timed out"))), true},
		{fmt.Errorf("pod 1: %w", errors.New("etcdserver: request timed out")), true},
		{apierrors.NewServerTimeout(pods, "create", 1), true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewServiceUnavailable("starting"), true},
		{apierrors.NewTimeoutError("timeout", 1), true},
		{fmt.Errorf("pod 1: %w", apierrors.NewForbidden(pods, "p", errors.New("no"))), false},
		{apierrors.NewBadRequest("bad pod"), false},
		{apierrors.NewConflict(pods, "p", errors.New("changed")), false},
	} {
		if got := transient(c.err); got != c.want {
			t.Errorf("transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
