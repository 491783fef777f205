package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/text"
)

// clientMessage is what a client sends on the multiplexed socket:
//
//	{"op":"subscribe","id":"t1","resource":"pods","namespace":"ns","labelSelector":"app=web",
//	 "index":"node","value":"node-1","resourceVersion":"123","snapshot":true,"diff":"merge"}
//	{"op":"subscribe","id":"a1","resource":"ip:watch","kinds":"pods,nodes","node":"node-1","resourceVersion":"…"}
//	{"op":"unsubscribe","id":"t1"}
//
// The resource cache.AddressStream is the address stream (stream_ip.go),
// whose own fields are kinds and node.
type clientMessage struct {
	Op              string `json:"op"`
	ID              string `json:"id"`
	Resource        string `json:"resource"`
	Namespace       string `json:"namespace"`
	LabelSelector   string `json:"labelSelector"`
	Index           string `json:"index"`
	Value           string `json:"value"`
	ResourceVersion string `json:"resourceVersion"`
	Snapshot        *bool  `json:"snapshot"`
	Diff            string `json:"diff"`
	Kinds           string `json:"kinds"`
	Node            string `json:"node"`
	Cluster         string `json:"cluster"` // on a fleet's front: the clusters, comma-separated
	windowFields           // op "window" and "scroll" (ws_window.go)
}

const maxIDBytes = 128

var messageFields = append([]string{"op", "id", "resource", "namespace", "labelSelector", "index", "value", "resourceVersion", "snapshot", "diff", "kinds", "node", "cluster"}, windowFieldNames...)

// unknownKey returns a member name that is not exactly one of
// messageFields: encoding/json matches names without regard to case, so a
// misspelt "labelselector" would otherwise be taken for labelSelector.
func unknownKey(data []byte) (key string) {
	gjson.ParseBytes(data).ForEach(func(k, _ gjson.Result) bool {
		if !slices.Contains(messageFields, k.Str) {
			key = k.Str
			return false
		}
		return true
	})
	return key
}

// parseClientMessage decodes and validates one client message. On error it
// still returns the message's id when one could be read, so the ERROR can
// be tagged with it.
func parseClientMessage(data []byte) (clientMessage, error) {
	var m clientMessage
	if !utf8.Valid(data) {
		// encoding/json would quietly turn the bad bytes into U+FFFD.
		return m, fmt.Errorf("%w: a message must be valid UTF-8 (RFC 6455 text)", errBadRequest)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		m = clientMessage{}
		if id := gjson.GetBytes(data, "id"); gjson.ValidBytes(data) && id.Type == gjson.String && validID(id.Str) {
			m.ID = id.Str
		}
		return m, fmt.Errorf("%w: not a valid message: %v", errBadRequest, describeJSONError(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return m, fmt.Errorf("%w: one JSON object per message", errBadRequest)
	}
	if k := unknownKey(data); k != "" {
		return m, fmt.Errorf("%w: unknown field %q (fields: %s)", errBadRequest, text.Truncate(k, 64), strings.Join(messageFields, ", "))
	}
	if !validID(m.ID) {
		id := m.ID
		m.ID = ""
		return m, fmt.Errorf("%w: id must be a non-empty string of at most %d bytes, got %q", errBadRequest, maxIDBytes, text.Truncate(id, maxIDBytes))
	}
	switch m.Op {
	case "subscribe":
		if m.Resource == "" {
			return m, fmt.Errorf("%w: subscribe needs a resource", errBadRequest)
		}
		if m.windowFields.given() {
			return m, fmt.Errorf("%w: %s are fields of a window (op \"window\")", errBadRequest, strings.Join(windowFieldNames, ", "))
		}
		return m, m.checkStreamFields()
	case "window":
		return m, m.checkWindow()
	case "scroll":
		return m, m.checkScroll()
	case "unsubscribe":
		if !reflect.DeepEqual(m, clientMessage{Op: m.Op, ID: m.ID}) {
			return m, fmt.Errorf("%w: unsubscribe takes only op and id", errBadRequest)
		}
		return m, nil
	}
	return m, fmt.Errorf("%w: op must be \"subscribe\", \"unsubscribe\", \"window\" or \"scroll\", got %q", errBadRequest, text.Truncate(m.Op, 64))
}

func (m *clientMessage) watchQuery() (cache.WatchQuery, error) {
	snapshot := ""
	if m.Snapshot != nil {
		snapshot = fmt.Sprint(*m.Snapshot)
	}
	return watchQuery(m.Namespace, m.LabelSelector, m.Index, m.Value, m.ResourceVersion, snapshot, m.Diff)
}

// checkStreamFields refuses the fields of the other kind of stream: a
// resource's filters on the address stream, kinds and node on a resource.
func (m *clientMessage) checkStreamFields() error {
	if m.Resource != cache.AddressStream {
		if m.Kinds != "" || m.Node != "" {
			return fmt.Errorf("%w: kinds and node are fields of the address stream (resource %q)", errBadRequest, cache.AddressStream)
		}
		_, err := m.watchQuery()
		return err
	}
	if m.Namespace != "" || m.LabelSelector != "" || m.Index != "" || m.Value != "" || m.Snapshot != nil || m.Diff != "" {
		return fmt.Errorf("%w: the address stream (resource %q) takes kinds, node and resourceVersion, "+
			"not namespace, labelSelector, index, value, snapshot or diff", errBadRequest, cache.AddressStream)
	}
	return nil
}

func validID(id string) bool { return id != "" && len(id) <= maxIDBytes && utf8.ValidString(id) }

// describeJSONError keeps decoder errors short and free of Go type names.
func describeJSONError(err error) string {
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr):
		return fmt.Sprintf("field %q has the wrong type (%s)", strings.TrimPrefix(typeErr.Field, "windowFields."), typeErr.Value)
	case errors.Is(err, io.EOF):
		return "empty message"
	}
	return text.Truncate(err.Error(), 200)
}

// errorMessage encodes {"type":"ERROR",...}, tagged with id when there is
// one, with the message, reason and code the HTTP API would give err.
func errorMessage(id string, err error) []byte {
	st := errorStatus(err)
	b, _ := json.Marshal(struct {
		ID      string            `json:"id,omitempty"`
		Type    cache.MessageType `json:"type"`
		Message string            `json:"message"`
		Reason  string            `json:"reason"`
		Code    int               `json:"code"`
	}{id, cache.StreamError, st.Message, string(st.Reason), int(st.Code)})
	return b
}
