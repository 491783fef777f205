package server

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/openapi"
)

// TestSpecStatesTheBoundsTheCodeApplies: where openapi.json's prose states
// a bound, it states the constant the code applies. Each pattern's
// numbers, wherever it matches, must be the expected ones.
func TestSpecStatesTheBoundsTheCodeApplies(t *testing.T) {
	spec := string(openapi.Spec)
	found := 0
	minutes := func(d interface{ Minutes() float64 }) string { return strconv.Itoa(int(d.Minutes())) }
	for _, b := range []struct {
		pattern string
		want    []string
	}{
		{`limit is not an integer from 0 to ([\d,]+)`, []string{strconv.Itoa(maxLimit)}},
		{`Above ([\d,]+) is refused`, []string{strconv.Itoa(maxLimit)}},
		{`up to ([\d,]+) queries`, []string{strconv.Itoa(maxBatchQueries)}},
		{`at most ([\d,]+) terms`, []string{strconv.Itoa(cache.MaxSelectorTerms)}},
		{`(\d+) to (\d+) min by default`, []string{minutes(DefaultMaxLifetime / 2), minutes(DefaultMaxLifetime)}},
	} {
		matches := regexp.MustCompile(b.pattern).FindAllStringSubmatch(spec, -1)
		for _, m := range matches {
			for i, got := range m[1:] {
				if strings.ReplaceAll(got, ",", "") != b.want[i] {
					t.Errorf("openapi.json says %q; the code applies %s", m[0], b.want[i])
				}
			}
		}
		if len(matches) == 0 {
			t.Logf("openapi.json no longer states %q", b.pattern)
		}
		found += len(matches)
	}
	if found == 0 {
		t.Error("openapi.json states none of the bounds: the patterns no longer match its prose")
	}
}
