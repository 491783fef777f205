package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/kubeindex/kubeindex/auth"
	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// kubeWatch serves ?watch=true in the API server's streaming format: one
// JSON watch event per line, from the resource's broker (cache.Watch).
//
//   - resourceVersion "" or "0": the current state as ADDED, then changes;
//     with sendInitialEvents and allowWatchBookmarks, a BOOKMARK annotated
//     k8s.io/initial-events-end after the initial state (a watch list);
//   - resourceVersion X: the changes after X, once the cache has reached X
//     (else 504 after freshWait); older than the history: one ERROR event
//     with a 410 Expired Status, as the watch cache sends it;
//   - a watcher whose queue overflows is closed, as the API server closes
//     one it cannot keep up with: the client watches again from where it
//     got to.
func (s *Server) kubeWatch(c echo.Context, t kubeTarget, opts *metainternalversion.ListOptions, tb *tableRequest) error {
	if err := s.kubeAllow(c, auth.VerbWatch, t.res, t.namespace, ""); err != nil {
		return err
	}
	shard, err := kubeShardSelector(opts)
	if err != nil {
		return err
	}
	wq := cache.WatchQuery{Namespace: t.namespace, LabelSelector: c.QueryParam("labelSelector"),
		Fields: opts.FieldSelector, ShardSelector: shard, QueueSize: s.streams.opts.QueueSize}
	if t.name != "" {
		wq.Fields = fields.AndSelectors(fields.OneTermEqualSelector("metadata.name", t.name), nonNil(opts.FieldSelector))
	}
	initial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	want, err := parseKubeRV(opts.ResourceVersion)
	if err != nil {
		return err
	}
	if want > 0 {
		// NotOlderThan: wait for the cache to get there, as the watch cache does.
		if _, err := s.kubePosition(c.Request().Context(), t.res, opts.ResourceVersion, ""); err != nil {
			return err
		}
	}
	switch {
	case initial:
		wq.Snapshot = true
	case want > 0:
		wq.ResourceVersion = opts.ResourceVersion
	case opts.SendInitialEvents != nil: // false, from now on
		pos, err := s.r.Position(t.res.Name)
		if err != nil {
			return err
		}
		wq.ResourceVersion = strconv.FormatUint(pos, 10)
	default:
		wq.Snapshot = true
	}
	notify := make(chan struct{}, 1)
	sub, err := s.streams.subscribe(s.r, t.res.Name, wq, notify)
	if err != nil {
		return err
	}
	defer s.streams.unsubscribe(sub)

	// A watch ends after timeoutSeconds, within the streams' maximum
	// lifetime; without it (or 0, as on the API server) at random within
	// that lifetime's second half, as the API server ends one after one to
	// two --min-request-timeout (30 min).
	var timeout time.Duration
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		timeout = min(time.Duration(*opts.TimeoutSeconds)*time.Second, s.streams.opts.MaxLifetime)
	}
	life := s.startLife(c, timeout, nil)
	defer life.stop()

	w := c.Response()
	s.fillFreshness(c) // the whole cache's: a resource's would cost a count of its objects
	if t.proto {
		w.Header().Set(echo.HeaderContentType, kubeProtobufWatchMediaType)
	} else if tb != nil {
		w.Header().Set(echo.HeaderContentType, kubeTableMediaType)
	} else if t.asMetadata {
		w.Header().Set(echo.HeaderContentType, kubeMetadataMediaType)
	} else {
		w.Header().Set(echo.HeaderContentType, "application/json")
	}
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(http.StatusOK)
	out := &kubeWatchWriter{streamBatch: s.newBatch(w, s.metrics.deliveryKube),
		res: t.res, bookmarks: opts.AllowWatchBookmarks, initialEnd: initial && opts.AllowWatchBookmarks, table: tb}
	if t.asMetadata {
		m := metadataOf(t.res)
		out.metadata = &m
	}
	if t.proto {
		out.proto = &kubeProtoMessages{metadata: t.asMetadata}
	}
	defer out.conn.rc.SetWriteDeadline(time.Time{}) // the connection may serve another request
	if oldest, expired := sub.Expired(); expired {
		out.status(kubeStatus(kubeExpired(want, oldest)))
		return out.flush()
	}
	if err := out.conn.rc.Flush(); err != nil { // the status line now: clients wait for it
		return nil
	}
	if err := s.pump(c.Request().Context(), sub, notify, out, life); err != nil {
		s.log.Debug("watch ended", "resource", t.res.Name, "err", err)
	}
	return nil
}

