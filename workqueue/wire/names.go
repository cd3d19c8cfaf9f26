package wire

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// EncodeName URL-encodes a file name the way CCTools does: bytes that would
// break a space-separated line (controls, space), '%', quotes, backslash,
// angle brackets and everything above 'z' become %XX.
func EncodeName(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if needsEscape(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if needsEscape(c) {
			b = append(b, '%', hex[c>>4], hex[c&15])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

func needsEscape(c byte) bool {
	switch {
	case c <= ' ', c > 'z':
		return true
	case c == '%', c == '\\', c == '<', c == '>', c == '\'', c == '"':
		return true
	}
	return false
}

// DecodeName reverses EncodeName. It accepts any %XX escape, as CCTools does,
// and rejects a truncated or non-hex escape.
func DecodeName(s string) (string, error) {
	if strings.IndexByte(s, '%') < 0 {
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			b = append(b, c)
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("bad escape in name %q", s)
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", fmt.Errorf("bad escape in name %q", s)
		}
		b = append(b, hi<<4|lo)
		i += 2
	}
	return string(b), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// ErrUnsafeName is returned for a name that could reach outside a worker's
// workspace: absolute, containing "..", empty, or holding a NUL byte.
var ErrUnsafeName = errors.New("unsafe file name")

// CheckCacheName checks that name is a single path element fit to name a
// file in a cache directory.
func CheckCacheName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%w: cache name %q", ErrUnsafeName, name)
	}
	return nil
}

// CheckRelativePath checks that name is a relative path that stays below the
// directory it is joined to: not absolute, no ".." element, no NUL byte.
// Redundant "./" and "//" are tolerated since they cannot escape.
func CheckRelativePath(name string) error {
	if name == "" || strings.HasPrefix(name, "/") || strings.ContainsRune(name, 0) {
		return fmt.Errorf("%w: %q", ErrUnsafeName, name)
	}
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return fmt.Errorf("%w: %q", ErrUnsafeName, name)
		}
	}
	if c := path.Clean(name); c == "." {
		return fmt.Errorf("%w: %q", ErrUnsafeName, name)
	}
	return nil
}

// MaxDirDepth is how many directories deep a directory sent in either
// direction may go. Deeper entries are refused: nothing real nests so deep,
// and a hostile peer could otherwise nest without end.
const MaxDirDepth = 64
