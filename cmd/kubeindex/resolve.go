package main

import (
	"errors"
	"fmt"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/indexers"
)

// configure maps every configured resource through discovery, then chooses
// its indexes from what it resolved to: the configured ones or the defaults
// of its group and resource, plus the --index flags naming it by any
// spelling. It reports every unknown resource, every resource listed twice
// under two spellings and every index name clash at once.
func (cfg *Config) configure(found cache.Discovered) ([]cache.Configured, error) {
	var errs []error
	resolved := make([]cache.Resource, 0, len(cfg.Resources))
	for _, r := range cfg.Resources {
		res, err := found.Resolve(r.Resource)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		resolved = append(resolved, res)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	errs = append(errs, sameResourceTwice(cfg.Resources, resolved)...)
	indexes := make([][]indexers.Spec, len(resolved))
	for i, r := range cfg.Resources {
		indexes[i] = r.indexes(resolved[i])
	}
	for _, f := range cfg.IndexFlags {
		i := f.target(found, resolved)
		if i < 0 {
			errs = append(errs, fmt.Errorf("--index %q: resource %q is not configured", f.Flag, f.Resource))
			continue
		}
		indexes[i] = append(indexes[i], f.Spec)
	}
	for i, r := range cfg.Resources {
		if ierrs := validateIndexes(indexes[i]); len(ierrs) > 0 {
			errs = append(errs, fmt.Errorf("resource %q: %w", r.Resource, errors.Join(ierrs...)))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	cache.NameResources(resolved)
	out := make([]cache.Configured, len(resolved))
	for i, r := range cfg.Resources {
		out[i] = cache.Configured{Resource: resolved[i], Spec: r.spec(indexes[i])}
	}
	return out, nil
}

// sameResourceTwice reports two entries that name one resource ("po" and
// "pods"): they would cache it twice under one URL name.
func sameResourceTwice(configured []ResourceConfig, resolved []cache.Resource) []error {
	var errs []error
	first := map[string]int{}
	for i, res := range resolved {
		gr := res.GroupResource()
		if j, ok := first[gr]; ok {
			errs = append(errs, fmt.Errorf("resources %q and %q are both %s: list it once", configured[j].Resource, configured[i].Resource, gr))
			continue
		}
		first[gr] = i
	}
	return errs
}

// target is the index of the configured resource the flag names, by any
// spelling discovery resolves to the same group and resource; -1 if none.
func (f IndexFlag) target(found cache.Discovered, resolved []cache.Resource) int {
	res, err := found.Resolve(f.Resource)
	if err != nil {
		return -1
	}
	for i, r := range resolved {
		if r.Group == res.Group && r.Plural == res.Plural {
			return i
		}
	}
	return -1
}
