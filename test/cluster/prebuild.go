//go:build !race

package cluster

// Nothing here uses these packages. Importing them makes every test binary
// that uses this package depend on what cmd/testcluster is made of, so
// `go test` compiles kube-apiserver and etcd (many minutes on a cold build
// cache) while it builds the test binary, before any test timer starts; Build
// then has only cmd/testcluster's main package to compile and link.
//
// Not with -race: the race-enabled variants would be compiled for nothing,
// since cmd/testcluster is never built with -race.
import (
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
)
