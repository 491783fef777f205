package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
)

// southReconfigured: with a stream open on every cluster, south is
// removed from the configuration file: its stream ends saying why, its
// prefix answers 404 and the lists across clusters leave it out, while
// east's and west's streams carry every change without a gap. South is
// then added back: it serves under its prefix and joins the lists, and
// east's and west's streams are still the same, unbroken, ones.
func (f *fleetE2E) southReconfigured(t *testing.T) {
	k := f.k
	south := f.member("south")
	others := f.others("south")
	streams := f.openStreams(t, f.members)

	f.writeConfig(t, others...)
	eventually(t, converge, "south gone from the fleet", func() error {
		if names := k.clusterNames(t); !slices.Equal(names, []string{"east", "west"}) {
			return fmt.Errorf("clusters %v; expect east, west", names)
		}
		return nil
	})
	eventually(t, converge, "south's stream ended with the reason", func() error {
		return streams["south"].endedWith("was removed from the configuration")
	})
	for _, path := range []string{"/clusters/south/api/v1/pods", "/clusters/south/k8s/api/v1/pods", "/clusters/south/api/v1/pods?watch=true"} {
		if r := k.get(t, path); r.code != http.StatusNotFound {
			t.Errorf("GET %s once south is removed: %d %.200s; expect 404", path, r.code, r.body)
		}
	}
	churn(t, others, "removed")
	f.streamsFollow(t, others, streams, "the changes made as south was removed")
	fleetUnion(t, k, oraclesOf(others))

	f.writeConfig(t, f.members...)
	f.recovered(t, south)
	eventually(t, converge, "south back in the fleet, in configuration order", func() error {
		if names := k.clusterNames(t); !slices.Equal(names, []string{"east", "west", "south"}) {
			return fmt.Errorf("clusters %v; expect east, west, south", names)
		}
		return nil
	})
	churn(t, f.members, "added")
	f.streamsFollow(t, others, streams, "the changes made after south was added")
	fleetUnion(t, k, f.oracles())
	fleetStatusCounts(t, k, f.apiKubectls(t))
	// A stream of the added south, as any client opens one.
	added := subscribeSSE(t, k, "/clusters/south/api/v1/pods?watch=true")
	f.streamsFollow(t, []*fleetAPI{south}, map[string]*sseView{"south": added}, "a stream of the added south")
}
