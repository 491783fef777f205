package server

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/sharding"
	apiserversharding "k8s.io/apiserver/pkg/sharding"
)

// Sharded lists and watches (shardSelector, KEP-5866): a list or watch
// keeps the objects whose FNV-1a 64 hash of object.metadata.uid (or
// object.metadata.namespace) falls in the selector's ranges, such as
//
//	shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')
//
// so that N consumers, each asking for one of N ranges, each receive 1/N
// of the objects and events instead of all of them. The API server serves
// it from v1.36 behind the ShardedListAndWatch feature gate; kubeindex
// serves it from its cache for any API server version. The selector is
// parsed by the API server's own parser (k8s.io/apiserver/pkg/sharding),
// and objects are matched with apimachinery's hashing, so syntax, hashing
// and error texts are the API server's.

// kubeShardSelector parses the request's shardSelector; nil when it has
// none. A selector that does not parse is a 400 with the API server's
// message (the 1.36 API server answers it with a 500 carrying the same
// message: its registry returns a plain error).
func kubeShardSelector(opts *metainternalversion.ListOptions) (sharding.Selector, error) {
	if opts.ShardSelector == "" {
		return nil, nil
	}
	sel, err := apiserversharding.Parse(opts.ShardSelector)
	if err != nil {
		return nil, apierrors.NewBadRequest("invalid shard selector: " + err.Error())
	}
	return sel, nil
}
