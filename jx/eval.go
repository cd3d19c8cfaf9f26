package jx

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/rightsize/rightsize/internal/suggest"
)

// A Scope binds names to values, or to definitions (the expressions of a
// document's "define" object). The zero Scope, a nil *Scope, binds
// nothing. Scopes are immutable: Bind and Define return a new one.
type Scope struct {
	parent *Scope
	name   string
	value  Value
	define Expr // not nil: a definition
}

// names returns the names s binds, for the "did you mean" of an
// undefined one.
func (s *Scope) names() []string {
	var names []string
	for ; s != nil; s = s.parent {
		names = append(names, s.name)
	}
	return names
}

// Bind returns s with name bound to v, hiding any earlier binding.
func (s *Scope) Bind(name string, v Value) *Scope {
	return &Scope{parent: s, name: name, value: v}
}

// Define returns s with name bound to the expression x. As in CCTools, x
// is evaluated each time name is used, in the scope of the use: a
// definition may refer to other definitions, or to a comprehension's
// variable.
func (s *Scope) Define(name string, x Expr) *Scope {
	return &Scope{parent: s, name: name, define: x}
}

func (s *Scope) lookup(name string) *Scope {
	for ; s != nil; s = s.parent {
		if s.name == name {
			return s
		}
	}
	return nil
}

// over returns the bindings of s, in their order, put over base.
func (s *Scope) over(base *Scope) *Scope {
	var chain []*Scope
	for ; s != nil; s = s.parent {
		chain = append(chain, s)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		c := *chain[i]
		c.parent = base
		base = &c
	}
	return base
}

// Options are what evaluation needs from outside the expression.
type Options struct {
	// Dir is where listdir and fetch look for relative paths; "" is the
	// current directory.
	Dir string
	// HTTPClient fetches the http and https URLs of fetch; nil is
	// http.DefaultClient. fetch gives up after FetchTimeout.
	HTTPClient *http.Client
}

// Eval evaluates x with the names scope binds. opts may be nil.
func Eval(ctx context.Context, x Expr, scope *Scope, opts *Options) (Value, error) {
	e := &evaluator{ctx: ctx, active: map[*Scope]bool{}}
	if opts != nil {
		e.opts = *opts
	}
	return e.eval(x, scope)
}

// EvalDocument evaluates a whole document as CCTools' jx2json and
// makeflow --jx do: if x is an object with a "define" object, each of its
// keys is defined (Scope.Define) as its expression, then the names scope
// binds (command-line arguments) are bound over these definitions, and x
// is evaluated with them. The "define" object stays in the result,
// evaluated.
func EvalDocument(ctx context.Context, x Expr, scope *Scope, opts *Options) (Value, error) {
	if o, ok := x.(*ObjectExpr); ok {
		var defines *Scope
		for _, p := range o.Pairs {
			if k, ok := p.Key.(*Literal); !ok || k.Value != "define" {
				continue
			}
			d, ok := p.Value.(*ObjectExpr)
			if !ok {
				return nil, &Error{Pos: p.Value.Pos(), Msg: "\"define\" must be an object of \"NAME\": EXPRESSION"}
			}
			for _, dp := range d.Pairs {
				name, ok := dp.Key.(*Literal)
				if _, isString := name.Value.(string); !ok || !isString {
					return nil, &Error{Pos: dp.Key.Pos(), Msg: "a name in \"define\" must be a string constant"}
				}
				defines = defines.Define(name.Value.(string), dp.Value)
			}
			break
		}
		scope = scope.over(defines)
	}
	return Eval(ctx, x, scope, opts)
}

type evaluator struct {
	ctx    context.Context
	opts   Options
	active map[*Scope]bool // definitions being evaluated
}

func errorf(pos Pos, format string, args ...any) error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

