package jx

import (
	"fmt"
)

// An Expr is a parsed JX expression. Its concrete types are those of this
// file; Pos says where it was written.
type Expr interface {
	Pos() Pos
}

type (
	// A Literal is a constant: null, a boolean, a number or a string.
	Literal struct {
		At    Pos
		Value Value
	}
	// A Symbol is a name, evaluated to the value bound to it.
	Symbol struct {
		At   Pos
		Name string
	}
	// A ListExpr constructs a list; an item may carry a comprehension.
	ListExpr struct {
		At    Pos
		Items []Item
	}
	// An ObjectExpr constructs an object.
	ObjectExpr struct {
		At    Pos
		Pairs []PairExpr
	}
	// A Unary is -X, +X or not X.
	Unary struct {
		At Pos
		Op string
		X  Expr
	}
	// A Binary is X Op Y.
	Binary struct {
		At   Pos // of the operator
		Op   string
		X, Y Expr
	}
	// An Index is X[Index].
	Index struct {
		At       Pos // of the [
		X, Index Expr
	}
	// A Slice is X[Lo:Hi]; Lo and Hi may be nil.
	Slice struct {
		At        Pos // of the [
		X, Lo, Hi Expr
	}
	// A Call is Func(Args).
	Call struct {
		At   Pos // of the function's name
		Func string
		Args []Item
	}
	// A Raise is error(X): evaluating it fails with X as the message.
	Raise struct {
		At Pos
		X  Expr
	}
)

// An Item is an element of a list or an argument of a call: one
// expression, or with a comprehension as many as it yields.
type Item struct {
	Value Expr
	Comp  *Comprehension
}

// A PairExpr is KEY: VALUE in an object constructor.
type PairExpr struct {
	Key, Value Expr
}

// A Comprehension is "for Var in List [if Cond]", followed by more.
type Comprehension struct {
	At   Pos // of "for"
	Var  string
	List Expr
	Cond Expr // nil: every element
	Next *Comprehension
}

func (e *Literal) Pos() Pos    { return e.At }
func (e *Symbol) Pos() Pos     { return e.At }
func (e *ListExpr) Pos() Pos   { return e.At }
func (e *ObjectExpr) Pos() Pos { return e.At }
func (e *Unary) Pos() Pos      { return e.At }
func (e *Binary) Pos() Pos     { return e.At }
func (e *Index) Pos() Pos      { return e.At }
func (e *Slice) Pos() Pos      { return e.At }
func (e *Call) Pos() Pos       { return e.At }
func (e *Raise) Pos() Pos      { return e.At }

