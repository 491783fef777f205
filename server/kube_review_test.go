package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// Tests of the self reviews under /k8s: answered as kubeindex decides
// the caller's own requests, in the API server's shapes.

const (
	ssarPath = "/k8s/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
	ssrrPath = "/k8s/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
	ssrPath  = "/k8s/apis/authentication.k8s.io/v1/selfsubjectreviews"
)

func kubePost(t *testing.T, h http.Handler, target, contentType, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := localRequest(http.MethodPost, target, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// ssar is a SelfSubjectAccessReview's body asking about resource attributes.
func ssar(attrs string) string {
	return `{"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","spec":{"resourceAttributes":` + attrs + `}}`
}

func TestKubeAccessReviewWithoutAuth(t *testing.T) {
	_, h := startServer(t)
	tests := []struct {
		name, body string
		// expect
		allowed, denied bool
		reason          string // a substring
	}{
		{"list pods", ssar(`{"verb":"list","resource":"pods","namespace":"kube-system"}`), true, false, "authorization is off"},
		{"watch deployments everywhere", ssar(`{"verb":"watch","group":"apps","resource":"deployments"}`), true, false, ""},
		{"get a pod's status", ssar(`{"verb":"get","resource":"pods","subresource":"status","name":"x","namespace":"a"}`), true, false, ""},
		{"create pods", ssar(`{"verb":"create","resource":"pods","namespace":"kube-system"}`), false, true, "read-only"},
		{"delete a node", ssar(`{"verb":"delete","resource":"nodes","name":"node-1"}`), false, true, "read-only"},
		{"every verb", ssar(`{"verb":"*","resource":"pods"}`), false, true, "read-only"},
		{"every resource", ssar(`{"verb":"list","resource":"*"}`), false, true, "not every resource"},
		{"not cached", ssar(`{"verb":"list","resource":"secrets"}`), false, true, "does not serve secrets"},
		{"same plural, other group", ssar(`{"verb":"list","group":"extensions","resource":"deployments"}`), false, true, "does not serve deployments.extensions"},
		{"a pod's log", ssar(`{"verb":"get","resource":"pods","subresource":"log","name":"x","namespace":"a"}`), false, true, "subresource pods/log"},
		{"list of status", ssar(`{"verb":"list","resource":"pods","subresource":"status"}`), false, true, "subresource pods/status"},
		{"ask a review", ssar(`{"verb":"create","group":"authorization.k8s.io","resource":"selfsubjectaccessreviews"}`), true, false, "answers this review itself"},
		{"discovery", `{"spec":{"nonResourceAttributes":{"verb":"get","path":"/apis/apps/v1"}}}`, true, false, "discovery"},
		{"metrics under /k8s", `{"spec":{"nonResourceAttributes":{"verb":"get","path":"/metrics"}}}`, false, true, `does not serve "/metrics"`},
		{"post to discovery", `{"spec":{"nonResourceAttributes":{"verb":"post","path":"/api"}}}`, false, true, "read-only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := kubePost(t, h, ssarPath, "application/json", tt.body)
			if rec.Code != http.StatusCreated {
				t.Fatalf("%d, want 201: %s", rec.Code, rec.Body)
			}
			b := gjson.ParseBytes(rec.Body.Bytes())
			want(t, b.Get("kind").Str == "SelfSubjectAccessReview" && b.Get("apiVersion").Str == "authorization.k8s.io/v1", "kind and apiVersion: "+b.Raw)
			want(t, reflect.DeepEqual(b.Get("spec").Value(), gjson.Get(tt.body, "spec").Value()), "the spec as asked: "+b.Get("spec").Raw)
			st := b.Get("status")
			if st.Get("allowed").Bool() != tt.allowed || st.Get("denied").Bool() != tt.denied || !strings.Contains(st.Get("reason").Str, tt.reason) {
				t.Errorf("status %s; want allowed %v, denied %v, a reason with %q", st.Raw, tt.allowed, tt.denied, tt.reason)
			}
		})
	}
}

// TestKubeReviewRefusals: what the API server refuses, refused alike.
func TestKubeReviewRefusals(t *testing.T) {
	_, h := startServer(t)
	tests := []struct {
		name, path, contentType, body string
		// expect
		code    int
		reason  string
		message string // a substring
	}{
		{"no attributes", ssarPath, "application/json", `{"spec":{}}`, 422, "Invalid",
			"exactly one of nonResourceAttributes or resourceAttributes must be specified"},
		{"both attributes", ssarPath, "", `{"spec":{"resourceAttributes":{"verb":"get"},"nonResourceAttributes":{"verb":"get"}}}`, 422, "Invalid",
			"cannot be specified in combination with resourceAttributes"},
		{"metadata", ssarPath, "", `{"metadata":{"name":"x"},"spec":{"resourceAttributes":{"verb":"get"}}}`, 422, "Invalid", "must be empty"},
		{"an empty selector", ssarPath, "", ssar(`{"verb":"list","resource":"pods","labelSelector":{}}`), 422, "Invalid",
			"requirements or rawSelector is required"},
		{"another version", ssarPath, "", `{"apiVersion":"authorization.k8s.io/v1beta1","kind":"SelfSubjectAccessReview","spec":{}}`, 400, "BadRequest",
			"does not match the expected API version"},
		{"another kind", ssarPath, "", `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectRulesReview","spec":{"namespace":"a"}}`, 400, "BadRequest",
			"not a SelfSubjectAccessReview"},
		{"not JSON", ssarPath, "application/json", `{"spec":`, 400, "BadRequest", ""},
		{"unknown fields, strict", ssarPath + "?fieldValidation=Strict", "", ssar(`{"verb":"get","resource":"pods","colour":"red"}`), 400, "BadRequest",
			`unknown field "spec.resourceAttributes.colour"`},
		{"a body in text", ssarPath, "text/plain", `spec`, 415, "UnsupportedMediaType", "application/json, application/yaml"},
		{"rules without a namespace", ssrrPath, "", `{"spec":{}}`, 400, "BadRequest", "no namespace on request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := kubePost(t, h, tt.path, tt.contentType, tt.body)
			b := gjson.ParseBytes(rec.Body.Bytes())
			if rec.Code != tt.code {
				t.Fatalf("%d, want %d: %s", rec.Code, tt.code, rec.Body)
			}
			wantStatus(t, b, tt.code)
			if b.Get("reason").Str != tt.reason || !strings.Contains(b.Get("message").Str, tt.message) {
				t.Errorf("reason %q, message %q; want %q with %q", b.Get("reason").Str, b.Get("message").Str, tt.reason, tt.message)
			}
		})
	}
	t.Run("unknown fields, by default: a warning", func(t *testing.T) {
		rec := kubePost(t, h, ssarPath, "", ssar(`{"verb":"get","resource":"pods","colour":"red"}`))
		want(t, rec.Code == 201 && strings.Contains(rec.Header().Get("Warning"), "colour"), rec.Header().Get("Warning"))
	})
	t.Run("YAML", func(t *testing.T) {
		rec := kubePost(t, h, ssarPath, "application/yaml", "spec:\n  resourceAttributes:\n    verb: list\n    resource: pods\n")
		want(t, rec.Code == 201 && gjson.Get(rec.Body.String(), "status.allowed").Bool(), rec.Body.String())
	})
	t.Run("GET is not a review", func(t *testing.T) {
		rec := kubeDo(t, h, http.MethodGet, ssarPath, "")
		want(t, rec.Code == http.StatusMethodNotAllowed && rec.Header().Get("Allow") == "POST, OPTIONS", rec.Body.String())
	})
}