func nonNil(sel fields.Selector) fields.Selector {
	if sel == nil {
		return fields.Everything()
	}
	return sel
}

// kubeWatchWriter writes watch events, one JSON object per line.
type kubeWatchWriter struct {
	streamBatch
	res        cache.Resource
	bookmarks  bool          // allowWatchBookmarks
	initialEnd bool          // mark the end of the initial events with a bookmark
	table      *tableRequest // nil: objects as they are
	metadata   *asMetadata   // non-nil: objects as PartialObjectMetadata
	// proto, when non-nil, writes the events in protobuf, length-prefixed
	// (kube_protobuf.go), instead of JSON lines.
	proto *kubeProtoMessages
}

func (w *kubeWatchWriter) write(m *cache.Message) error {
	w.begin()
	switch m.Type {
	case cache.ResyncRequired:
		// Too slow to keep up: the stream ends, as the API server ends a
		// watcher it cannot feed, and the client watches again.
		return nil
	case cache.Synced:
		if w.initialEnd {
			w.initialEnd = false
			w.bookmark(m.ResourceVersion, true)
		}
	case cache.Bookmark:
		if w.bookmarks {
			w.bookmark(m.ResourceVersion, false)
		}
	default:
		o := m.Object()
		if o == nil {
			return nil
		}
		if w.proto != nil {
			msg, err := w.proto.of(o)
			if err != nil {
				return err
			}
			if err := writeProtoEvent(w.bw, string(m.Type), w.proto.envelope(w.res), msg); err != nil {
				return err
			}
			w.delivery.add(m)
			return nil
		}
		var raw []byte
		stored := false // the object as stored, written in its pieces
		switch {
		case w.table != nil:
			var err error
			if raw, err = w.table.build([]*cache.Object{o}, metav1.ListMeta{}); err != nil {
				return err
			}
		case w.metadata != nil:
			raw = w.metadata.appendTo(nil, o)
		default:
			stored = true
		}
		w.bw.WriteString(`{"type":"`)
		w.bw.WriteString(string(m.Type))
		w.bw.WriteString(`","object":`)
		if stored {
			o.WriteTo(w.bw)
		} else {
			w.bw.Write(raw)
		}
		if _, err := w.bw.WriteString("}\n"); err != nil {
			return err
		}
		w.delivery.add(m)
	}
	return nil
}

// end ends the watch: at its timeout with nothing more, as the API server
// does (the client watches again from its last resourceVersion); when the
// token is no longer valid, with an ERROR event carrying the Status.
func (w *kubeWatchWriter) end(why error, _ position) error {
	if !errors.Is(why, errLifetimeOver) {
		w.status(kubeStatus(why))
	}
	return w.flush()
}

// bookmark writes a BOOKMARK: an object with only its kind, apiVersion
// and resourceVersion (and the end-of-initial-events annotation).
func (w *kubeWatchWriter) bookmark(rv string, initialEnd bool) {
	w.begin()
	if w.proto != nil {
		env := w.proto.envelope(w.res)
		if msg, err := protoBookmark(env, rv, initialEnd); err == nil {
			writeProtoEvent(w.bw, "BOOKMARK", env, msg)
		}
		return
	}
	b := w.bw.AvailableBuffer()
	kind, apiVersion := w.res.Kind, w.res.APIVersion()
	if w.metadata != nil {
		kind, apiVersion = "PartialObjectMetadata", "meta.k8s.io/v1"
	}
	b = append(b, `{"type":"BOOKMARK","object":{"kind":`...)
	b = jsonscan.AppendString(b, kind)
	b = append(b, `,"apiVersion":`...)
	b = jsonscan.AppendString(b, apiVersion)
	b = append(b, `,"metadata":{"resourceVersion":`...)
	b = jsonscan.AppendString(b, rv)
	if initialEnd {
		b = append(b, `,"annotations":{"k8s.io/initial-events-end":"true"}`...)
	}
	b = append(b, "}}}\n"...)
	w.bw.Write(b)
}

// status writes an ERROR event carrying st.
func (w *kubeWatchWriter) status(st metav1.Status) {
	w.begin()
	if w.proto != nil {
		if msg, err := st.Marshal(); err == nil {
			writeProtoEvent(w.bw, "ERROR", protoStatusEnvelope, msg)
		}
		return
	}
	body, _ := json.Marshal(st) // a Status always encodes
	w.bw.WriteString(`{"type":"ERROR","object":`)
	w.bw.Write(body)
	w.bw.WriteString("}\n")
}
