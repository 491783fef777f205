package server

import (
	"bufio"
	"bytes"
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	restclient "k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

const protoPodJSON = `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-0","namespace":"shop","uid":"8e4b","resourceVersion":"12","creationTimestamp":"2026-01-02T03:04:05Z","labels":{"app":"web"},"annotations":{"a":"b"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web","uid":"77","controller":true}]},"spec":{"containers":[{"name":"c","image":"nginx","resources":{"limits":{"cpu":"500m"}}}],"nodeName":"node-1"},"status":{"phase":"Running","podIP":"10.0.0.1","podIPs":[{"ip":"10.0.0.1"}]}}`

func protoPod(t *testing.T) (*cache.Object, *corev1.Pod) {
	t.Helper()
	o, err := cache.NewObject([]byte(protoPodJSON), "v1", "Pod")
	if err != nil {
		t.Fatal(err)
	}
	typed, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(protoPodJSON), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return o, typed.(*corev1.Pod)
}

// TestProtobufEnvelopes: the envelopes and frames written around the
// cached messages are, byte for byte, what the API server's protobuf
// serializer (and its raw serializer behind the length-delimited framer,
// for watch events) writes for the same typed objects.
func TestProtobufEnvelopes(t *testing.T) {
	o, pod := protoPod(t)
	ser := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	encode := func(obj runtime.Object) []byte {
		var b bytes.Buffer
		if err := ser.Encode(obj, &b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	msg, err := o.Protobuf()
	if err != nil {
		t.Fatal(err)
	}
	env := protoEnvelope{apiVersion: "v1", kind: "Pod"}

	// get
	if got, want := env.appendEnveloped(nil, msg), encode(pod); !bytes.Equal(got, want) || env.size(len(msg)) != len(want) {
		t.Errorf("get:\n got %q\nwant %q", got, want)
	}

	// list, with and without a continuation
	n := int64(7)
	for _, lm := range []metav1.ListMeta{{ResourceVersion: "12"}, {ResourceVersion: "12", Continue: "abc", RemainingItemCount: &n}} {
		rec := httptest.NewRecorder()
		if err := writeKubeProtoList(rec, protoEnvelope{apiVersion: "v1", kind: "PodList"}, lm, []*cache.Object{o, o}, kubeProtoMessages{}); err != nil {
			t.Fatal(err)
		}
		want := encode(&corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, ListMeta: lm, Items: []corev1.Pod{*pod, *pod}})
		if !bytes.Equal(rec.Body.Bytes(), want) || rec.Header().Get("Content-Length") != strconv.Itoa(len(want)) {
			t.Errorf("list %+v:\n got %q\nwant %q", lm, rec.Body.Bytes(), want)
		}
	}
	empty := httptest.NewRecorder()
	if err := writeKubeProtoList(empty, protoEnvelope{apiVersion: "v1", kind: "PodList"}, metav1.ListMeta{ResourceVersion: "3"}, nil, kubeProtoMessages{}); err != nil {
		t.Fatal(err)
	}
	if want := encode(&corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, ListMeta: metav1.ListMeta{ResourceVersion: "3"}}); !bytes.Equal(empty.Body.Bytes(), want) {
		t.Errorf("empty list:\n got %q\nwant %q", empty.Body.Bytes(), want)
	}

	// watch events: the API server's watch encoder
	var want bytes.Buffer
	enc := streaming.NewEncoder(protobuf.LengthDelimitedFramer.NewFrameWriter(&want), protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme))
	var got bytes.Buffer
	bw := bufio.NewWriter(&got)
	for _, typ := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted} {
		if err := enc.Encode(&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: encode(pod)}}); err != nil {
			t.Fatal(err)
		}
		if err := writeProtoEvent(bw, string(typ), env, msg); err != nil {
			t.Fatal(err)
		}
	}
	st := metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 1 (5)"}
	enc.Encode(&metav1.WatchEvent{Type: "ERROR", Object: runtime.RawExtension{Raw: encode(&metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status: st.Status, Code: st.Code, Reason: st.Reason, Message: st.Message})}})
	stMsg, _ := st.Marshal()
	writeProtoEvent(bw, "ERROR", protoStatusEnvelope, stMsg)
	bm := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{ResourceVersion: "20",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	enc.Encode(&metav1.WatchEvent{Type: "BOOKMARK", Object: runtime.RawExtension{Raw: encode(bm)}})
	bmMsg, err := protoBookmark(env, "20", true)
	if err != nil {
		t.Fatal(err)
	}
	writeProtoEvent(bw, "BOOKMARK", env, bmMsg)
	bw.Flush()
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Errorf("watch:\n got %q\nwant %q", got.Bytes(), want.Bytes())
	}
}