func TestKubeRulesAndSelfReviewWithoutAuth(t *testing.T) {
	_, h := startServer(t)
	rec := kubePost(t, h, ssrrPath, "", `{"spec":{"namespace":"kube-system"}}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("%d: %s", rec.Code, rec.Body)
	}
	b := gjson.ParseBytes(rec.Body.Bytes())
	want(t, b.Get("kind").Str == "SelfSubjectRulesReview" && b.Get("spec").Raw == "{}", "the API server's shape: "+b.Raw)
	st := b.Get("status")
	want(t, !st.Get("incomplete").Bool(), "complete")
	want(t, st.Get(`resourceRules.#(apiGroups.0=="").verbs`).Raw == `["get","list","watch"]`, "core reads: "+st.Raw)
	core := st.Get(`resourceRules.#(apiGroups.0=="").resources`).Raw
	want(t, strings.Contains(core, `"pods"`) && strings.Contains(core, `"nodes"`), "core resources: "+core)
	want(t, strings.Contains(st.Get(`resourceRules.#(verbs.0=="get")#.resources`).Raw, `"pods/status"`), "status subresources: "+st.Raw)
	want(t, st.Get(`resourceRules.#(apiGroups.0=="authentication.k8s.io").resources`).Raw == `["selfsubjectreviews"]`, "the reviews")
	want(t, st.Get(`nonResourceRules.0.nonResourceURLs`).Raw != "", "discovery")

	rec = kubePost(t, h, ssrPath, "application/json", `{}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("%d: %s", rec.Code, rec.Body)
	}
	b = gjson.ParseBytes(rec.Body.Bytes())
	want(t, b.Get("kind").Str == "SelfSubjectReview" && b.Get("apiVersion").Str == "authentication.k8s.io/v1", b.Raw)
	want(t, b.Get("status.userInfo.username").Str == "system:anonymous" &&
		b.Get("status.userInfo.groups").Raw == `["system:unauthenticated"]`, "anonymous: "+b.Raw)
	want(t, b.Get("metadata.creationTimestamp").Str != "", "created now, as the API server says")
}

// TestKubeReviewsAsAuthorized: with authentication and authorization, the
// answers are the authorizer's for the caller.
func TestKubeReviewsAsAuthorized(t *testing.T) {
	e := startAuth(t, Options{})
	post := func(t *testing.T, path, token, body string) (int, gjson.Result) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, e.ss.url+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, gjson.ParseBytes(raw)
	}
	tests := []struct {
		name, token, body string
		// expect
		allowed, denied bool
	}{
		{"alice lists pods in team-a", "alice-token", ssar(`{"verb":"list","resource":"pods","namespace":"team-a"}`), true, false},
		{"alice lists pods in team-b", "alice-token", ssar(`{"verb":"list","resource":"pods","namespace":"team-b"}`), false, false},
		{"alice lists pods everywhere", "alice-token", ssar(`{"verb":"list","resource":"pods"}`), false, false},
		{"alice gets a pod's status: not granted", "alice-token", ssar(`{"verb":"get","resource":"pods","subresource":"status","namespace":"team-a","name":"a-0"}`), false, false},
		{"alice creates pods in team-a", "alice-token", ssar(`{"verb":"create","resource":"pods","namespace":"team-a"}`), false, true},
		{"the admin lists deployments", "admin-token", ssar(`{"verb":"list","group":"apps","resource":"deployments"}`), true, false},
		{"nobody asks about discovery", "nobody-token", `{"spec":{"nonResourceAttributes":{"verb":"get","path":"/api"}}}`, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, b := post(t, ssarPath, tt.token, tt.body)
			if code != http.StatusCreated {
				t.Fatalf("%d: %s", code, b.Raw)
			}
			st := b.Get("status")
			if st.Get("allowed").Bool() != tt.allowed || st.Get("denied").Bool() != tt.denied {
				t.Errorf("status %s; want allowed %v, denied %v", st.Raw, tt.allowed, tt.denied)
			}
		})
	}
	t.Run("no token", func(t *testing.T) {
		code, _ := post(t, ssarPath, "", ssar(`{"verb":"list","resource":"pods"}`))
		want(t, code == http.StatusUnauthorized, "401")
	})
	t.Run("alice's rules in team-a", func(t *testing.T) {
		code, b := post(t, ssrrPath, "alice-token", `{"spec":{"namespace":"team-a"}}`)
		if code != http.StatusCreated {
			t.Fatalf("%d: %s", code, b.Raw)
		}
		st := b.Get("status")
		want(t, st.Get("incomplete").Bool(), "incomplete: kubeindex cannot enumerate rules naming objects")
		want(t, st.Get(`resourceRules.#(apiGroups.0=="")`).Raw == `{"verbs":["get","list","watch"],"apiGroups":[""],"resources":["pods"]}`,
			"pods, nothing else: "+st.Raw)
		want(t, !st.Get(`resourceRules.#(apiGroups.0=="apps")`).Exists(), "no apps: "+st.Raw)
	})
	t.Run("alice is alice", func(t *testing.T) {
		code, b := post(t, ssrPath, "alice-token", `{}`)
		want(t, code == http.StatusCreated && b.Get("status.userInfo.username").Str == "alice" && b.Get("status.userInfo.uid").Str == "1", b.Raw)
	})
}

