package fakeapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// apiError is an error answered as a Kubernetes Status.
type apiError struct {
	code    int
	reason  metav1.StatusReason
	message string
	details *metav1.StatusDetails
}

func (e *apiError) Error() string { return e.message }

func badRequest(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Sprintf(format, args...), nil}
}

func notFound(r *resource, name string) *apiError {
	if r == nil {
		return &apiError{http.StatusNotFound, metav1.StatusReasonNotFound,
			"the server could not find the requested resource", &metav1.StatusDetails{}}
	}
	return &apiError{http.StatusNotFound, metav1.StatusReasonNotFound,
		fmt.Sprintf("%s %q not found", r.plural, name),
		&metav1.StatusDetails{Name: name, Group: r.group, Kind: r.plural}}
}

// statusFor turns any error into the Status the API server would send.
func statusFor(err error) *metav1.Status {
	var ae *apiError
	var ex errExpired
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &ex):
		ae = &apiError{http.StatusGone, metav1.StatusReasonExpired, ex.Error(), nil}
	default:
		ae = &apiError{http.StatusInternalServerError, metav1.StatusReasonInternalError, "internal error", nil}
	}
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  ae.message,
		Reason:   ae.reason,
		Details:  ae.details,
		Code:     int32(ae.code),
	}
}

// writeError answers err as a Status with its HTTP code.
func writeError(w http.ResponseWriter, err error) {
	st := statusFor(err)
	writeJSON(w, int(st.Code), st)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"InternalError","code":500}`)
	}
	writeBytes(w, code, b)
}

func writeBytes(w http.ResponseWriter, code int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// frameWriter writes a watch stream: one JSON event per line, flushed.
type frameWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
	buf     []byte
}

func newFrameWriter(w http.ResponseWriter) *frameWriter {
	f, _ := w.(http.Flusher)
	return &frameWriter{w: w, flusher: f}
}

// start sends the headers at once, so the client's request returns before
// the first event.
func (f *frameWriter) start() {
	f.w.Header().Set("Content-Type", "application/json")
	f.w.Header().Set("Cache-Control", "no-cache, private")
	f.w.WriteHeader(http.StatusOK)
	f.flush()
}

// event writes one event and reports whether the client is still there.
func (f *frameWriter) event(typ string, obj []byte) bool {
	f.buf = append(f.buf[:0], `{"type":"`...)
	f.buf = append(f.buf, typ...)
	f.buf = append(f.buf, `","object":`...)
	f.buf = append(f.buf, obj...)
	f.buf = append(f.buf, "}\n"...)
	if _, err := f.w.Write(f.buf); err != nil {
		return false
	}
	f.flush()
	return true
}

// status writes an ERROR event.
func (f *frameWriter) status(st *metav1.Status) {
	b, _ := json.Marshal(st)
	f.event("ERROR", b)
}

func (f *frameWriter) flush() {
	if f.flusher != nil {
		f.flusher.Flush()
	}
}

func bookmarkObject(r *resource, rv uint64) []byte {
	return fmt.Appendf(nil, `{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"%d"}}`, r.kind, r.apiVersion(), rv)
}
