package server

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kubeindex/kubeindex/cache"
)

// Protobuf answers (Accept: application/vnd.kubernetes.protobuf), as the
// API server's protobuf serializer writes them
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf):
//
//   - a get: the magic "k8s\x00", then a runtime.Unknown holding the
//     TypeMeta and the object's message as Raw (ContentEncoding and
//     ContentType empty);
//   - a list: the same envelope around the list's message: its ListMeta
//     (field 1) and each item's message (field 2), streamed as the
//     serializer's StreamingCollectionsEncoding streams it;
//   - a watch (Content-Type …;stream=watch): each event a metav1.WatchEvent
//     message, unenveloped (the raw serializer), behind a 4-byte big-endian
//     length (the length-delimited framer), whose object is enveloped as a
//     get's.
//
// The objects' messages come from the cache, made once per object version
// and shared (cache.Object.Protobuf); this file only writes the envelopes
// and frames around them, without copying the messages, which is why it
// writes the few enclosing fields itself rather than through each
// envelope's generated Marshal. TestProtobufEnvelopes holds them equal to
// the library's output.

const (
	kubeProtobufMediaType      = runtime.ContentTypeProtobuf
	kubeProtobufWatchMediaType = kubeProtobufMediaType + ";stream=watch"
)

// protoMagic begins every enveloped protobuf message.
const protoMagic = "k8s\x00"

// protoUnknownTail are runtime.Unknown's ContentEncoding (3) and
// ContentType (4), empty: its generated Marshal writes them always.
const protoUnknownTail = "\x1a\x00\x22\x00"

// protoEnvelope is the enveloped form of one message of a kind.
type protoEnvelope struct{ apiVersion, kind string }

// typeMetaSize is the size of the envelope's TypeMeta message.
func (e protoEnvelope) typeMetaSize() int {
	return 1 + protowire.SizeBytes(len(e.apiVersion)) + 1 + protowire.SizeBytes(len(e.kind))
}

// size is the size of the enveloped message of size n.
func (e protoEnvelope) size(n int) int {
	return len(protoMagic) + 1 + protowire.SizeBytes(e.typeMetaSize()) + 1 + protowire.SizeBytes(n) + len(protoUnknownTail)
}

// appendHead appends what comes before a message of size n; the message
// and protoUnknownTail follow.
func (e protoEnvelope) appendHead(b []byte, n int) []byte {
	b = append(b, protoMagic...)
	b = protowire.AppendTag(b, 1, protowire.BytesType) // TypeMeta
	b = protowire.AppendVarint(b, uint64(e.typeMetaSize()))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, e.apiVersion)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, e.kind)
	b = protowire.AppendTag(b, 2, protowire.BytesType) // Raw
	return protowire.AppendVarint(b, uint64(n))
}

// appendEnveloped appends the enveloped message msg.
func (e protoEnvelope) appendEnveloped(b, msg []byte) []byte {
	b = e.appendHead(b, len(msg))
	b = append(b, msg...)
	return append(b, protoUnknownTail...)
}

// kubeProtoMessages reads the messages of objects: each object's own, or
// its PartialObjectMetadata's.
type kubeProtoMessages struct {
	metadata bool
}

func (k kubeProtoMessages) of(o *cache.Object) ([]byte, error) {
	if k.metadata {
		return o.ProtobufMetadata()
	}
	return o.Protobuf()
}

// envelope is how an object of res is enveloped (a get, a watch event).
func (k kubeProtoMessages) envelope(res cache.Resource) protoEnvelope {
	if k.metadata {
		return protoEnvelope{apiVersion: "meta.k8s.io/v1", kind: "PartialObjectMetadata"}
	}
	return protoEnvelope{apiVersion: res.APIVersion(), kind: res.Kind}
}

// listEnvelope is how a list of res is enveloped.
func (k kubeProtoMessages) listEnvelope(res cache.Resource) protoEnvelope {
	if k.metadata {
		return protoEnvelope{apiVersion: "meta.k8s.io/v1", kind: "PartialObjectMetadataList"}
	}
	return protoEnvelope{apiVersion: res.APIVersion(), kind: res.Kind + "List"}
}

