package cache

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// objectMeta is an Object seen as metav1.Object, what client-go's
// meta.Accessor hands its key functions and reflector: the key fields
// Build read, and for everything else the default value, as
// metav1.Object says of a field an object does not support. Setters do
// nothing: a cached Object is immutable (as before, when GetObjectMeta
// answered a new ObjectMeta per call, whose changes reached nothing).
type objectMeta Object

var _ metav1.Object = (*objectMeta)(nil)

func (m *objectMeta) GetNamespace() string                          { return m.namespace }
func (m *objectMeta) GetName() string                               { return m.name }
func (m *objectMeta) GetUID() types.UID                             { return types.UID(m.uid) }
func (m *objectMeta) GetResourceVersion() string                    { return m.resourceVersion }
func (m *objectMeta) GetGenerateName() string                       { return "" }
func (m *objectMeta) GetGeneration() int64                          { return 0 }
func (m *objectMeta) GetSelfLink() string                           { return "" }
func (m *objectMeta) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (m *objectMeta) GetDeletionTimestamp() *metav1.Time            { return nil }
func (m *objectMeta) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (m *objectMeta) GetLabels() map[string]string                  { return nil }
func (m *objectMeta) GetAnnotations() map[string]string             { return nil }
func (m *objectMeta) GetFinalizers() []string                       { return nil }
func (m *objectMeta) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (m *objectMeta) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }

func (m *objectMeta) SetNamespace(string)                          {}
func (m *objectMeta) SetName(string)                               {}
func (m *objectMeta) SetGenerateName(string)                       {}
func (m *objectMeta) SetUID(types.UID)                             {}
func (m *objectMeta) SetResourceVersion(string)                    {}
func (m *objectMeta) SetGeneration(int64)                          {}
func (m *objectMeta) SetSelfLink(string)                           {}
func (m *objectMeta) SetCreationTimestamp(metav1.Time)             {}
func (m *objectMeta) SetDeletionTimestamp(*metav1.Time)            {}
func (m *objectMeta) SetDeletionGracePeriodSeconds(*int64)         {}
func (m *objectMeta) SetLabels(map[string]string)                  {}
func (m *objectMeta) SetAnnotations(map[string]string)             {}
func (m *objectMeta) SetFinalizers([]string)                       {}
func (m *objectMeta) SetOwnerReferences([]metav1.OwnerReference)   {}
func (m *objectMeta) SetManagedFields([]metav1.ManagedFieldsEntry) {}