func (e *evaluator) eval(x Expr, s *Scope) (Value, error) {
	switch x := x.(type) {
	case *Literal:
		return x.Value, nil
	case *Symbol:
		b := s.lookup(x.Name)
		switch {
		case b == nil:
			if near := suggest.Nearest(x.Name, s.names()); near != "" {
				return nil, errorf(x.At, "undefined symbol %s (did you mean %s?)", x.Name, near)
			}
			return nil, errorf(x.At, "undefined symbol %s", x.Name)
		case b.define == nil:
			return b.value, nil
		case e.active[b]:
			return nil, errorf(x.At, "%s is defined in terms of itself", x.Name)
		}
		e.active[b] = true
		defer delete(e.active, b)
		return e.eval(b.define, s)
	case *ListExpr:
		items, err := e.items(x.Items, s)
		if err != nil {
			return nil, err
		}
		return &List{Items: items, Pos: x.At}, nil
	case *ObjectExpr:
		o := &Object{Pos: x.At, Pairs: make([]Pair, 0, len(x.Pairs))}
		for _, p := range x.Pairs {
			k, err := e.eval(p.Key, s)
			if err != nil {
				return nil, err
			}
			key, ok := k.(string)
			if !ok {
				return nil, errorf(p.Key.Pos(), "an object's key must be a string, not %s %s", TypeName(k), Format(k))
			}
			v, err := e.eval(p.Value, s)
			if err != nil {
				return nil, err
			}
			o.Pairs = append(o.Pairs, Pair{Key: key, Value: v, Pos: p.Key.Pos()})
		}
		return o, nil
	case *Unary:
		v, err := e.eval(x.X, s)
		if err != nil {
			return nil, err
		}
		return unary(x, v)
	case *Binary:
		return e.binary(x, s)
	case *Index:
		v, err := e.eval(x.X, s)
		if err != nil {
			return nil, err
		}
		i, err := e.eval(x.Index, s)
		if err != nil {
			return nil, err
		}
		return index(x, v, i)
	case *Slice:
		return e.slice(x, s)
	case *Call:
		return e.call(x, s)
	case *Raise:
		v, err := e.eval(x.X, s)
		if err != nil {
			return nil, err
		}
		msg, ok := v.(string)
		if !ok {
			msg = Format(v)
		}
		return nil, &Error{Pos: x.At, Msg: msg}
	}
	panic(fmt.Sprintf("jx: unknown expression %T", x))
}

