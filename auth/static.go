package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
)

// StaticTokens authenticates bearer tokens listed in a file in the format
// of kube-apiserver's --token-auth-file: one token per line,
//
//	token,user,uid,"group1,group2"
//
// the groups column being optional. Tokens are compared in constant time
// (every entry, every request), so response timing says nothing about how
// close a guess was. The file is read once; restart to change it.
type StaticTokens struct {
	entries []staticEntry

	allows, denies atomic.Uint64
}

type staticEntry struct {
	sum  [32]byte // SHA-256 of the token: equal length whatever the token
	user User
}

// maxTokenFile bounds the file: a token file is a short list of secrets.
const maxTokenFile = 1 << 20

// LoadStaticTokens reads a token file.
func LoadStaticTokens(path string) (*StaticTokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	if len(data) > maxTokenFile {
		return nil, fmt.Errorf("token file %s: larger than %d bytes", path, maxTokenFile)
	}
	st, err := ParseStaticTokens(data)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return st, nil
}

// ParseStaticTokens parses a token file's content. Errors name the line;
// they never quote a token. An empty file (no tokens) is an error: it would
// lock everyone out.
func ParseStaticTokens(data []byte) (*StaticTokens, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	r.TrimLeadingSpace = true
	r.Comment = '#'
	st := &StaticTokens{}
	seen := map[[32]byte]int{}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("line %d: %v", pe.StartLine, pe.Err)
			}
			return nil, err
		}
		line, _ := r.FieldPos(0) // only valid after a successful Read
		e, err := parseStaticEntry(rec)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if first, dup := seen[e.sum]; dup {
			return nil, fmt.Errorf("line %d: the same token as line %d", line, first)
		}
		seen[e.sum] = line
		st.entries = append(st.entries, e)
	}
	if len(st.entries) == 0 {
		return nil, errors.New("no tokens")
	}
	return st, nil
}

func parseStaticEntry(rec []string) (staticEntry, error) {
	if len(rec) < 3 || len(rec) > 4 {
		return staticEntry{}, fmt.Errorf("want token,user,uid[,\"group1,group2\"], got %d fields", len(rec))
	}
	token, name, uid := rec[0], strings.TrimSpace(rec[1]), strings.TrimSpace(rec[2])
	switch {
	case token == "":
		return staticEntry{}, errors.New("empty token")
	case strings.ContainsAny(token, " \t\r\n"):
		return staticEntry{}, errors.New("the token contains white space")
	case name == "":
		return staticEntry{}, errors.New("empty user name")
	}
	u := User{Name: name, UID: uid}
	if len(rec) == 4 {
		for _, g := range strings.Split(rec[3], ",") {
			if g = strings.TrimSpace(g); g != "" {
				u.Groups = append(u.Groups, g)
			}
		}
	}
	return staticEntry{sum: sha256.Sum256([]byte(token)), user: u}, nil
}

// Len is the number of tokens.
func (s *StaticTokens) Len() int { return len(s.entries) }

// AuthenticateToken implements Authenticator. It never fails.
func (s *StaticTokens) AuthenticateToken(_ context.Context, token string) (*User, bool, error) {
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range s.entries {
		// No early exit: every request compares against every entry.
		if subtle.ConstantTimeCompare(sum[:], s.entries[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 || token == "" {
		s.denies.Add(1)
		return nil, false, nil
	}
	s.allows.Add(1)
	u := s.entries[found].user
	u.Groups = append(append([]string(nil), u.Groups...), "system:authenticated")
	return &u, true, nil
}

// Stats implements StatsReporter.
func (s *StaticTokens) Stats() Stats {
	return Stats{Allowed: s.allows.Load(), Denied: s.denies.Load()}
}
