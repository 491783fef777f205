package cache

import (
	"fmt"
	"io"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// jsonStream reads a stream of JSON text without decoding it. Values are
// returned as slices of an internal buffer, valid until the next call.
type jsonStream struct {
	r          io.Reader
	buf        []byte
	start, end int   // unread bytes: buf[start:end]
	err        error // the reader's error, once it returned one
	// bulk makes each fill read until the buffer is full: a list is read
	// in large pieces (few values straddle two), where a watch wants each
	// event as soon as it arrives.
	bulk bool
	scan jsonscan.Scanner
}

// maxValue is the largest single value (one object) a stream accepts.
// etcd's own request limit is 1.5 MiB; this leaves room for anything an
// API server can store.
const maxValue = 64 << 20

func newJSONStream(r io.Reader, bulk bool) *jsonStream {
	return &jsonStream{r: r, buf: make([]byte, 256<<10), bulk: bulk}
}

// fill reads more bytes, moving unread ones to the front and growing the
// buffer when the value being read fills it.
func (s *jsonStream) fill() error {
	if s.err != nil {
		return s.err
	}
	if s.start > 0 {
		s.end = copy(s.buf, s.buf[s.start:s.end])
		s.start = 0
	}
	if s.end == len(s.buf) {
		if len(s.buf) >= maxValue {
			return fmt.Errorf("a JSON value is larger than %d bytes", maxValue)
		}
		grown := make([]byte, min(2*len(s.buf), maxValue))
		copy(grown, s.buf[:s.end])
		s.buf = grown
	}
	before := s.end
	for s.end < len(s.buf) {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		if err != nil {
			s.err = err
			break
		}
		if !s.bulk && s.end > before {
			break
		}
	}
	if s.end > before {
		return nil
	}
	return s.err
}

// peek skips white space and returns the next byte without consuming it.
func (s *jsonStream) peek() (byte, error) {
	for {
		for s.start < s.end && jsonscan.IsSpace(s.buf[s.start]) {
			s.start++
		}
		if s.start < s.end {
			return s.buf[s.start], nil
		}
		if err := s.fill(); err != nil {
			return 0, unexpectedEOF(err)
		}
	}
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// expect consumes the next non-space byte, which must be c.
func (s *jsonStream) expect(c byte) error {
	got, err := s.peek()
	if err != nil {
		return err
	}
	if got != c {
		return jsonscan.SyntaxError(s.buf[:s.end], s.start, fmt.Sprintf("expected %q", c))
	}
	s.start++
	return nil
}

// value returns the next complete value. At the end of the stream, before
// any byte of a value, it returns io.EOF. An object or array arriving in
// pieces is scanned once: the scan resumes after each read.
func (s *jsonStream) value() ([]byte, error) {
	if _, err := s.peek(); err != nil {
		if err == io.ErrUnexpectedEOF && s.start == s.end {
			return nil, io.EOF
		}
		return nil, err
	}
	s.scan.Reset()
	for {
		var n int
		var err error
		if b := s.buf[s.start:s.end]; b[0] == '{' || b[0] == '[' {
			n, err = s.scan.Composite(b)
		} else if n, err = jsonscan.Value(b); err == jsonscan.ErrShort && s.err == io.EOF && b[0] != '"' {
			n, err = len(b), nil // a literal that ends the stream
		}
		if err == nil {
			v := s.buf[s.start : s.start+n]
			s.start += n
			return v, nil
		}
		if err != jsonscan.ErrShort {
			return nil, err
		}
		if err := s.fill(); err != nil {
			return nil, unexpectedEOF(err)
		}
	}
}

// parse hands the unread bytes to f, which parses one value from their
// start and returns its length; when f reports jsonscan.ErrShort, more is read and
// f is called again on the longer bytes.
func (s *jsonStream) parse(f func(b []byte) (int, error)) error {
	if _, err := s.peek(); err != nil {
		return err
	}
	for {
		n, err := f(s.buf[s.start:s.end])
		if err == nil {
			s.start += n
			return nil
		}
		if err != jsonscan.ErrShort {
			return err
		}
		if err := s.fill(); err != nil {
			return unexpectedEOF(err)
		}
	}
}

// key reads an object key and its colon.
func (s *jsonStream) key() (string, error) {
	v, err := s.value()
	if err != nil {
		return "", unexpectedEOF(err)
	}
	if v[0] != '"' {
		return "", jsonscan.SyntaxError(v, 0, "expected a key")
	}
	k := string(v[1 : len(v)-1])
	if err := s.expect(':'); err != nil {
		return "", err
	}
	return k, nil
}

// more consumes the separator after an element of an object or array
// closed by end: it reports whether another element follows.
func (s *jsonStream) more(end byte, first bool) (bool, error) {
	c, err := s.peek()
	if err != nil {
		return false, err
	}
	if c == end {
		s.start++
		return false, nil
	}
	if first {
		return true, nil
	}
	if c != ',' {
		return false, jsonscan.SyntaxError(s.buf[:s.end], s.start, fmt.Sprintf("expected ',' or %q", end))
	}
	s.start++
	return true, nil
}
