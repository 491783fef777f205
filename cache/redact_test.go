package cache

import (
	"encoding/json"
	"strings"
	"testing"
)

const secret = `{"metadata":{"name":"db","namespace":"shop","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"data\":{\"password\":\"aHVudGVyMg==\"}}","team":"payments"},"managedFields":[{"manager":"kubectl"}]},"type":"Opaque","data":{"password":"aHVudGVyMg=="},"stringData":{"token":"hunter2"}}`

func TestSecretDataNeverCachedUnlessAllowed(t *testing.T) {
	res := Resource{Plural: "secrets", Version: "v1", Kind: "Secret"}
	tests := []struct {
		name     string
		spec     Spec
		wantData bool
	}{
		{"default drops data, stringData and last-applied", Spec{}, false},
		{"explicitly allowed keeps them", Spec{AllowSecretData: true}, true},
		{"redactions do not re-enable data", Spec{Redact: []string{"type"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := Shape{APIVersion: "v1", Kind: "Secret", Drop: dropPaths(res, tt.spec)}.Build([]byte(secret))
			if err != nil {
				t.Fatal(err)
			}
			raw := string(o.Raw())
			if !json.Valid(o.Raw()) {
				t.Fatalf("invalid JSON: %s", raw)
			}
			for _, s := range []string{"aHVudGVyMg==", "hunter2", "last-applied"} {
				if strings.Contains(raw, s) != tt.wantData {
					t.Errorf("contains %q = %v; expect %v\n%s", s, !tt.wantData, tt.wantData, raw)
				}
			}
			if !strings.Contains(raw, `"team":"payments"`) || strings.Contains(raw, "managedFields") {
				t.Errorf("other fields damaged or managedFields kept: %s", raw)
			}
		})
	}
	// Other resources called "secrets" in other groups are not Secrets.
	if d := dropPaths(Resource{Group: "example.com", Plural: "secrets"}, Spec{}); len(d) != 0 {
		t.Errorf("CRD named secrets gets %v", d)
	}
}

func TestRemovePath(t *testing.T) {
	tests := []struct{ in, path, want string }{
		{`{"a":1,"b":{"c":2,"d":3}}`, "b.c", `{"a":1,"b":{"d":3}}`},
		{`{"a":1,"b":{"c":2,"d":3}}`, "b.d", `{"a":1,"b":{"c":2}}`},
		{`{"a":1,"b":{"c":2}}`, "b.c", `{"a":1,"b":{}}`},
		{`{"a":1}`, "x.y", `{"a":1}`},
		{`{"m":{"a.b/c":"v","k":1}}`, `m.a\.b/c`, `{"m":{"k":1}}`},
		// The key is escaped in the JSON: the byte cut fails, the decode path removes it.
		{`{"m":{"a\/b":"secret","k":1}}`, `m.a/b`, `{"m":{"k":1}}`},
	}
	for _, tt := range tests {
		got, err := removePath([]byte(tt.in), tt.path)
		if err != nil {
			t.Fatal(err)
		}
		var g, w any
		json.Unmarshal(got, &g)
		json.Unmarshal([]byte(tt.want), &w)
		gj, _ := json.Marshal(g)
		wj, _ := json.Marshal(w)
		if string(gj) != string(wj) {
			t.Errorf("removePath(%s, %s) = %s; expect %s", tt.in, tt.path, got, tt.want)
		}
	}
}

func TestValidateRedactPath(t *testing.T) {
	for _, ok := range []string{"data", "spec.template.env", `metadata.annotations.example\.com/key`} {
		if err := ValidateRedactPath(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a..b", "spec.*", "spec.#.x", "a.@this", ".a"} {
		if ValidateRedactPath(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
