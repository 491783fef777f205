package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// authorizedFleet is a second kubeindex over the fleet, with --auth=token
// --authz=rbac: each cluster decides by SubjectAccessReview against its
// own API server what the token file's users may read.
type authorizedFleet struct {
	k *kubeindex
}

// fleetReaders is the group the token file's users are in, allowed to
// read pods and namespaces in every cluster of the fleet.
const fleetReaders = "fleet-readers"

// startAuthorized lets fleetReaders read pods and namespaces in every
// member and starts a kubeindex over them with authorization on; it
// returns once ann has listed pods and namespaces across clusters (her
// decisions are then cached in each cluster).
func (f *fleetE2E) startAuthorized(t *testing.T) *authorizedFleet {
	t.Helper()
	ctx := t.Context()
	for _, m := range f.members {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "fleet-readers"},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods", "namespaces"}}}}
		if _, err := m.cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "fleet-readers"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: fleetReaders}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}}
		if _, err := m.cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	tokens := writeFile(t, "fleet-readers.csv", fmt.Sprintf("ann-token,ann,2001,%q\nben-token,ben,2002,%q\ncat-token,cat,2003,%q\n",
		fleetReaders, fleetReaders, fleetReaders))
	args := []string{"--resources", "pods,namespaces", "--auth=token", "--token-file", tokens, "--authz=rbac",
		"--stale-after", fleetStaleAfter.String(), "--watch-idle-timeout", fleetIdle.String()}
	for _, m := range f.members {
		args = append(args, "--cluster", "name="+m.name+",kubeconfig="+m.kubeconfig)
	}
	a := &authorizedFleet{k: startKubeindex(t, args...)}
	eventually(t, converge, "ann reads every cluster's pods across clusters", func() error {
		for _, path := range []string{"/api/v1/pods?limit=1", "/api/v1/namespaces?limit=1"} {
			var page struct{ Clusters []fleetSlot }
			if code, err := a.getJSON(path, "ann-token", &page); err != nil || code != 200 {
				return fmt.Errorf("%s: %d %v", path, code, err)
			}
			for _, s := range page.Clusters {
				if s.Status != 200 {
					return fmt.Errorf("%s: %s's slot %+v", path, s.Cluster, s)
				}
			}
		}
		return nil
	})
	return a
}

// waitState waits until this kubeindex reports the cluster in state.
func (a *authorizedFleet) waitState(t *testing.T, name, state string) {
	t.Helper()
	eventually(t, converge, name+" "+state+" with authorization on", func() error {
		var fs fleetState
		if code, err := a.getJSON("/api/v1/clusters", "ann-token", &fs); err != nil || code != 200 {
			return fmt.Errorf("%d %v", code, err)
		}
		for _, c := range fs.Clusters {
			if c.Name == name && c.State == state {
				return nil
			}
		}
		return fmt.Errorf("%+v", fs.Clusters)
	})
}

// getJSON GETs path as the token's user and decodes the answer.
func (a *authorizedFleet) getJSON(path, token string, out any) (int, error) {
	req, err := http.NewRequest("GET", a.k.URL+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return resp.StatusCode, fmt.Errorf("GET %s: %d %.200s: %w", path, resp.StatusCode, body, err)
	}
	return resp.StatusCode, nil
}

// whileHung asks, as user (token), a list of pods, a list of namespaces
// and pod counts across clusters while hung's API server does not answer:
// each answers with the other clusters' parts and hung's slot either its
// part from a decision cached before (cached true: ann) or a 503 saying
// that authorization could not be asked (a caller it never decided
// about; once hung is stale, without asking its API server). The latencies are logged beside a request under a healthy
// cluster's prefix, never asserted.
func (a *authorizedFleet) whileHung(t *testing.T, f *fleetE2E, hung, user string, cached bool, when string) {
	t.Helper()
	token := user + "-token"
	var took []string
	for _, path := range []string{"/api/v1/pods?limit=500", "/api/v1/namespaces?limit=500", "/api/v1/resources/pods/counts?groupBy=cluster"} {
		var body struct {
			Items []struct {
				Cluster string `json:"cluster"`
			}
			Clusters []fleetSlot
		}
		began := time.Now()
		code, err := a.getJSON(path, token, &body)
		took = append(took, fmt.Sprintf("%s %v", path, time.Since(began).Round(time.Millisecond)))
		if err != nil || code != 200 || len(body.Clusters) != len(f.members) {
			t.Errorf("%s, %s: GET %s: %d %v %+v; expect 200 with a slot per cluster", user, when, path, code, err, body.Clusters)
			continue
		}
		for _, s := range body.Clusters {
			switch {
			case s.Cluster != hung && s.Status != 200:
				t.Errorf("%s, %s: GET %s: healthy %s's slot %+v; expect its part", user, when, path, s.Cluster, s)
			case s.Cluster == hung && cached && s.Status != 200:
				t.Errorf("%s, %s: GET %s: %s's slot %+v; expect its part, from the decision cached before", user, when, path, s.Cluster, s)
			case s.Cluster == hung && !cached && (s.Status != 503 || !strings.Contains(s.Reason, "authorization could not be asked")):
				t.Errorf("%s, %s: GET %s: %s's slot %+v; expect a 503 saying authorization could not be asked", user, when, path, s.Cluster, s)
			case s.Cluster == hung && !cached && when == "stale" && !strings.Contains(s.Reason, "no decision for this caller is cached"):
				t.Errorf("%s, %s: GET %s: %s's slot %+v; expect, %s is stale, its API server not asked", user, when, path, s.Cluster, s, hung)
			case s.Cluster == hung:
				t.Logf("%s, %s: GET %s: %s's slot %+v", user, when, path, s.Cluster, s)
			}
		}
		per := map[string]int{}
		for _, it := range body.Items {
			per[it.Cluster]++
		}
		if !strings.Contains(path, "counts") && (per[hung] > 0) != cached {
			t.Errorf("%s, %s: GET %s: items per cluster %v", user, when, path, per)
		}
	}
	healthy := f.others(hung)[0].name
	began := time.Now()
	var list struct{ Kind string }
	if code, err := a.getJSON("/clusters/"+healthy+"/api/v1/pods?limit=1", token, &list); err != nil || code != 200 {
		t.Errorf("%s, %s: under %s's prefix: %d %v", user, when, healthy, code, err)
	}
	t.Logf("%s, %s, authorization on: across clusters %s; under %s's prefix %v (one request each, under the machine's load; not asserted)",
		user, when, strings.Join(took, ", "), healthy, time.Since(began).Round(time.Millisecond))
}
