package cache

import (
	"strings"

	"github.com/tidwall/gjson"
)

// A custom resource's field selectors are its CRD's: metadata.name,
// metadata.namespace when namespaced, and the selectableFields of the
// served version, each valued as the API server values it (the JSON value
// as text, "" when absent); anything else is "field label not supported"
// (apiextensions-apiserver's crConverter.ConvertFieldLabel and its
// strategy's selectableFields). kubeindex knows a CRD when it caches
// customresourcedefinitions, or follows it (crds.go); one it may not read
// allows what a built-in kind without a conversion allows.

// crdResource is how the cache finds the CRDs it holds.
const crdGroup, crdPlural = "apiextensions.k8s.io", "customresourcedefinitions"

// linkCRDs lets every resource of a named group read its CRD, when the
// cache holds CRDs.
func (c *Cache) linkCRDs() {
	var crds *resourceCache
	for _, r := range c.resources {
		if r.res.Group == crdGroup && r.res.Plural == crdPlural {
			crds = r
		}
	}
	if crds == nil {
		return
	}
	for _, r := range c.resources {
		if r.res.Group != "" && r != crds {
			r.crds = crds
		}
	}
}

// crdFieldTable returns the field table the resource's CRD declares; false
// when the resource has no CRD in the cache.
func (r *resourceCache) crdFieldTable() (fieldTable, bool) {
	raw, _ := r.crd()
	if raw == nil {
		return fieldTable{}, false
	}
	t := fieldTable{fields: map[string]fieldValue{}, unsupported: notSupported}
	for _, v := range gjson.GetBytes(raw, "spec.versions").Array() {
		if v.Get("name").String() != r.res.Version {
			continue
		}
		for _, sf := range v.Get("selectableFields").Array() {
			path := strings.TrimPrefix(sf.Get("jsonPath").String(), ".")
			if path != "" {
				t.fields[path] = crdField(path)
			}
		}
	}
	return t, true
}

// crdField reads a selectable field: a string, integer or boolean (the
// types a CRD may select on), as text.
func crdField(path string) fieldValue {
	return func(raw []byte) string {
		v := gjson.GetBytes(raw, path)
		if !v.Exists() || v.Type == gjson.Null {
			return ""
		}
		return v.String()
	}
}