// items evaluates the items of a list or call, expanding comprehensions.
func (e *evaluator) items(items []Item, s *Scope) ([]Value, error) {
	var out []Value
	for _, it := range items {
		if it.Comp == nil {
			v, err := e.eval(it.Value, s)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			continue
		}
		var err error
		if out, err = e.comprehension(out, it.Value, it.Comp, s); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (e *evaluator) comprehension(out []Value, body Expr, c *Comprehension, s *Scope) ([]Value, error) {
	lv, err := e.eval(c.List, s)
	if err != nil {
		return nil, err
	}
	list, ok := lv.(*List)
	if !ok {
		return nil, errorf(c.List.Pos(), "\"for %s in\" needs a list, not %s", c.Var, TypeName(lv))
	}
	for _, item := range list.Items {
		if err := e.ctx.Err(); err != nil {
			return nil, err
		}
		inner := s.Bind(c.Var, item)
		if c.Cond != nil {
			cv, err := e.eval(c.Cond, inner)
			if err != nil {
				return nil, err
			}
			keep, ok := cv.(bool)
			if !ok {
				return nil, errorf(c.Cond.Pos(), "the condition after \"if\" must be true or false, not %s %s", TypeName(cv), Format(cv))
			}
			if !keep {
				continue
			}
		}
		if c.Next != nil {
			if out, err = e.comprehension(out, body, c.Next, inner); err != nil {
				return nil, err
			}
			continue
		}
		v, err := e.eval(body, inner)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func unary(x *Unary, v Value) (Value, error) {
	switch x.Op {
	case "not":
		if b, ok := v.(bool); ok {
			return !b, nil
		}
	case "-":
		switch v := v.(type) {
		case int64:
			return -v, nil
		case float64:
			return -v, nil
		}
	case "+":
		switch v.(type) {
		case int64, float64, string:
			return v, nil
		}
	}
	return nil, errorf(x.At, "unsupported operator %s on %s", x.Op, TypeName(v))
}

func (e *evaluator) binary(x *Binary, s *Scope) (Value, error) {
	a, err := e.eval(x.X, s)
	if err != nil {
		return nil, err
	}
	if x.Op == "and" || x.Op == "or" {
		left, ok := a.(bool)
		if !ok {
			return nil, errorf(x.At, "%s needs true or false on its left, not %s", x.Op, TypeName(a))
		}
		if left == (x.Op == "or") {
			return left, nil
		}
		b, err := e.eval(x.Y, s)
		if err != nil {
			return nil, err
		}
		right, ok := b.(bool)
		if !ok {
			return nil, errorf(x.At, "%s needs true or false on its right, not %s", x.Op, TypeName(b))
		}
		return right, nil
	}
	b, err := e.eval(x.Y, s)
	if err != nil {
		return nil, err
	}
	return binary(x, a, b)
}

// binary applies an operator other than "and" and "or", by CCTools' type
// rules: integers become floats beside floats; a string added to a
// boolean or number takes its text; values of different types are never
// equal.
func binary(x *Binary, a, b Value) (Value, error) {
	if ai, ok := a.(int64); ok {
		if _, ok := b.(float64); ok {
			a = float64(ai)
		}
	}
	if bi, ok := b.(int64); ok {
		if _, ok := a.(float64); ok {
			b = float64(bi)
		}
	}
	if x.Op == "+" {
		_, as := a.(string)
		_, bs := b.(string)
		if as || bs {
			at, aok := atomString(a)
			bt, bok := atomString(b)
			if aok && bok {
				return at + bt, nil
			}
		}
	}
	if TypeName(a) != TypeName(b) {
		switch x.Op {
		case "==":
			return false, nil
		case "!=":
			return true, nil
		}
		return nil, errorf(x.At, "mismatched types for %s: %s and %s", x.Op, TypeName(a), TypeName(b))
	}
	switch x.Op {
	case "==":
		return equal(a, b), nil
	case "!=":
		return !equal(a, b), nil
	}
	switch a := a.(type) {
	case int64:
		return arithmetic(x, a, b.(int64), func(a, b int64) int64 { return a % b })
	case float64:
		// CCTools takes the remainder of the integer parts.
		return arithmetic(x, a, b.(float64), func(a, b float64) float64 {
			if int64(b) == 0 {
				return math.NaN()
			}
			return float64(int64(a) % int64(b))
		})
	case string:
		return compare(x, strings.Compare(a, b.(string)), "string")
	case *List:
		if x.Op == "+" {
			items := append(append(make([]Value, 0, len(a.Items)+len(b.(*List).Items)), a.Items...), b.(*List).Items...)
			return &List{Items: items}, nil
		}
	}
	return nil, errorf(x.At, "unsupported operator %s on %s", x.Op, TypeName(a))
}

// arithmetic applies x's arithmetic or ordering operator to two numbers
// of one type; rem is the remainder, NaN where it divides by zero.
func arithmetic[T int64 | float64](x *Binary, a, b T, rem func(a, b T) T) (Value, error) {
	switch x.Op {
	case "+":
		return a + b, nil
	case "-":
		return a - b, nil
	case "*":
		return a * b, nil
	case "/", "%":
		if b == 0 {
			return nil, errorf(x.At, "division by zero")
		}
		if x.Op == "/" {
			return a / b, nil
		}
		r := rem(a, b)
		if r != r { // NaN
			return nil, errorf(x.At, "division by zero")
		}
		return r, nil
	}
	if a != a || b != b { // NaN is not ordered
		return false, nil
	}
	return compare(x, cmp.Compare(a, b), TypeName(a))
}

// compare turns the comparison c (-1, 0, 1) of two values of the type
// typ into the result of x's ordering operator.
func compare(x *Binary, c int, typ string) (Value, error) {
	switch x.Op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	case ">=":
		return c >= 0, nil
	}
	return nil, errorf(x.At, "unsupported operator %s on %s", x.Op, typ)
}

func index(x *Index, v, i Value) (Value, error) {
	switch v := v.(type) {
	case *Object:
		key, ok := i.(string)
		if !ok {
			return nil, errorf(x.At, "an object's key must be a string, not %s", TypeName(i))
		}
		if val, ok := v.Lookup(key); ok {
			return val, nil
		}
		return nil, errorf(x.At, "key not found: %q", key)
	case *List:
		n, ok := i.(int64)
		if !ok {
			return nil, errorf(x.At, "a list's index must be an integer, not %s", TypeName(i))
		}
		if n < 0 {
			n += int64(len(v.Items))
		}
		if n < 0 || n >= int64(len(v.Items)) {
			return nil, errorf(x.At, "index %s out of range: the list has %d items", Format(i), len(v.Items))
		}
		return v.Items[n], nil
	}
	return nil, errorf(x.At, "%s cannot be indexed: only lists and objects can", TypeName(v))
}

func (e *evaluator) slice(x *Slice, s *Scope) (Value, error) {
	v, err := e.eval(x.X, s)
	if err != nil {
		return nil, err
	}
	list, ok := v.(*List)
	if !ok {
		return nil, errorf(x.At, "only lists can be sliced, not %s", TypeName(v))
	}
	n := int64(len(list.Items))
	bound := func(b Expr, def int64) (int64, error) {
		if b == nil {
			return def, nil
		}
		bv, err := e.eval(b, s)
		if err != nil {
			return 0, err
		}
		i, ok := bv.(int64)
		if !ok {
			return 0, errorf(b.Pos(), "slice bounds must be integers, not %s", TypeName(bv))
		}
		if i < 0 {
			i += n
		}
		return min(max(i, 0), n), nil
	}
	lo, err := bound(x.Lo, 0)
	if err != nil {
		return nil, err
	}
	hi, err := bound(x.Hi, n)
	if err != nil {
		return nil, err
	}
	if lo >= hi {
		return &List{Items: []Value{}}, nil
	}
	return &List{Items: append([]Value(nil), list.Items[lo:hi]...)}, nil
}
