package funcs

import (
	"errors"
	"strings"
)

// SplitArgs splits a command-line string of extra arguments (-e "...") into
// words the way a POSIX shell would, without running one: words are
// separated by blanks; single quotes keep everything literally, double quotes
// keep everything but backslash escapes of ", \, $ and `; a backslash outside
// quotes escapes the next character. There is no expansion of any kind.
func SplitArgs(s string) ([]string, error) {
	var (
		words   []string
		word    strings.Builder
		inWord  bool
		quote   byte // 0, '\'' or '"'
		escaped bool
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			word.WriteByte(c)
			escaped = false
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				word.WriteByte(c)
			}
		case quote == '"':
			switch {
			case c == '"':
				quote = 0
			case c == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0:
				i++
				word.WriteByte(s[i])
			default:
				word.WriteByte(c)
			}
		case c == '\\':
			escaped, inWord = true, true
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	switch {
	case quote != 0:
		return nil, errors.New("unterminated quote in arguments")
	case escaped:
		return nil, errors.New("arguments end with a backslash")
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}