// TestProtobufMessages: the cached messages decode to what the stored JSON
// decodes to, for the object and for its PartialObjectMetadata; they are
// made once per object and shared.
func TestProtobufMessages(t *testing.T) {
	o, pod := protoPod(t)
	msg, err := o.Protobuf()
	if err != nil {
		t.Fatal(err)
	}
	var back corev1.Pod
	if err := back.Unmarshal(msg); err != nil {
		t.Fatal(err)
	}
	pod.TypeMeta = metav1.TypeMeta{}
	if !equality.Semantic.DeepEqual(&back, pod) {
		t.Errorf("decoded %+v\nwant %+v", back, pod)
	}
	if again, _ := o.Protobuf(); &again[0] != &msg[0] {
		t.Error("the message was made twice")
	}
	md, err := o.ProtobufMetadata()
	if err != nil {
		t.Fatal(err)
	}
	var pom metav1.PartialObjectMetadata
	if err := pom.Unmarshal(md); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(pom.ObjectMeta, pod.ObjectMeta) {
		t.Errorf("metadata %+v\nwant %+v", pom.ObjectMeta, pod.ObjectMeta)
	}
	if !cache.ProtobufKind("v1", "Pod") || !cache.ProtobufKind("apps/v1", "Deployment") || cache.ProtobufKind("example.com/v1", "Gizmo") {
		t.Error("ProtobufKind")
	}
}

