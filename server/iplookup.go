package server

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/internal/jsonscan"
	"github.com/kubeindex/kubeindex/internal/text"
	"github.com/kubeindex/kubeindex/ipowner"
)

// ipQueryParams are the query parameters of an IP lookup.
var ipQueryParams = []string{"at", "port", "protocol"}

func (s *Server) lookupIP(c echo.Context) error {
	q, err := queryParams(c, ipQueryParams...)
	if err != nil {
		return err
	}
	ip, err := pathParam(c, "ip")
	if err != nil {
		return err
	}
	query, err := parseIPQuery(ip, q.Get("at"), q.Get("port"), q.Get("protocol"))
	if err != nil {
		return err
	}
	if query.Visible, err = s.accessFor(c).ipVisibility(); err != nil {
		return err
	}
	res, err := s.r.LookupAddress(query)
	if !s.setResourceFreshness(c, res.Resource.Name, res.Freshness) {
		res.Freshness.ResourceVersion = "" // a restricted caller's answer says no more than its headers
	}
	if err != nil {
		return err
	}
	if res.History != nil {
		return writeJSON(c.Response(), appendIPHistory(nil, res))
	}
	return writeIPLookup(c.Response(), heldConn(c), res)
}

// parseIPQuery checks an IP query's moment and port; the address itself is
// checked by the cache.
func parseIPQuery(ip, at, port, protocol string) (ipowner.Query, error) {
	q := ipowner.Query{IP: ip}
	if at != "" {
		t, err := parseAt(at)
		if err != nil {
			return q, err
		}
		q.At = t
	}
	if port == "" && protocol != "" {
		return q, fmt.Errorf("%w: protocol needs a port", errBadRequest)
	}
	if port != "" {
		p, ok := ipowner.ParsePort(port, protocol)
		if !ok {
			return q, fmt.Errorf("%w: port must be 1-65535 and protocol TCP, UDP or SCTP; got port %q protocol %q",
				errBadRequest, text.Truncate(port, 16), text.Truncate(protocol, 16))
		}
		q.Port = p
	}
	return q, nil
}

// parseAt reads a moment: RFC 3339 (fractional seconds allowed) or Unix
// seconds with an optional fraction of up to nine digits.
func parseAt(s string) (time.Time, error) {
	bad := func() (time.Time, error) {
		return time.Time{}, fmt.Errorf("%w: at must be an RFC 3339 time or Unix seconds (e.g. 2026-01-02T03:04:05.5Z or 1767323045.5), got %q",
			errBadRequest, text.Truncate(s, 64))
	}
	if strings.ContainsAny(s, "T:-") {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || t.Year() < 1970 {
			return bad()
		}
		return t, nil
	}
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(whole) > 11 || len(frac) > 9 || strings.Trim(whole, "0123456789") != "" || strings.Trim(frac, "0123456789") != "" {
		return bad()
	}
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return bad()
	}
	var nsec int64
	if frac != "" {
		nsec, _ = strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
	}
	return time.Unix(sec, nsec).UTC(), nil
}

// appendIPLookupHead appends the summary of a lookup of now (see
// writeIPLookup) up to and without the items.
func appendIPLookupHead(b []byte, res cache.IPLookup) []byte {
	b = append(b, `{"kind":"PodIPLookup","apiVersion":"kubeindex/v1",`...)
	return appendIPSummary(b, &res, true)
}

// appendIPSummary appends the members of a lookup of now from ip to nodes,
// with the metadata when meta is set, without the braces.
func appendIPSummary(b []byte, res *cache.IPLookup, meta bool) []byte {
	b = append(b, `"ip":`...)
	b = jsonscan.AppendString(b, res.IP)
	b = append(b, `,"match":`...)
	b = jsonscan.AppendString(b, string(res.Match))
	if res.Via != "" {
		b = append(b, `,"via":`...)
		b = jsonscan.AppendString(b, res.Via)
	}
	if res.Port != nil {
		b = appendPort(b, res.Port)
	}
	if meta {
		b = append(b, `,"metadata":{"resourceVersion":`...)
		b = jsonscan.AppendString(b, res.Freshness.ResourceVersion)
		b = append(b, '}')
	}
	return res.AppendHolders(b)
}

func appendPort(b []byte, p *ipowner.PortAnswer) []byte {
	b = append(b, `,"port":{"number":`...)
	b = strconv.AppendInt(b, int64(p.Number), 10)
	b = append(b, `,"protocol":`...)
	b = jsonscan.AppendString(b, p.Protocol)
	b = append(b, `,"declared":`...)
	b = strconv.AppendBool(b, p.Declared)
	return append(b, '}')
}

// appendIPHistory appends the answer at a moment: no objects (they may be
// long gone), the owners' intervals, the certainty and how far back the
// history reaches.
func appendIPHistory(b []byte, res cache.IPLookup) []byte {
	b = append(b, `{"kind":"IPHistoryLookup","apiVersion":"kubeindex/v1",`...)
	return append(appendIPHistoryBody(b, res), '\n')
}

// appendIPHistoryBody appends the members of an answer at a moment and
// the closing brace.
func appendIPHistoryBody(b []byte, res cache.IPLookup) []byte {
	h := res.History
	b = append(b, `"ip":`...)
	b = jsonscan.AppendString(b, res.IP)
	b = append(b, `,"at":`...)
	b = appendTime(b, h.At)
	b = append(b, `,"certainty":`...)
	b = jsonscan.AppendString(b, h.Certainty)
	b = append(b, `,"historySince":`...)
	b = appendTime(b, h.Since)
	b = append(b, `,"match":`...)
	b = jsonscan.AppendString(b, string(res.Match))
	if res.Via != "" {
		b = append(b, `,"via":`...)
		b = jsonscan.AppendString(b, res.Via)
	}
	if res.Port != nil {
		b = appendPort(b, res.Port)
	}
	b = append(b, `,"owners":[`...)
	for i := range h.Owners {
		if i > 0 {
			b = append(b, ',')
		}
		b = ipowner.AppendInterval(b, &h.Owners[i])
	}
	return append(b, "]}"...)
}

func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}
