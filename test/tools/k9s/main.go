// Command k9s is k9s (github.com/derailed/k9s, at the version go.mod
// pins), the terminal dashboard the end-to-end tests drive in tmux against
// kubeindex's /k8s: the same main as k9s's own. It is a module of its own
// so that its large dependency graph leaves test/go.mod alone;
// cluster.BuildK9s builds it.
package main

import (
	"github.com/derailed/k9s/cmd"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

func main() { cmd.Execute() }
