package indexers

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

// ValidatePath rejects gjson paths that could never select anything from a
// Kubernetes object, or that gjson would read differently from what was
// meant: empty components, unbalanced brackets or quotes, unknown
// modifiers. gjson itself never reports a bad path (it just finds nothing),
// so without this check a typo would silently produce an empty index.
func ValidatePath(path string) error {
	if strings.TrimSpace(path) == "" {
		return errors.New("path is empty")
	}
	if len(path) > 512 {
		return fmt.Errorf("path is %d bytes long; at most 512 allowed", len(path))
	}
	if err := checkBalanced(path); err != nil {
		return fmt.Errorf("path %q: %w", path, err)
	}
	if err := checkComponents(path); err != nil {
		return fmt.Errorf("path %q: %w", path, err)
	}
	if err := checkModifiers(path); err != nil {
		return fmt.Errorf("path %q: %w", path, err)
	}
	return nil
}

// checkBalanced verifies (), [], {} nest properly and quotes close, honouring
// backslash escapes.
func checkBalanced(path string) error {
	var stack []byte
	inQuote := false
	for i := 0; i < len(path); i++ {
		c := path[i]
		if c == '\\' {
			i++
			if i >= len(path) {
				return errors.New("ends with a lone backslash")
			}
			continue
		}
		if inQuote {
			if c == '"' {
				inQuote = false
			}
			continue
		}
		switch c {
		case '"':
			inQuote = true
		case '(', '[', '{':
			stack = append(stack, c)
		case ')', ']', '}':
			open := map[byte]byte{')': '(', ']': '[', '}': '{'}[c]
			if len(stack) == 0 || stack[len(stack)-1] != open {
				return fmt.Errorf("unbalanced %q at offset %d", c, i)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if inQuote {
		return errors.New("unterminated quote")
	}
	if len(stack) > 0 {
		return fmt.Errorf("unclosed %q", stack[len(stack)-1])
	}
	return nil
}

// checkComponents rejects empty path components ("a..b", ".a", "a.") outside
// of brackets and quotes, where gjson would silently match nothing.
func checkComponents(path string) error {
	depth, inQuote, start := 0, false, 0
	for i := 0; i <= len(path); i++ {
		if i < len(path) {
			c := path[i]
			if c == '\\' {
				i++
				continue
			}
			if inQuote {
				inQuote = c != '"'
				continue
			}
			switch c {
			case '"':
				inQuote = true
				continue
			case '(', '[', '{':
				depth++
				continue
			case ')', ']', '}':
				depth--
				continue
			}
			if depth > 0 || (c != '.' && c != '|') {
				continue
			}
		}
		if i == start {
			return errors.New("has an empty component (check for '..', or a leading or trailing '.')")
		}
		start = i + 1
	}
	return nil
}

// checkModifiers makes sure every @modifier at the start of a component is
// one gjson knows; an unknown modifier silently selects nothing.
func checkModifiers(path string) error {
	for i := 0; i < len(path); i++ {
		if path[i] != '@' || (i > 0 && path[i-1] != '.' && path[i-1] != '|') {
			continue
		}
		end := i + 1
		for end < len(path) && (isWordByte(path[end])) {
			end++
		}
		name := path[i+1 : end]
		if !gjson.ModifierExists(name, nil) {
			return fmt.Errorf("unknown modifier @%s", name)
		}
	}
	return nil
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