// writeKubeProtoGet answers a get with the object's enveloped message.
func writeKubeProtoGet(w http.ResponseWriter, env protoEnvelope, msg []byte) error {
	body := env.appendEnveloped(make([]byte, 0, env.size(len(msg))), msg)
	h := w.Header()
	h.Set("Content-Type", kubeProtobufMediaType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(body)
	return err
}

// writeKubeProtoList answers a list: every item's message is read (made,
// when no reader has asked before) before anything is written, so that a
// failure is an error answer, not a truncated list.
func writeKubeProtoList(w http.ResponseWriter, env protoEnvelope, lm metav1.ListMeta, items []*cache.Object, msgs kubeProtoMessages) error {
	listMeta, err := lm.Marshal()
	if err != nil {
		return err
	}
	bodies := make([][]byte, len(items))
	n := 1 + protowire.SizeBytes(len(listMeta))
	for i, o := range items {
		if bodies[i], err = msgs.of(o); err != nil {
			return fmt.Errorf("protobuf of %s: %w", o.Key(), err)
		}
		n += 1 + protowire.SizeBytes(len(bodies[i]))
	}
	h := w.Header()
	h.Set("Content-Type", kubeProtobufMediaType)
	h.Set("Content-Length", strconv.Itoa(env.size(n)))
	w.WriteHeader(http.StatusOK)

	bw := envelopeBuffers.Get().(*bufio.Writer)
	defer envelopeBuffers.Put(bw)
	bw.Reset(w)
	defer bw.Reset(nil) // the pool keeps no response writer
	b := env.appendHead(bw.AvailableBuffer(), n)
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, listMeta)
	bw.Write(b)
	for _, body := range bodies {
		b = protowire.AppendTag(bw.AvailableBuffer(), 2, protowire.BytesType)
		bw.Write(protowire.AppendVarint(b, uint64(len(body))))
		bw.Write(body)
	}
	bw.WriteString(protoUnknownTail)
	return bw.Flush()
}

// writeProtoEvent writes one watch event: its frame's length, then the
// WatchEvent with the enveloped message msg as its object.
func writeProtoEvent(bw *bufio.Writer, typ string, env protoEnvelope, msg []byte) error {
	e := env.size(len(msg))                                               // the enveloped object
	raw := 1 + protowire.SizeBytes(e)                                     // RawExtension{Raw}
	n := 1 + protowire.SizeBytes(len(typ)) + 1 + protowire.SizeBytes(raw) // WatchEvent
	b := binary.BigEndian.AppendUint32(bw.AvailableBuffer(), uint32(n))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, typ)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(raw))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(e))
	bw.Write(env.appendHead(b, len(msg)))
	bw.Write(msg)
	_, err := bw.WriteString(protoUnknownTail)
	return err
}

// protoBookmark is the message of a BOOKMARK's object: an empty object
// of the kind with only its resourceVersion (and the end-of-initial-events
// annotation), as the watch cache sends it.
func protoBookmark(env protoEnvelope, rv string, initialEnd bool) ([]byte, error) {
	gv, err := schema.ParseGroupVersion(env.apiVersion)
	if err != nil {
		return nil, err
	}
	var obj runtime.Object = &metav1.PartialObjectMetadata{}
	if gv != metav1.SchemeGroupVersion {
		if obj, err = scheme.Scheme.New(gv.WithKind(env.kind)); err != nil {
			return nil, err
		}
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	acc.SetResourceVersion(rv)
	if initialEnd {
		acc.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	}
	m, ok := obj.(interface{ Marshal() ([]byte, error) })
	if !ok {
		return nil, fmt.Errorf("%s has no protobuf encoding", gv.WithKind(env.kind))
	}
	return m.Marshal()
}

// kubeProtoOf is which protobuf answers res has: a built-in kind client-go
// knows has all, any other resource the metadata forms only.
func kubeProtoOf(res cache.Resource) kubeProto {
	if !isCustomResource(res) && cache.ProtobufKind(res.APIVersion(), res.Kind) {
		return kubeProtoAll
	}
	return kubeProtoMetadata
}

// protoStatusEnvelope envelopes a Status in a watch's ERROR event.
var protoStatusEnvelope = protoEnvelope{apiVersion: "v1", kind: "Status"}

// errorAsProtobuf reports whether an error is answered in protobuf: the
// API server negotiates a Status as any object without a conversion, so
// a client that prefers protobuf (for a get of a custom resource too,
// which it then refuses with a 406) reads its error in protobuf.
func errorAsProtobuf(req *http.Request) bool {
	for _, r := range parseAccept(strings.Join(req.Header.Values("Accept"), ",")) {
		switch {
		case r.json():
			return false
		case r.protobuf() && r.params["as"] == "":
			return true
		}
	}
	return false
}
