package jx

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// ArgsFile binds the keys of the object that the JX file at path
// evaluates to, over scope, as CCTools' --jx-args does: the file is
// evaluated with the names scope already binds.
func ArgsFile(ctx context.Context, scope *Scope, path string, opts *Options) (*Scope, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	o, err := EvalObject(ctx, path, src, scope, opts)
	if err != nil {
		return nil, err
	}
	for _, p := range o.Pairs {
		scope = scope.Bind(p.Key, p.Value)
	}
	return scope, nil
}

// EvalObject parses src, read from the file name, and evaluates it with
// the names scope binds, to an object: a file of arguments or options.
func EvalObject(ctx context.Context, name string, src []byte, scope *Scope, opts *Options) (*Object, error) {
	x, err := Parse(name, src)
	if err != nil {
		return nil, err
	}
	v, err := Eval(ctx, x, scope, opts)
	if err != nil {
		return nil, err
	}
	o, ok := v.(*Object)
	if !ok {
		return nil, &Error{Pos: x.Pos(), Msg: fmt.Sprintf("expected an object, not %s", TypeName(v))}
	}
	return o, nil
}

// DefineArg binds VAR to the value of EXPR, given as "VAR=EXPR", over
// scope, as CCTools' --jx-define does: EXPR is evaluated with the names
// scope already binds.
func DefineArg(ctx context.Context, scope *Scope, def string, opts *Options) (*Scope, error) {
	name, src, ok := strings.Cut(def, "=")
	if !ok || !isName(name) {
		return nil, fmt.Errorf("%q: expected VAR=EXPR, VAR a name", def)
	}
	// Positions are in EXPR, which has no file: "1:3".
	x, err := ParseString("", src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", def, err)
	}
	v, err := Eval(ctx, x, scope, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", def, err)
	}
	return scope.Bind(name, v), nil
}
