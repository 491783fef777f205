package cache

import (
	"fmt"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	sigsjson "sigs.k8s.io/json"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// Protobuf encodings of cached objects, for clients that ask for
// application/vnd.kubernetes.protobuf. Objects are held as JSON; the
// protobuf of a version is made from it at the first reader that asks
// (decoded into the kind's client-go type, then marshalled by the type's
// generated code, as the API server marshals it) and kept with that
// version, so every reader that asks shares one encoding, and the next
// version drops it with the old one. Nothing is made while nobody asks.
//
// What is kept is the message of the object alone (Pod.Marshal()), without
// the runtime.Unknown envelope the API server's serializer puts around a
// whole answer: the same bytes are an item of a list, the object of a get
// and the object of a watch event, each enveloped by the writer.

// keptProto are an object's protobuf encodings, each made once.
type keptProto struct {
	object, metadata keptBytes
}

type keptBytes struct {
	once sync.Once
	b    []byte
	err  error
}

func (k *keptBytes) get(build func() ([]byte, error)) ([]byte, error) {
	k.once.Do(func() { k.b, k.err = build() })
	return k.b, k.err
}

func (o *Object) kept() *keptProto {
	if k := o.proto.Load(); k != nil {
		return k
	}
	o.proto.CompareAndSwap(nil, &keptProto{})
	return o.proto.Load()
}

// Protobuf returns the object's protobuf message (its kind's generated
// Marshal), made once per object and shared. The caller must not modify
// it. Only kinds ProtobufKind accepts have one. Safe for concurrent use.
func (o *Object) Protobuf() ([]byte, error) {
	return o.kept().object.get(func() ([]byte, error) { return marshalProtobuf(o.flat()) })
}

// ProtobufMetadata returns the protobuf message of the object's
// meta.k8s.io/v1 PartialObjectMetadata (its metadata only), made once per
// object and shared; for any kind. Safe for concurrent use.
func (o *Object) ProtobufMetadata() ([]byte, error) {
	return o.kept().metadata.get(func() ([]byte, error) {
		var m metav1.PartialObjectMetadata
		if md := o.doc("metadata").Raw; md != nil {
			if err := sigsjson.UnmarshalCaseSensitivePreserveInts(md, &m.ObjectMeta); err != nil {
				return nil, fmt.Errorf("metadata of %s: %w", o.Key(), err)
			}
		}
		return m.Marshal()
	})
}

// protoMarshaler is what the generated code of every built-in kind has.
type protoMarshaler interface {
	runtime.Object
	Marshal() ([]byte, error)
}

// protoDecoder decodes JSON into client-go's types as they are: no
// defaulting, no conversion (the bytes are the API server's output). It is
// the reference decodeTyped answers as, and its fallback.
var protoDecoder = scheme.Codecs.UniversalDeserializer()

// MarshalProtobuf returns the protobuf message of a built-in kind's JSON
// (with its kind and apiVersion), made as Protobuf makes it, not kept.
func MarshalProtobuf(raw []byte) ([]byte, error) { return marshalProtobuf(raw) }

func marshalProtobuf(raw []byte) ([]byte, error) {
	obj, err := decodeTyped(raw)
	if err != nil {
		return nil, err
	}
	m, ok := obj.(protoMarshaler)
	if !ok {
		return nil, fmt.Errorf("%s has no protobuf encoding", obj.GetObjectKind().GroupVersionKind())
	}
	return m.Marshal()
}

// decodeTyped decodes a built-in kind's JSON into its client-go type as
// protoDecoder does, in a fraction of its time: the kind is read from the
// object's own apiVersion and kind (protoDecoder decodes the whole document
// once more to find them), and the JSON is decoded by go-json-experiment's
// decoder, which matches member names case-sensitively as
// sigs.k8s.io/json does, ignores unknown members and calls the types' own
// UnmarshalJSON (times, quantities, int-or-strings). Where the two could
// differ it refuses rather than guesses (duplicate names, invalid UTF-8,
// anything else it rejects), and the object is decoded by protoDecoder:
// what decodeTyped returns is always what protoDecoder returns
// (TestDecodeTypedAsTheLibrary, FuzzDecodeTyped).
func decodeTyped(raw []byte) (runtime.Object, error) {
	if obj, ok := decodeFast(raw); ok {
		return obj, nil
	}
	obj, _, err := protoDecoder.Decode(raw, nil, nil)
	return obj, err
}

// decodeFast is decodeTyped's fast path; false when it declines.
func decodeFast(raw []byte) (runtime.Object, bool) {
	apiVersion, err := jsonscan.String(jsonscan.Member(raw, "apiVersion"))
	if err != nil {
		return nil, false
	}
	kind, err := jsonscan.String(jsonscan.Member(raw, "kind"))
	if err != nil || kind == "" {
		return nil, false
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, false
	}
	obj, err := scheme.Scheme.New(gv.WithKind(kind))
	if err != nil {
		return nil, false
	}
	if err := jsonv2.Unmarshal(raw, obj); err != nil {
		return nil, false
	}
	return obj, true
}

// ProtobufKind reports whether objects of apiVersion and kind have a
// protobuf encoding: the kinds client-go's scheme holds (the built-in
// kinds; not custom resources, which the API server serves as JSON only).
func ProtobufKind(apiVersion, kind string) bool {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return false
	}
	obj, err := scheme.Scheme.New(gv.WithKind(kind))
	if err != nil {
		return false
	}
	_, ok := obj.(protoMarshaler)
	return ok
}
