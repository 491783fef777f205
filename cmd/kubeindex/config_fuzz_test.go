package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzConfigFile: any YAML file is read and validated or refused, never a
// panic; a configuration that validates converts into cache specs whose
// indexes all validate. defaults included.
func FuzzConfigFile(f *testing.F) {
	for _, s := range []string{
		"resources:\n- resource: pods\n",
		"resources:\n- resource: pods\n  namespaces: [a, b]\n  labelSelector: app=web\n  fieldSelector: status.phase!=Failed\n  resync: 10m\n",
		"resources:\n- resource: pods\n  indexes:\n  - {name: ip, type: podIP}\n  - {name: image, path: spec.containers.#.image}\n  - {name: app, label: app}\n",
		"resources:\n- resource: secrets\n  allowSecretData: true\n  redact: [data.password]\n",
		"resources:\n- resource: widgets.example.com\n  indexes: []\n",
		"resources: []\n", "resources:\n- {}\n", "nope: 1\n", "resources:\n- resource: pods\n  resync: -1s\n",
		"resources: &a [*a]\n", "resources:\n- resource: pods\n  indexes:\n  - {name: x, path: 'spec..a'}\n",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	found := fakeFound(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := parseConfig([]string{"--config=" + path}, env(nil), io.Discard)
		if err != nil {
			return
		}
		if cfg.Validate() != nil {
			return
		}
		configured, err := cfg.configure(found)
		if err != nil {
			return
		}
		for _, c := range configured {
			for _, s := range c.Spec.Indexes {
				if err := s.Validate(); err != nil {
					t.Fatalf("%s: a validated configuration has an invalid index: %v", c.Spec.Resource, err)
				}
			}
		}
	})
}
