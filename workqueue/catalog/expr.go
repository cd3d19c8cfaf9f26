package catalog

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Filter is a compiled catalog query expression: the small part of CCTools'
// JX language that catalog clients send, such as
// `true and type=="wq_manager" or type=="wq_master"`. It has literals
// (numbers, "strings", true, false, null), field names, comparison
// (== != < <= > >=), and, or, not (also && || !) and parentheses.
type Filter struct{ root node }

// ParseFilter compiles an expression. The empty expression matches
// everything.
func ParseFilter(src string) (*Filter, error) {
	if strings.TrimSpace(src) == "" {
		return &Filter{root: lit{true}}, nil
	}
	p := &parser{src: src}
	p.next()
	n, err := p.or()
	if err == nil {
		err = p.err
	}
	if err != nil {
		return nil, fmt.Errorf("filter %q: %w", src, err)
	}
	if p.tok.kind != tEOF {
		return nil, fmt.Errorf("filter %q: unexpected %q at %d", src, p.tok.text, p.tok.pos)
	}
	return &Filter{root: n}, nil
}

// Match reports whether the record satisfies the filter.
func (f *Filter) Match(r Record) bool { return truthy(f.root.eval(r)) }

type node interface{ eval(Record) any }

type lit struct{ v any }
type field struct{ name string }
type unary struct{ x node }
type binary struct {
	op   string
	l, r node
}

func (n lit) eval(Record) any     { return n.v }
func (n field) eval(r Record) any { return normalize(r[n.name]) }
func (n unary) eval(r Record) any { return !truthy(n.x.eval(r)) }

func (n binary) eval(r Record) any {
	switch n.op {
	case "and":
		return truthy(n.l.eval(r)) && truthy(n.r.eval(r))
	case "or":
		return truthy(n.l.eval(r)) || truthy(n.r.eval(r))
	}
	a, b := n.l.eval(r), n.r.eval(r)
	switch n.op {
	case "==":
		return a == b
	case "!=":
		return a != b
	}
	c, ok := compare(a, b)
	if !ok {
		return false
	}
	switch n.op {
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	default:
		return c >= 0
	}
}

func normalize(v any) any {
	switch v := v.(type) {
	case int:
		return float64(v)
	case int64:
		return float64(v)
	case float64, string, bool, nil:
		return v
	default:
		return fmt.Sprint(v)
	}
}

func compare(a, b any) (int, bool) {
	switch a := a.(type) {
	case float64:
		if b, ok := b.(float64); ok {
			switch {
			case a < b:
				return -1, true
			case a > b:
				return 1, true
			}
			return 0, true
		}
	case string:
		if b, ok := b.(string); ok {
			return strings.Compare(a, b), true
		}
	}
	return 0, false
}

func truthy(v any) bool {
	b, ok := v.(bool)
	return ok && b
}

type tokKind int

const (
	tEOF tokKind = iota
	tNum
	tStr
	tIdent
	tOp
)

type token struct {
	kind tokKind
	text string
	pos  int
}

type parser struct {
	src   string
	pos   int
	tok   token
	err   error
	depth int
}

func (p *parser) next() {
	for p.pos < len(p.src) && unicode.IsSpace(rune(p.src[p.pos])) {
		p.pos++
	}
	start := p.pos
	if p.pos >= len(p.src) {
		p.tok = token{tEOF, "", start}
		return
	}
	c := p.src[p.pos]
	switch {
	case c == '"':
		p.pos++
		var b strings.Builder
		for p.pos < len(p.src) && p.src[p.pos] != '"' {
			if p.src[p.pos] == '\\' && p.pos+1 < len(p.src) {
				p.pos++
			}
			b.WriteByte(p.src[p.pos])
			p.pos++
		}
		if p.pos >= len(p.src) {
			p.err = fmt.Errorf("unterminated string at %d", start)
		}
		p.pos++
		p.tok = token{tStr, b.String(), start}
	case c >= '0' && c <= '9' || c == '.':
		for p.pos < len(p.src) && strings.IndexByte("0123456789.eE+-", p.src[p.pos]) >= 0 {
			if (p.src[p.pos] == '+' || p.src[p.pos] == '-') && !strings.ContainsRune("eE", rune(p.src[p.pos-1])) {
				break
			}
			p.pos++
		}
		p.tok = token{tNum, p.src[start:p.pos], start}
	case c == '_' || unicode.IsLetter(rune(c)):
		for p.pos < len(p.src) && (p.src[p.pos] == '_' || unicode.IsLetter(rune(p.src[p.pos])) || unicode.IsDigit(rune(p.src[p.pos]))) {
			p.pos++
		}
		p.tok = token{tIdent, p.src[start:p.pos], start}
	default:
		for _, op := range []string{"==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "(", ")"} {
			if strings.HasPrefix(p.src[p.pos:], op) {
				p.pos += len(op)
				p.tok = token{tOp, op, start}
				return
			}
		}
		p.err = fmt.Errorf("unexpected %q at %d", c, start)
		p.tok = token{tEOF, "", start}
	}
}

func (p *parser) is(words ...string) bool {
	for _, w := range words {
		if (p.tok.kind == tOp || p.tok.kind == tIdent) && p.tok.text == w {
			return true
		}
	}
	return false
}

func (p *parser) or() (node, error) {
	l, err := p.and()
	for err == nil && p.is("or", "||") {
		p.next()
		var r node
		r, err = p.and()
		l = binary{"or", l, r}
	}
	return l, err
}

func (p *parser) and() (node, error) {
	l, err := p.not()
	for err == nil && p.is("and", "&&") {
		p.next()
		var r node
		r, err = p.not()
		l = binary{"and", l, r}
	}
	return l, err
}

func (p *parser) not() (node, error) {
	if p.is("not", "!") {
		p.next()
		x, err := p.not()
		return unary{x}, err
	}
	return p.cmp()
}

func (p *parser) cmp() (node, error) {
	l, err := p.primary()
	if err != nil {
		return nil, err
	}
	if p.tok.kind == tOp && p.is("==", "!=", "<", "<=", ">", ">=") {
		op := p.tok.text
		p.next()
		r, err := p.primary()
		return binary{op, l, r}, err
	}
	return l, nil
}

func (p *parser) primary() (node, error) {
	if p.err != nil {
		return nil, p.err
	}
	t := p.tok
	switch t.kind {
	case tNum:
		v, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return nil, fmt.Errorf("bad number %q at %d", t.text, t.pos)
		}
		p.next()
		return lit{v}, nil
	case tStr:
		p.next()
		return lit{t.text}, nil
	case tIdent:
		p.next()
		switch t.text {
		case "true":
			return lit{true}, nil
		case "false":
			return lit{false}, nil
		case "null":
			return lit{nil}, nil
		}
		return field{t.text}, nil
	case tOp:
		if t.text == "(" {
			if p.depth > 100 {
				return nil, fmt.Errorf("expression nested too deep")
			}
			p.depth++
			p.next()
			n, err := p.or()
			p.depth--
			if err != nil {
				return nil, err
			}
			if !p.is(")") {
				return nil, fmt.Errorf("missing ) at %d", p.tok.pos)
			}
			p.next()
			return n, nil
		}
	}
	return nil, fmt.Errorf("unexpected %q at %d", t.text, t.pos)
}
