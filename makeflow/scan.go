package makeflow

// A scanner walks the bytes of a workflow file (or of a variable's value
// being substituted) and keeps track of where it is, so that every error can
// say file:line:column.
type scanner struct {
	src  []byte
	i    int
	line int
	col  int
	file string

	// fixed is set for the text of a substituted variable: errors in it are
	// reported at the $ that brought it in, since the text has no place of
	// its own in the file.
	fixed *Pos
	depth int // substitution depth, to stop runaway self-reference
}

func newScanner(file string, src []byte) *scanner {
	return &scanner{src: src, line: 1, col: 1, file: file}
}

// subScanner returns a scanner over a variable's value, substituted at pos.
func (s *scanner) subScanner(text string, at Pos) *scanner {
	return &scanner{src: []byte(text), line: 1, col: 1, file: s.file, fixed: &at, depth: s.depth + 1}
}

func (s *scanner) eof() bool { return s.i >= len(s.src) }

// peek returns the next byte, or 0 at the end.
func (s *scanner) peek() byte {
	if s.i < len(s.src) {
		return s.src[s.i]
	}
	return 0
}

// peekAt returns the byte n places ahead, or 0 past the end.
func (s *scanner) peekAt(n int) byte {
	if s.i+n < len(s.src) {
		return s.src[s.i+n]
	}
	return 0
}

// next consumes and returns one byte (0 at the end).
func (s *scanner) next() byte {
	if s.i >= len(s.src) {
		return 0
	}
	c := s.src[s.i]
	s.i++
	if c == '\n' {
		s.line++
		s.col = 1
	} else {
		s.col++
	}
	return c
}

func (s *scanner) pos() Pos {
	if s.fixed != nil {
		return *s.fixed
	}
	return Pos{File: s.file, Line: s.line, Col: s.col}
}

// atLineEnd reports whether the next byte ends the line (or the input).
func (s *scanner) atLineEnd() bool { return s.eof() || s.peek() == '\n' }

// skipBlanks skips spaces and tabs and returns the first one skipped, or 0.
func (s *scanner) skipBlanks() byte {
	var first byte
	for c := s.peek(); c == ' ' || c == '\t'; c = s.peek() {
		if first == 0 {
			first = c
		}
		s.next()
	}
	return first
}

// skipToLineEnd skips the rest of the line, leaving the newline unread.
func (s *scanner) skipToLineEnd() {
	for !s.atLineEnd() {
		s.next()
	}
}

// skipLogicalLine skips the rest of the line including its newline, also
// skipping lines joined by a trailing backslash. It is how the parser gets
// past a line it has already reported an error for.
func (s *scanner) skipLogicalLine() {
	for !s.eof() {
		c := s.next()
		if c == '\\' {
			s.next()
			continue
		}
		if c == '\n' {
			return
		}
	}
}

// endLine consumes the newline that ends a line, if there is one.
func (s *scanner) endLine() {
	if s.peek() == '\n' {
		s.next()
	}
}

func isNameByte(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

// readName reads a variable name (letters, digits and underscores).
func (s *scanner) readName() string {
	start := s.i
	for isNameByte(s.peek()) {
		s.next()
	}
	return string(s.src[start:s.i])
}

// lineShape looks ahead over the rest of the logical line, without
// consuming it, for the first ':' and '=' outside quotes and escapes, and
// for a quote left open at the end of the line; it returns their offsets
// from the current position, or -1. A '#' outside quotes ends the search,
// as it starts a comment.
func (s *scanner) lineShape() (colon, equal, openQuote int) {
	colon, equal, openQuote = -1, -1, -1
	var quote byte
	for j := s.i; j < len(s.src); j++ {
		c := s.src[j]
		switch {
		case quote != 0:
			if c == '\\' {
				j++
			} else if c == quote {
				quote = 0
			} else if c == '\n' {
				return colon, equal, openQuote
			}
		case c == '\n' || c == '#':
			return colon, equal, -1
		case c == '\\':
			j++
		case c == '\'' || c == '"':
			quote, openQuote = c, j-s.i
		case c == ':' && colon < 0:
			colon = j - s.i
		case c == '=' && equal < 0:
			equal = j - s.i
		}
	}
	if quote == 0 {
		openQuote = -1
	}
	return colon, equal, openQuote
}

// looksLikeAssignment reports whether the rest of the line starts with
// "NAME =" or "NAME +=".
func (s *scanner) looksLikeAssignment() bool {
	j := s.i
	for j < len(s.src) && isNameByte(s.src[j]) {
		j++
	}
	if j == s.i {
		return false
	}
	for j < len(s.src) && (s.src[j] == ' ' || s.src[j] == '\t') {
		j++
	}
	if j < len(s.src) && s.src[j] == '+' {
		j++
	}
	return j < len(s.src) && s.src[j] == '='
}

// hasWord reports whether the rest of the line starts with word followed
// by a blank or the end of the line.
func (s *scanner) hasWord(word string) bool {
	end := s.i + len(word)
	if end > len(s.src) || string(s.src[s.i:end]) != word {
		return false
	}
	return end == len(s.src) || s.src[end] == ' ' || s.src[end] == '\t' || s.src[end] == '\n'
}

// escaped consumes the byte after a backslash and returns what the pair
// stands for according to meaning. A backslash at the very end of the input
// stands for itself.
func (s *scanner) escaped(meaning func(byte) byte) byte {
	if s.eof() {
		return '\\'
	}
	return meaning(s.next())
}
