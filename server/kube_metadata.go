package server

import (
	"bufio"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeindex/kubeindex/cache"
)

// Metadata-only reads (Accept: application/json;as=PartialObjectMetadata
// for a get or a watch, as=PartialObjectMetadataList for a list;
// g=meta.k8s.io;v=v1), which client-go's metadata client and the
// metadata-only informers of controllers ask for: each object is a
// meta.k8s.io/v1 PartialObjectMetadata holding the stored object's
// metadata, as the API server's asPartialObjectMetadata(List) builds it
// (k8s.io/apiserver pkg/endpoints/handlers/response.go), less the
// managedFields kubeindex strips. A built-in kind's stored metadata is
// what the API server encoded from its ObjectMeta, so it is written as it
// is, sliced from the stored bytes; a custom resource's was encoded from a
// map (members sorted by name), so it is decoded into an ObjectMeta and
// encoded again, in the order the API server writes it.

const metadataPrefix = `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":`

// kubeMetadataFits refuses, as the API server does, a list asked for as
// PartialObjectMetadata and a get or watch asked for as
// PartialObjectMetadataList.
func kubeMetadataFits(media kubeMedia, list bool) error {
	switch {
	case media == kubeMetadata && list:
		return kubeNotAcceptableMessage("you requested PartialObjectMetadata, but the requested object is a list")
	case media == kubeMetadataList && !list:
		return kubeNotAcceptableMessage("you requested PartialObjectMetadataList, but the requested object is not a list")
	}
	return nil
}

// asMetadata writes objects of res as PartialObjectMetadata.
type asMetadata struct{ custom bool }

func metadataOf(res cache.Resource) asMetadata { return asMetadata{custom: isCustomResource(res)} }

func (m asMetadata) size(o *cache.Object) int {
	if m.custom {
		return -1
	}
	return len(metadataPrefix) + len(storedMetadata(o)) + 1
}

func (m asMetadata) write(bw *bufio.Writer, o *cache.Object) {
	bw.Write(m.appendTo(bw.AvailableBuffer(), o))
}

// appendTo appends o's PartialObjectMetadata to b.
func (m asMetadata) appendTo(b []byte, o *cache.Object) []byte {
	b = append(b, metadataPrefix...)
	md := storedMetadata(o)
	if m.custom {
		var om metav1.ObjectMeta
		if err := json.Unmarshal(md, &om); err == nil {
			if enc, err := json.Marshal(&om); err == nil {
				md = enc
			}
		}
	}
	b = append(b, md...)
	return append(b, '}')
}

// storedMetadata is the value of o's metadata, read without joining an
// object held in pieces; {} when it has none.
func storedMetadata(o *cache.Object) []byte {
	if md := o.Metadata(); md != nil {
		return md
	}
	return []byte("{}")
}

// writeKubeMetadata answers a get as PartialObjectMetadata.
func writeKubeMetadata(c echo.Context, res cache.Resource, o *cache.Object) error {
	body := metadataOf(res).appendTo(nil, o)
	c.Response().Header().Set(echo.HeaderContentType, kubeMetadataMediaType)
	c.Response().WriteHeader(http.StatusOK)
	_, err := c.Response().Write(body)
	return err
}

// kubeNotAcceptableMessage is a 406 worded as given.
func kubeNotAcceptableMessage(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotAcceptable,
		Reason: metav1.StatusReasonNotAcceptable, Message: msg}}
}
