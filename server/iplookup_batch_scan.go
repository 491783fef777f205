package server

import (
	"encoding/json"
	"slices"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// scanBatchInto reads a batch body in its common spelling without
// reflection, appending to buf[:0] (a pooled slice):
// {"queries":[{"ip":…,"at":…,"port":…,"protocol":…},…]} with the members
// spelled in lower case, each at most once, strings of printable ASCII
// without escapes, at and port strings or numbers, and nothing after the
// object but space. ok is false for anything else, valid or not, and
// parseBatch then decodes with encoding/json, which alone words errors;
// buf is then left cleared: it keeps no strings of body. Where ok, the
// queries are those encoding/json decodes
// (FuzzScanBatchAgreesWithEncodingJSON); strings and raw values share the
// memory of one copy of body.
func scanBatchInto(body []byte, buf []batchQuery) (queries []batchQuery, ok bool) {
	defer func() {
		if !ok {
			clear(buf[:cap(buf)])
		}
	}()
	s := batchScanner{b: body, str: string(body), buf: buf}
	top, err := jsonscan.OpenObject(body, 0)
	if err != nil {
		return nil, false
	}
	seen := false
	for {
		more, err := top.Next()
		if err != nil {
			return nil, false
		}
		if !more {
			break
		}
		if seen || string(top.Key) != "queries" {
			return nil, false
		}
		seen = true
		end, ok := s.queries(top.ValAt, &queries)
		if !ok {
			return nil, false
		}
		top.Done(end)
	}
	if jsonscan.SkipSpace(body, top.End()) != len(body) {
		return nil, false
	}
	return queries, true
}

type batchScanner struct {
	b   []byte
	str string // b as a string, for substrings that cost no allocation
	buf []batchQuery
}

// queries reads the array at i (or null) into out and returns its end.
func (s *batchScanner) queries(i int, out *[]batchQuery) (int, bool) {
	b := s.b
	if i+4 <= len(b) && string(b[i:i+4]) == "null" {
		return i + 4, true
	}
	if b[i] != '[' {
		return 0, false
	}
	*out = slices.Grow(s.buf[:0], min(1+len(b)/16, maxBatchQueries+1)) // a query is rarely shorter
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		q, end, ok := s.query(i)
		if !ok {
			return 0, false
		}
		*out = append(*out, q)
		i = jsonscan.SkipSpace(b, end)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ']':
			return i + 1, true
		case ',':
			i = jsonscan.SkipSpace(b, i+1)
		default:
			return 0, false
		}
	}
}

// query reads the object at i.
func (s *batchScanner) query(i int) (batchQuery, int, bool) {
	var q batchQuery
	obj, err := jsonscan.OpenObject(s.b, i)
	if err != nil {
		return q, 0, false
	}
	var seen [4]bool
	for {
		more, err := obj.Next()
		if err != nil {
			return q, 0, false
		}
		if !more {
			return q, obj.End(), true
		}
		var k int
		switch string(obj.Key) {
		case "ip":
			k = 0
		case "at":
			k = 1
		case "port":
			k = 2
		case "protocol":
			k = 3
		default:
			return q, 0, false
		}
		if seen[k] {
			return q, 0, false
		}
		seen[k] = true
		start := obj.ValAt
		end, isString := s.plainString(start)
		if !isString && (k == 0 || k == 3) {
			return q, 0, false
		}
		if !isString {
			if end = s.number(start); end == 0 {
				return q, 0, false
			}
		}
		switch k {
		case 0:
			q.IP = s.str[start+1 : end-1]
		case 1:
			q.At = json.RawMessage(s.b[start:end:end])
		case 2:
			q.Port = json.RawMessage(s.b[start:end:end])
		case 3:
			q.Protocol = s.str[start+1 : end-1]
		}
		obj.Done(end)
	}
}

// plainString returns the end of the string at i if it holds only
// printable ASCII without escapes (what encoding/json decodes to itself).
func (s *batchScanner) plainString(i int) (int, bool) {
	b := s.b
	if b[i] != '"' {
		return 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return 0, false
		}
	}
	return 0, false
}

// number returns the end of the JSON number at i (RFC 8259's grammar),
// or 0 when there is none.
func (s *batchScanner) number(i int) int {
	b := s.b
	digits := func(j int) int {
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		return j
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b) || b[i] < '0' || b[i] > '9':
		return 0
	case b[i] == '0':
		i++
	default:
		i = digits(i)
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0
		}
		i = j
	}
	// A number ends where a structural character or space follows.
	if i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && !jsonscan.IsSpace(b[i]) {
		return 0
	}
	return i
}