func TestKubeReviewsInDiscovery(t *testing.T) {
	_, h := startServer(t)
	rec := kubeDo(t, h, http.MethodGet, "/k8s/apis/authorization.k8s.io/v1", "")
	b := gjson.ParseBytes(rec.Body.Bytes())
	want(t, rec.Code == 200 && b.Get(`resources.#(name=="selfsubjectaccessreviews").verbs`).Raw == `["create"]` &&
		b.Get(`resources.#(name=="selfsubjectaccessreviews").kind`).Str == "SelfSubjectAccessReview" &&
		b.Get(`resources.#(name=="selfsubjectrulesreviews").namespaced`).Raw == "false", rec.Body.String())
	rec = kubeDo(t, h, http.MethodGet, "/k8s/apis", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	b = gjson.ParseBytes(rec.Body.Bytes())
	ssr := b.Get(`items.#(metadata.name=="authentication.k8s.io").versions.0.resources.0`)
	want(t, ssr.Get("resource").Str == "selfsubjectreviews" && ssr.Get("verbs").Raw == `["create"]` && ssr.Get("scope").Str == "Cluster", ssr.Raw)
	rec = kubeDo(t, h, http.MethodGet, "/k8s/api/v1", "")
	b = gjson.ParseBytes(rec.Body.Bytes())
	st := b.Get(`resources.#(name=="pods/status")`)
	want(t, st.Get("kind").Str == "Pod" && st.Get("verbs").Raw == `["get"]` && st.Get("namespaced").Bool(), "pods/status: "+st.Raw)
	want(t, !b.Get(`resources.#(name=="pods/log")`).Exists(), "no pods/log: kubeindex does not serve it")
}