// TestKubeProtobufClient: a typed client-go client configured for
// protobuf, as kube-controller-manager configures one, gets the same
// objects from /k8s as a JSON one, in get, list and watch, and the answers
// are protobuf.
func TestKubeProtobufClient(t *testing.T) {
	f := cachetest.Start(t, cachetest.DefaultSpecs()...)
	srv := httptest.NewServer(New(withSubresources{f.Cache}, Options{Logger: quiet()}).Handler())
	t.Cleanup(srv.Close)
	ctx := context.Background()
	// JSON said explicitly: recent client-go prefers protobuf by default.
	jsonClient := kubernetes.NewForConfigOrDie(&restclient.Config{Host: srv.URL + "/k8s",
		ContentConfig: restclient.ContentConfig{ContentType: runtime.ContentTypeJSON, AcceptContentTypes: runtime.ContentTypeJSON}})
	protoClient := kubernetes.NewForConfigOrDie(&restclient.Config{Host: srv.URL + "/k8s",
		ContentConfig: restclient.ContentConfig{ContentType: runtime.ContentTypeProtobuf,
			AcceptContentTypes: runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON}})

	pl, err := protoClient.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	jl, err := jsonClient.CoreV1().Pods("").List(ctx, metav1.ListOptions{ResourceVersion: pl.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Items) == 0 || !equality.Semantic.DeepEqual(pl.Items, jl.Items) || pl.ResourceVersion != jl.ResourceVersion {
		t.Errorf("protobuf list of %d pods differs from the JSON list of %d", len(pl.Items), len(jl.Items))
	}
	pod := aPod(t, f.Cache)
	pg, err := protoClient.CoreV1().Pods(pod.Namespace()).Get(ctx, pod.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	jg, _ := jsonClient.CoreV1().Pods(pod.Namespace()).Get(ctx, pod.Name(), metav1.GetOptions{})
	if !equality.Semantic.DeepEqual(pg, jg) {
		t.Errorf("get: %+v\nwant %+v", pg, jg)
	}
	deps, err := jsonClient.AppsV1().Deployments("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || len(deps.Items) == 0 {
		t.Fatal("no deployment", err)
	}
	d := deps.Items[0]
	ps, err := protoClient.AppsV1().Deployments(d.Namespace).GetScale(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	js, err := jsonClient.AppsV1().Deployments(d.Namespace).GetScale(ctx, d.Name, metav1.GetOptions{})
	if err != nil || !equality.Semantic.DeepEqual(ps, js) || ps.Name != d.Name {
		t.Errorf("scale: %+v\nwant %+v", ps, js)
	}
	rec := kubeDo(t, srv.Config.Handler, "GET", "/k8s/apis/apps/v1/namespaces/"+d.Namespace+"/deployments/"+d.Name+"/status", "application/vnd.kubernetes.protobuf")
	if rec.Code != 200 || rec.Header().Get("Content-Type") != kubeProtobufMediaType {
		t.Errorf("status: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	nodes, err := protoClient.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || len(nodes.Items) != 1 || nodes.Continue == "" || nodes.RemainingItemCount == nil {
		t.Errorf("a page of nodes: %v %+v", err, nodes.ListMeta)
	}

	w, err := protoClient.CoreV1().Pods("kube-system").Watch(ctx, metav1.ListOptions{ResourceVersion: pl.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	applyPod(t, f, "kube-system", "proto-1", "node-1", map[string]string{"app": "proto"})
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				t.Fatalf("event %s %T", ev.Type, ev.Object)
			}
			if p.Name != "proto-1" {
				continue
			}
			if ev.Type != watch.Added || p.Labels["app"] != "proto" || p.Spec.NodeName != "node-1" {
				t.Errorf("event %s %+v", ev.Type, p)
			}
			return
		case <-deadline:
			t.Fatal("no event for the new pod")
		}
	}
}

// TestKubeProtobufNegotiation: what is answered in protobuf, and what not.
func TestKubeProtobufNegotiation(t *testing.T) {
	f, srv := startKube(t)
	h := srv.Config.Handler
	pod := aPod(t, f.Cache)
	get := "/k8s/api/v1/namespaces/" + pod.Namespace() + "/pods/" + pod.Name()
	for _, c := range []struct {
		target, accept string
		code           int
		contentType    string
	}{
		{get, "application/vnd.kubernetes.protobuf", 200, kubeProtobufMediaType},
		{get, "application/vnd.kubernetes.protobuf, application/json", 200, kubeProtobufMediaType},
		{get, "application/json, application/vnd.kubernetes.protobuf", 200, "application/json"},
		{get, "application/vnd.kubernetes.protobuf;q=0.5, application/json", 200, "application/json"},
		{get, "application/vnd.kubernetes.protobuf;stream=other", 406, ""},
		{get, "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", 200, kubeProtobufMediaType},
		{"/k8s/api/v1/pods", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", 200, kubeProtobufMediaType},
		{"/k8s/api/v1/pods", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", 406, ""},
		// a Table is JSON only, as on the API server
		{"/k8s/api/v1/pods", "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1", 406, ""},
		{"/k8s/api/v1/pods", "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1, application/json", 200, "application/json"},
	} {
		rec := kubeDo(t, h, "GET", c.target, c.accept)
		if rec.Code != c.code || c.contentType != "" && rec.Header().Get("Content-Type") != c.contentType {
			t.Errorf("%s as %q: %d %q %s", c.target, c.accept, rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
		}
		if c.code == 200 && c.contentType == kubeProtobufMediaType && !strings.HasPrefix(rec.Body.String(), protoMagic) {
			t.Errorf("%s as %q: not protobuf: %q", c.target, c.accept, rec.Body.String())
		}
	}
	// Errors in protobuf for a client that prefers it, as the API server
	// negotiates a Status.
	for _, target := range []string{"/k8s/apis", "/k8s/api/v1/namespaces/kube-system/pods/no-such-pod"} {
		rec := kubeDo(t, h, "GET", target, "application/vnd.kubernetes.protobuf")
		var st metav1.Status
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(rec.Body.Bytes(), nil, &st)
		if err != nil || rec.Header().Get("Content-Type") != kubeProtobufMediaType || obj.(*metav1.Status).Code != int32(rec.Code) || rec.Code < 400 {
			t.Errorf("%s: %d %q %v %+v", target, rec.Code, rec.Header().Get("Content-Type"), err, obj)
		}
	}
	var pom metav1.PartialObjectMetadata
	rec := kubeDo(t, h, "GET", get, "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(rec.Body.Bytes(), nil, &pom)
	if err != nil || obj.(*metav1.PartialObjectMetadata).Name != pod.Name() {
		t.Errorf("metadata: %v %+v", err, obj)
	}
}
