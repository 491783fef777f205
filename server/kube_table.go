package server

import (
	"encoding/json"
	"time"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/table"
)

// Table output (Accept: application/json;as=Table;v=v1;g=meta.k8s.io),
// what kubectl get prints: the API server's columns, from internal/table.

// crdResource is how a cache that holds CRDs names them.
const crdResource = "customresourcedefinitions.apiextensions.k8s.io"

// tableRequest is a request's Table: its convertor and options.
type tableRequest struct {
	conv table.Convertor
	opts table.Options
}

// tableFor prepares the Table of a request, or an error worded as the API
// server words a bad includeObject. The columns are convertor's.
func (s *Server) tableFor(c echo.Context, res cache.Resource) (*tableRequest, error) {
	opts, err := table.ParseOptions(c.QueryParams())
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return &tableRequest{conv: s.convertor(res), opts: opts}, nil
}

// build renders objects as a Table with the list's metadata.
func (t *tableRequest) build(objs []*cache.Object, meta metav1.ListMeta) ([]byte, error) {
	raws := make([][]byte, len(objs))
	for i, o := range objs {
		raws[i] = o.Raw()
	}
	return t.buildRaw(raws, meta)
}

// buildRaw renders objects given as JSON.
func (t *tableRequest) buildRaw(raws [][]byte, meta metav1.ListMeta) ([]byte, error) {
	tb, err := table.Build(t.conv, raws, t.opts, time.Now())
	if err != nil {
		return nil, err
	}
	tb.ListMeta = meta
	return json.Marshal(tb)
}

func writeTable(c echo.Context, body []byte) error {
	c.Response().Header().Set(echo.HeaderContentType, kubeTableMediaType)
	c.Response().WriteHeader(200)
	_, err := c.Response().Write(body)
	return err
}
