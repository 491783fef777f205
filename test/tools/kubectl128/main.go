// Command kubectl is kubectl 1.28 (k8s.io/kubectl v0.28), the oldest
// kubectl the end-to-end tests point at kubeindex's /k8s: the same main
// as k8s.io/kubernetes/cmd/kubectl of that release. It is a module of its
// own so that its dependency graph leaves test/go.mod alone;
// cluster.BuildKubectl128 builds it with its version stamped in.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
	os.Exit(0)
}
