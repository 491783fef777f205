package demo

import "github.com/kubeindex/kubeindex/demo/fakeapi"

// TestCluster is a Cluster with what only tests do to it: write and delete
// objects, read them back as the oracle a client's view is compared with,
// and the faults of [fakeapi.TestControls]. The kubeindex binary builds a
// Cluster with New and never reaches these.
type TestCluster struct {
	*Cluster
	fakeapi.TestControls
}

// NewTest is New for tests.
func NewTest(opts Options) (*TestCluster, error) {
	c, err := New(opts)
	if err != nil {
		return nil, err
	}
	return &TestCluster{Cluster: c, TestControls: fakeapi.Controls(c.api)}, nil
}

// Apply creates or updates an object of resource (a plural such as "pods")
// from its JSON; see [fakeapi.Server.Put]. Churn never changes it.
func (c *TestCluster) Apply(resource string, obj []byte) error {
	_, err := c.api.Put(resource, obj)
	return err
}

// Delete removes an object; namespace is "" for cluster-scoped resources.
// It returns an error wrapping fakeapi.ErrNotFound for a missing object.
func (c *TestCluster) Delete(resource, namespace, name string) error {
	return c.api.Delete(resource, namespace, name)
}

// ResourceVersion returns the cluster-wide resourceVersion of the last change.
func (c *TestCluster) ResourceVersion() string { return c.api.ResourceVersion() }

// Resource names, as Apply, Delete and Objects take them: the simulated
// API server's own.
const (
	Pods        = fakeapi.Pods
	Services    = fakeapi.Services
	Nodes       = fakeapi.Nodes
	Namespaces  = fakeapi.Namespaces
	Deployments = fakeapi.Deployments
	ReplicaSets = fakeapi.ReplicaSets
)
