package server

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/auth/authtest"
	"github.com/kubeindex/kubeindex/cache"
)

// TestClientGoOverVerifiedTLS: client-go, with the CA in its
// configuration and verification on (as a kubeconfig gives it), lists
// and watches through /k8s with a client certificate as its identity;
// without the CA it refuses the server, and with a certificate RBAC
// grants nothing it is refused.
func TestClientGoOverVerifiedTLS(t *testing.T) {
	api := authtest.New(t, authUsers, authRules()...)
	ar, _ := auth.NewAccessReviewerForConfig(api.Config(), auth.AccessReviewOptions{})
	e := startTLS(t, Options{Auth: AuthOptions{Authorizer: ar}})
	config := func(ca []byte, cn string, orgs ...string) *restclient.Config {
		crt, key, _ := e.ca.issue(t, false, cn, orgs...)
		return &restclient.Config{Host: "https://" + e.addr + "/k8s",
			TLSClientConfig: restclient.TLSClientConfig{CAData: ca, CertData: crt, KeyData: key}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	admin := kubernetes.NewForConfigOrDie(config(e.ca.pem, "carol", "admins"))
	factory := informers.NewSharedInformerFactory(admin, 0)
	inf := factory.Core().V1().Pods().Informer()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer over verified TLS did not sync")
	}
	followsTheCache(t, e.f, inf.GetStore(), cache.ListQuery{})

	unverified := kubernetes.NewForConfigOrDie(config(nil, "carol", "admins"))
	if _, err := unverified.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("without the CA: %v; expect the server's certificate refused", err)
	}
	nobody := kubernetes.NewForConfigOrDie(config(e.ca.pem, "nobody"))
	if _, err := nobody.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("a certificate RBAC grants nothing: %v; expect forbidden", err)
	}
}
