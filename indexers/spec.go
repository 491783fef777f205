// Package indexers turns index specifications into index functions.
//
// An index function reads a stored object (its JSON bytes) and returns the
// values under which the object is findable. Index functions run under the
// cache's write lock for every add and update, so they are pure, cheap and
// never panic; everything that can be wrong with a specification is caught
// by Validate before any informer starts.
package indexers

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Type names a kind of index.
type Type string

const (
	// PodIP indexes every address in status.podIPs and status.podIP,
	// normalised so that any spelling of an address finds it.
	PodIP Type = "podIP"
	// NodeName indexes spec.nodeName.
	NodeName Type = "nodeName"
	// Owner indexes each owner reference twice: by the owner's UID and by
	// "Kind/name" (for example "ReplicaSet/web-6f7c9").
	Owner Type = "owner"
	// Label indexes the value of one label key.
	Label Type = "label"
	// Path indexes the values a gjson path selects; arrays are flattened.
	Path Type = "path"
)

// Types lists every index type, for messages and documentation.
var Types = []Type{PodIP, NodeName, Owner, Label, Path}

// Spec is one configured index. It is what the API shows for an index.
type Spec struct {
	// Name is how the index is addressed in queries: ?index=<name>.
	Name string `json:"name"`
	// Type is the kind of index. When empty it is inferred: "label" if Label
	// is set, "path" if Path is set.
	Type Type `json:"type"`
	// Label is the label key, for Type "label".
	Label string `json:"label,omitempty"`
	// Path is the gjson path, for Type "path" (e.g. spec.containers.#.image).
	Path string `json:"path,omitempty"`
}

// nameRE keeps index names usable in URLs and query strings unescaped.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// Normalized returns the spec with Type inferred from its fields.
func (s Spec) Normalized() Spec {
	if s.Type == "" {
		switch {
		case s.Label != "":
			s.Type = Label
		case s.Path != "":
			s.Type = Path
		}
	}
	return s
}

// Validate reports everything wrong with the spec, naming the index.
func (s Spec) Validate() error {
	s = s.Normalized()
	var errs []error
	if !nameRE.MatchString(s.Name) {
		errs = append(errs, fmt.Errorf("name %q must be 1-63 letters, digits, '-', '_' or '.'", s.Name))
	}
	switch s.Type {
	case PodIP, NodeName, Owner:
		if s.Label != "" || s.Path != "" {
			errs = append(errs, fmt.Errorf("type %s takes neither label nor path", s.Type))
		}
	case Label:
		if why := validation.IsQualifiedName(s.Label); len(why) > 0 { // the API server's rule for label keys
			errs = append(errs, fmt.Errorf("label key %q is not a valid Kubernetes label key: %s", s.Label, strings.Join(why, "; ")))
		}
		if s.Path != "" {
			errs = append(errs, errors.New("type label takes no path"))
		}
	case Path:
		if err := ValidatePath(s.Path); err != nil {
			errs = append(errs, err)
		}
		if s.Label != "" {
			errs = append(errs, errors.New("type path takes no label"))
		}
	case "":
		errs = append(errs, fmt.Errorf("type is missing (one of %s, or give label: or path:)", typeList()))
	default:
		errs = append(errs, fmt.Errorf("unknown type %q (one of %s)", s.Type, typeList()))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("index %q: %w", s.Name, errors.Join(errs...))
}

// Parse reads the compact form used on the command line:
//
//	ip=podIP   node=nodeName   owner=owner
//	app=label:app   image=path:spec.containers.#.image
func Parse(s string) (Spec, error) {
	name, def, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok {
		return Spec{}, fmt.Errorf("index %q: want name=type, name=label:<key> or name=path:<gjson path>", s)
	}
	spec := Spec{Name: name}
	kind, arg, hasArg := strings.Cut(def, ":")
	spec.Type = Type(kind)
	switch {
	case spec.Type == Label && hasArg:
		spec.Label = arg
	case spec.Type == Path && hasArg:
		spec.Path = arg
	case hasArg:
		return Spec{}, fmt.Errorf("index %q: type %s takes no argument", name, kind)
	}
	if err := spec.Validate(); err != nil {
		return Spec{}, err
	}
	return spec, nil
}

func typeList() string {
	names := make([]string, len(Types))
	for i, t := range Types {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}
