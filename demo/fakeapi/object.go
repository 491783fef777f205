package fakeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// object is one stored object. It is immutable once built: a change makes a
// new object, so readers may keep and serve one without a lock.
type object struct {
	res       *resource
	namespace string
	name      string
	rv        uint64
	uid       string
	created   string // metadata.creationTimestamp
	labels    labels.Set
	fields    fields.Set
	body      []byte // JSON without apiVersion and kind, as list items are
	full      []byte // JSON with apiVersion and kind, as GET and watch serve
}

// key orders objects by namespace, then name: the order lists are served in.
type key struct{ namespace, name string }

func (k key) less(o key) bool {
	if k.namespace != o.namespace {
		return k.namespace < o.namespace
	}
	return k.name < o.name
}

func (o *object) key() key { return key{o.namespace, o.name} }

// fieldDefaults are the values of absent boolean fields, as the API server
// selects them.
var fieldDefaults = map[string]string{"spec.hostNetwork": "false", "spec.unschedulable": "false"}

// newObject encodes m as a stored object of resource r. It removes
// apiVersion and kind from m: they are added back when serving.
func newObject(r *resource, m map[string]any) (*object, error) {
	delete(m, "apiVersion")
	delete(m, "kind")
	body, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", r.singular, err)
	}
	return objectOf(r, body), nil
}

// objectOf builds a stored object of resource r from its JSON body,
// without apiVersion and kind; the object keeps body.
func objectOf(r *resource, body []byte) *object {
	top := map[string]gjson.Result{}
	gjson.ParseBytes(body).ForEach(func(k, v gjson.Result) bool {
		top[k.Str] = v
		return true
	})
	md := top["metadata"]
	o := &object{res: r, body: body,
		namespace: md.Get("namespace").Str, name: md.Get("name").Str, uid: md.Get("uid").Str,
		created: md.Get("creationTimestamp").Str,
	}
	o.rv, _ = strconv.ParseUint(md.Get("resourceVersion").Str, 10, 64)
	o.labels = labels.Set{}
	md.Get("labels").ForEach(func(k, v gjson.Result) bool {
		o.labels[k.Str] = v.String()
		return true
	})
	o.fields = fields.Set{"metadata.name": o.name, "metadata.namespace": o.namespace}
	for label, path := range r.fields {
		first, rest, _ := strings.Cut(path, ".")
		v := top[first].Get(rest)
		o.fields[label] = v.String()
		if !v.Exists() {
			o.fields[label] = fieldDefaults[label]
		}
	}
	prefix := fmt.Sprintf(`{"apiVersion":%q,"kind":%q`, r.apiVersion(), r.kind)
	if len(body) > 2 {
		prefix += ","
	}
	o.full = append([]byte(prefix), body[1:]...)
	return o
}

// decode returns a mutable copy of the object, without apiVersion and kind.
// Numbers stay json.Number so that re-encoding changes nothing.
func (o *object) decode() map[string]any {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(o.body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		panic(fmt.Sprintf("fakeapi: stored %s %s/%s does not decode: %v", o.res.singular, o.namespace, o.name, err))
	}
	return m
}

// matches reports whether the object passes both selectors (nil matches all).
func (o *object) matches(ls labels.Selector, fs fields.Selector) bool {
	if o == nil {
		return false
	}
	return (ls == nil || ls.Matches(o.labels)) && (fs == nil || fs.Matches(o.fields))
}