// Parse parses src, a JX expression read from the file name (used in
// positions only). One trailing ";" is allowed; anything else after the
// expression is an error.
func Parse(name string, src []byte) (Expr, error) {
	p := &parser{lex: lexer{src: string(src), line: 1, col: 1, file: name}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tEOF {
		return nil, p.errorf(p.tok.pos, "no expression: the input is empty")
	}
	e, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.tok.is(tPunct, ";") {
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	if p.tok.kind != tEOF {
		return nil, p.errorf(p.tok.pos, "unexpected %s after the expression", p.tok)
	}
	return e, nil
}

// ParseString parses an expression given as a string, such as the
// EXPR of a command line's VAR=EXPR; name says where it came from.
func ParseString(name, src string) (Expr, error) { return Parse(name, []byte(src)) }

type parser struct {
	lex lexer
	tok token
}

func (p *parser) advance() error {
	t, err := p.lex.next()
	p.tok = t
	return err
}

func (p *parser) errorf(pos Pos, format string, args ...any) error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// expect consumes the punctuation text or fails saying what it closes.
func (p *parser) expect(text, what string) error {
	if !p.tok.is(tPunct, text) {
		return p.errorf(p.tok.pos, "expected %q %s, found %s", text, what, p.tok)
	}
	return p.advance()
}

// Binary operators by precedence, loosest first, as the JX manual lists
// them; "not" sits between "and" and the comparisons.
var binaryLevels = [][]string{
	{"or"},
	{"and"},
	nil, // not
	{"==", "!=", "<", "<=", ">", ">="},
	{"+", "-"},
	{"*", "/", "%"},
}

const notLevel = 2

func (p *parser) expr() (Expr, error) { return p.binary(0) }

func (p *parser) binary(level int) (Expr, error) {
	if level == len(binaryLevels) {
		return p.unary()
	}
	if level == notLevel {
		if p.tok.is(tOp, "not") {
			at := p.tok.pos
			if err := p.advance(); err != nil {
				return nil, err
			}
			x, err := p.binary(level)
			if err != nil {
				return nil, err
			}
			return &Unary{At: at, Op: "not", X: x}, nil
		}
		return p.binary(level + 1)
	}
	x, err := p.binary(level + 1)
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tOp && contains(binaryLevels[level], p.tok.text) {
		op, at := p.tok.text, p.tok.pos
		if err := p.advance(); err != nil {
			return nil, err
		}
		y, err := p.binary(level + 1)
		if err != nil {
			return nil, err
		}
		x = &Binary{At: at, Op: op, X: x, Y: y}
	}
	return x, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (p *parser) unary() (Expr, error) {
	switch {
	case p.tok.is(tOp, "-") || p.tok.is(tOp, "+"):
		op, at := p.tok.text, p.tok.pos
		if err := p.advance(); err != nil {
			return nil, err
		}
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		// A signed number is a constant, as in JSON.
		if lit, ok := x.(*Literal); ok && op == "-" {
			switch v := lit.Value.(type) {
			case int64:
				return &Literal{At: at, Value: -v}, nil
			case float64:
				return &Literal{At: at, Value: -v}, nil
			}
		}
		return &Unary{At: at, Op: op, X: x}, nil
	case p.tok.is(tOp, "not"):
		// "not" inside an arithmetic operand: -not x, 1 + not x.
		return nil, p.errorf(p.tok.pos, "\"not\" here needs parentheses: (not ...)")
	case p.tok.is(tKeyword, "error"):
		at := p.tok.pos
		if err := p.advance(); err != nil {
			return nil, err
		}
		if err := p.expect("(", "after error"); err != nil {
			return nil, err
		}
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		if err := p.expect(")", "to close error("); err != nil {
			return nil, err
		}
		return &Raise{At: at, X: x}, nil
	}
	return p.postfix()
}

func (p *parser) postfix() (Expr, error) {
	x, err := p.atom()
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.tok.is(tPunct, "["):
			at := p.tok.pos
			if err := p.advance(); err != nil {
				return nil, err
			}
			var lo, hi Expr
			if !p.tok.is(tPunct, ":") {
				if lo, err = p.expr(); err != nil {
					return nil, err
				}
			}
			if !p.tok.is(tPunct, ":") {
				if err := p.expect("]", "to close the index"); err != nil {
					return nil, err
				}
				x = &Index{At: at, X: x, Index: lo}
				continue
			}
			if err := p.advance(); err != nil {
				return nil, err
			}
			if !p.tok.is(tPunct, "]") {
				if hi, err = p.expr(); err != nil {
					return nil, err
				}
			}
			if err := p.expect("]", "to close the slice"); err != nil {
				return nil, err
			}
			x = &Slice{At: at, X: x, Lo: lo, Hi: hi}
		case p.tok.is(tPunct, "("):
			sym, ok := x.(*Symbol)
			if !ok {
				return nil, p.errorf(p.tok.pos, "only a function's name can be called")
			}
			open := p.tok.pos
			if err := p.advance(); err != nil {
				return nil, err
			}
			args, err := p.items(open, ")", "arguments")
			if err != nil {
				return nil, err
			}
			x = &Call{At: sym.At, Func: sym.Name, Args: args}
		default:
			return x, nil
		}
	}
}

func (p *parser) atom() (Expr, error) {
	t := p.tok
	switch t.kind {
	case tInt:
		return &Literal{At: t.pos, Value: t.i}, p.advance()
	case tFloat:
		return &Literal{At: t.pos, Value: t.f}, p.advance()
	case tString:
		return &Literal{At: t.pos, Value: t.text}, p.advance()
	case tSymbol:
		return &Symbol{At: t.pos, Name: t.text}, p.advance()
	case tKeyword:
		switch t.text {
		case "null":
			return &Literal{At: t.pos}, p.advance()
		case "true", "false":
			return &Literal{At: t.pos, Value: t.text == "true"}, p.advance()
		}
	case tPunct:
		switch t.text {
		case "(":
			if err := p.advance(); err != nil {
				return nil, err
			}
			x, err := p.expr()
			if err != nil {
				return nil, err
			}
			return x, p.expect(")", fmt.Sprintf("to close the ( at %d:%d", t.pos.Line, t.pos.Col))
		case "[":
			if err := p.advance(); err != nil {
				return nil, err
			}
			items, err := p.items(t.pos, "]", "list")
			if err != nil {
				return nil, err
			}
			return &ListExpr{At: t.pos, Items: items}, nil
		case "{":
			return p.object()
		}
	case tEOF:
		return nil, p.errorf(t.pos, "unexpected end of input: an expression is missing")
	}
	return nil, p.errorf(t.pos, "unexpected %s: expected a value", t)
}

// items parses the items of a list or call after its opening bracket, up
// to and including the closing one; a trailing comma is allowed.
func (p *parser) items(open Pos, closing, what string) ([]Item, error) {
	var items []Item
	for !p.tok.is(tPunct, closing) {
		x, err := p.expr()
		if err != nil {
			return nil, err
		}
		it := Item{Value: x}
		if it.Comp, err = p.comprehension(); err != nil {
			return nil, err
		}
		items = append(items, it)
		if p.tok.is(tPunct, ",") {
			if err := p.advance(); err != nil {
				return nil, err
			}
			continue
		}
		if !p.tok.is(tPunct, closing) {
			if p.tok.kind == tEOF {
				return nil, p.errorf(p.tok.pos, "unexpected end of input: the %s begun at %d:%d is not closed with %q", what, open.Line, open.Col, closing)
			}
			return nil, p.errorf(p.tok.pos, "expected \",\" or %q in the %s, found %s", closing, what, p.tok)
		}
	}
	return items, p.advance()
}

func (p *parser) comprehension() (*Comprehension, error) {
	if !p.tok.is(tKeyword, "for") {
		return nil, nil
	}
	c := &Comprehension{At: p.tok.pos}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tSymbol {
		return nil, p.errorf(p.tok.pos, "expected a variable name after \"for\", found %s", p.tok)
	}
	c.Var = p.tok.text
	if err := p.advance(); err != nil {
		return nil, err
	}
	if !p.tok.is(tKeyword, "in") {
		return nil, p.errorf(p.tok.pos, "expected \"in\" after \"for %s\", found %s", c.Var, p.tok)
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	var err error
	if c.List, err = p.expr(); err != nil {
		return nil, err
	}
	if p.tok.is(tKeyword, "if") {
		if err := p.advance(); err != nil {
			return nil, err
		}
		if c.Cond, err = p.expr(); err != nil {
			return nil, err
		}
	}
	if c.Next, err = p.comprehension(); err != nil {
		return nil, err
	}
	return c, nil
}

func (p *parser) object() (Expr, error) {
	o := &ObjectExpr{At: p.tok.pos}
	if err := p.advance(); err != nil {
		return nil, err
	}
	for !p.tok.is(tPunct, "}") {
		k, err := p.expr()
		if err != nil {
			return nil, err
		}
		if !p.tok.is(tPunct, ":") {
			return nil, p.errorf(p.tok.pos, "expected \":\" after the key, found %s", p.tok)
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		v, err := p.expr()
		if err != nil {
			return nil, err
		}
		o.Pairs = append(o.Pairs, PairExpr{Key: k, Value: v})
		if p.tok.is(tPunct, ",") {
			if err := p.advance(); err != nil {
				return nil, err
			}
			continue
		}
		if !p.tok.is(tPunct, "}") {
			if p.tok.kind == tEOF {
				return nil, p.errorf(p.tok.pos, "unexpected end of input: the object begun at %d:%d is not closed with \"}\"", o.At.Line, o.At.Col)
			}
			return nil, p.errorf(p.tok.pos, "expected \",\" or \"}\" in the object, found %s", p.tok)
		}
	}
	return o, p.advance()
}
