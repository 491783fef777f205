package cache

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// secretFields are dropped from Secrets unless Spec.AllowSecretData is set:
// the data itself, and the last-applied annotation kubectl apply leaves,
// which holds a copy of it.
var secretFields = []string{
	"data",
	"stringData",
	`metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration`,
}

// dropPaths is what Shape.Drop must hold for a resource: the operator's
// redactions, and for Secrets their data unless explicitly allowed.
func dropPaths(res Resource, spec Spec) []string {
	drop := append([]string(nil), spec.Redact...)
	if res.Group == "" && res.Plural == "secrets" && !spec.AllowSecretData {
		drop = append(drop, secretFields...)
	}
	return drop
}

// redactPathRE accepts dotted paths of plain keys; a dot inside a key is
// escaped (\.). Wildcards, queries and modifiers are refused: a redaction
// must name exactly what it removes.
var redactPathRE = regexp.MustCompile(`^([A-Za-z0-9_/-]|\\\.)+(\.([A-Za-z0-9_/-]|\\\.)+)*$`)

// ValidateRedactPath reports whether p can be used in Spec.Redact.
func ValidateRedactPath(p string) error {
	if !redactPathRE.MatchString(p) {
		return fmt.Errorf("redact path %q: want a dotted path of plain keys (escape dots in keys as \\.), no wildcards", p)
	}
	return nil
}

// removePath deletes the key at path from the JSON object, cutting the bytes
// when the key is where gjson says; otherwise it decodes, deletes and
// re-encodes, so that a redaction never silently fails.
func removePath(raw []byte, path string) ([]byte, error) {
	r := gjson.GetBytes(raw, path)
	if !r.Exists() {
		return raw, nil
	}
	parts := splitPath(path)
	if from, to, ok := keySpan(raw, r, parts[len(parts)-1]); ok {
		out := make([]byte, 0, len(raw)-(to-from))
		out = append(out, raw[:from]...)
		return append(out, raw[to:]...), nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("redacting %s: %w", path, err)
	}
	cur := m
	for _, p := range parts[:len(parts)-1] {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return raw, nil
		}
		cur = next
	}
	delete(cur, parts[len(parts)-1])
	return json.Marshal(m)
}

// splitPath splits a redact path on unescaped dots and unescapes the keys.
func splitPath(path string) []string {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(path); i++ {
		switch {
		case path[i] == '\\' && i+1 < len(path):
			i++
			cur.WriteByte(path[i])
		case path[i] == '.':
			parts = append(parts, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(path[i])
		}
	}
	return append(parts, cur.String())
}

// keySpan locates `"key": value` around the value gjson found and returns the
// range to delete, including one adjacent comma.
func keySpan(raw []byte, r gjson.Result, key string) (from, to int, ok bool) {
	if r.Index <= 0 {
		return 0, 0, false
	}
	valStart, valEnd := r.Index, r.Index+len(r.Raw)
	i := skipSpaceBack(raw, valStart-1)
	if i < 0 || raw[i] != ':' {
		return 0, 0, false
	}
	quoted, _ := json.Marshal(key)
	i = skipSpaceBack(raw, i-1)
	keyStart := i - len(quoted) + 1
	if keyStart < 1 || string(raw[keyStart:i+1]) != string(quoted) {
		return 0, 0, false
	}
	before := skipSpaceBack(raw, keyStart-1)
	if before < 0 {
		return 0, 0, false
	}
	switch raw[before] {
	case ',':
		return before, valEnd, true
	case '{':
		after := jsonscan.SkipSpace(raw, valEnd)
		if after < len(raw) && raw[after] == ',' {
			return keyStart, after + 1, true
		}
		return keyStart, valEnd, true
	}
	return 0, 0, false
}
