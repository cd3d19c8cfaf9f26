package jx

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A Pos is a place in a source file. Line and Col count from 1; Col
// counts bytes, as compilers do.
type Pos struct {
	File      string
	Line, Col int
}

// IsValid reports whether p is a place (not the zero Pos).
func (p Pos) IsValid() bool { return p.Line > 0 }

func (p Pos) String() string {
	s := p.File
	if p.IsValid() {
		if s != "" {
			s += ":"
		}
		s += fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	return s
}

// An Error is a parse or evaluation error at a place in the source.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string {
	if s := e.Pos.String(); s != "" {
		return s + ": " + e.Msg
	}
	return e.Msg
}

type tokenKind int

const (
	tEOF tokenKind = iota
	tSymbol
	tInt
	tFloat
	tString
	tPunct   // one of { } [ ] ( ) , : ;
	tOp      // + - * / % == != < <= > >= and or not
	tKeyword // null true false for in if error
)

type token struct {
	kind tokenKind
	text string // the operator, punctuation, keyword or symbol; a string's value
	i    int64
	f    float64
	pos  Pos
}

func (t token) is(kind tokenKind, text string) bool { return t.kind == kind && t.text == text }

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tString:
		return strconv.Quote(t.text)
	}
	return strconv.Quote(t.text)
}

// A lexer splits JX source into tokens.
type lexer struct {
	src       string
	off       int
	line, col int
	file      string
}

func (l *lexer) pos() Pos { return Pos{File: l.file, Line: l.line, Col: l.col} }

func (l *lexer) errorf(p Pos, format string, args ...any) error {
	return &Error{Pos: p, Msg: fmt.Sprintf(format, args...)}
}

// advance moves past n bytes.
func (l *lexer) advance(n int) {
	for range n {
		if l.src[l.off] == '\n' {
			l.line++
			l.col = 1
		} else {
			l.col++
		}
		l.off++
	}
}

var keywords = map[string]tokenKind{
	"null": tKeyword, "true": tKeyword, "false": tKeyword,
	"for": tKeyword, "in": tKeyword, "if": tKeyword, "error": tKeyword,
	"and": tOp, "or": tOp, "not": tOp,
}

// next returns the next token.
func (l *lexer) next() (token, error) {
	// Blanks and comments.
	for l.off < len(l.src) {
		c := l.src[l.off]
		if c == '#' {
			for l.off < len(l.src) && l.src[l.off] != '\n' && l.src[l.off] != '\r' {
				l.advance(1)
			}
			continue
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v' {
			break
		}
		l.advance(1)
	}
	p := l.pos()
	if l.off >= len(l.src) {
		return token{kind: tEOF, pos: p}, nil
	}
	rest := l.src[l.off:]
	c := rest[0]
	for _, op := range []string{"==", "!=", "<=", ">=", "&&", "||"} {
		if strings.HasPrefix(rest, op) {
			l.advance(2)
			switch op {
			case "&&":
				op = "and"
			case "||":
				op = "or"
			}
			return token{kind: tOp, text: op, pos: p}, nil
		}
	}
	switch {
	case strings.IndexByte("{}[](),:;", c) >= 0:
		l.advance(1)
		return token{kind: tPunct, text: string(c), pos: p}, nil
	case strings.IndexByte("+-*/%<>", c) >= 0:
		l.advance(1)
		return token{kind: tOp, text: string(c), pos: p}, nil
	case c == '!':
		l.advance(1)
		return token{kind: tOp, text: "not", pos: p}, nil
	case c == '=':
		return token{}, l.errorf(p, "a single = : write == to compare")
	case c == '&' || c == '|':
		return token{}, l.errorf(p, "a single %c: write %c%c", c, c, c)
	case c == '"':
		return l.str(p)
	case c >= '0' && c <= '9' || c == '.':
		return l.number(p)
	case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		n := 1
		for n < len(rest) && (rest[n] == '_' || rest[n] >= 'a' && rest[n] <= 'z' || rest[n] >= 'A' && rest[n] <= 'Z' || rest[n] >= '0' && rest[n] <= '9') {
			n++
		}
		word := rest[:n]
		l.advance(n)
		if kind, ok := keywords[word]; ok {
			return token{kind: kind, text: word, pos: p}, nil
		}
		return token{kind: tSymbol, text: word, pos: p}, nil
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return token{}, l.errorf(p, "unexpected character %q", r)
}

// number scans a number as CCTools does: digits and dots, an exponent,
// then an integer if the text is one and a float otherwise.
func (l *lexer) number(p Pos) (token, error) {
	rest := l.src[l.off:]
	n := 0
	for n < len(rest) {
		c := rest[n]
		switch {
		case c >= '0' && c <= '9' || c == '.':
			n++
		case c == 'e' || c == 'E':
			n++
			if n < len(rest) && (rest[n] == '+' || rest[n] == '-') {
				n++
			}
		default:
			goto done
		}
	}
done:
	text := rest[:n]
	l.advance(n)
	if i, err := strconv.ParseInt(text, 10, 64); err == nil {
		return token{kind: tInt, text: text, i: i, pos: p}, nil
	}
	if f, err := strconv.ParseFloat(text, 64); err == nil || isRangeErr(err) {
		return token{kind: tFloat, text: text, f: f, pos: p}, nil
	}
	return token{}, l.errorf(p, "invalid number %q", text)
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// str scans a string constant: JSON's escapes, and a backslash before
// any other character stands for that character, as in CCTools.
func (l *lexer) str(p Pos) (token, error) {
	l.advance(1)
	var b strings.Builder
	for {
		if l.off >= len(l.src) {
			return token{}, l.errorf(p, "string not closed: a \" is missing")
		}
		c := l.src[l.off]
		switch {
		case c == '"':
			l.advance(1)
			return token{kind: tString, text: b.String(), pos: p}, nil
		case c == '\\':
			if l.off+1 >= len(l.src) {
				return token{}, l.errorf(p, "string not closed: a \" is missing")
			}
			escPos := l.pos()
			esc, size := utf8.DecodeRuneInString(l.src[l.off+1:])
			l.advance(1 + size)
			switch esc {
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				r, err := l.unicode(escPos)
				if err != nil {
					return token{}, err
				}
				b.WriteRune(r)
			default:
				b.WriteString(l.src[l.off-size : l.off])
			}
		default:
			b.WriteByte(c)
			l.advance(1)
		}
	}
}

// unicode reads the four hex digits of a \u escape, and a second escape
// after a high surrogate.
func (l *lexer) unicode(p Pos) (rune, error) {
	hex := func() (rune, bool) {
		if l.off+4 > len(l.src) {
			return 0, false
		}
		v, err := strconv.ParseUint(l.src[l.off:l.off+4], 16, 32)
		if err != nil {
			return 0, false
		}
		l.advance(4)
		return rune(v), true
	}
	r, ok := hex()
	if !ok {
		return 0, l.errorf(p, `\u must be followed by four hexadecimal digits`)
	}
	if r >= 0xd800 && r < 0xdc00 && strings.HasPrefix(l.src[l.off:], `\u`) {
		save := *l
		l.advance(2)
		if lo, ok := hex(); ok && lo >= 0xdc00 && lo < 0xe000 {
			return (r-0xd800)<<10 + (lo - 0xdc00) + 0x10000, nil
		}
		*l = save
	}
	return r, nil
}
