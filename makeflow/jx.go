package makeflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/rightsize/rightsize/internal/jsonpos"
	"github.com/rightsize/rightsize/jx"
)

// The JX form of a workflow, as CCTools' makeflow --jx reads it, is a JX
// document (package jx) that evaluates to the JSON form (json.go). Its
// top-level "define" object names expressions the rest may use; the
// variables of --jx-args and --jx-define are bound over them:
//
//	{
//	  "define": {"N": 10},
//	  "rules": [
//	    {"command": format("simulate %d > out.%d", i, i), "outputs": ["out." + i]}
//	      for i in range(N)
//	  ]
//	}

// JXOptions are what evaluating a JX workflow takes from outside it.
type JXOptions struct {
	// Vars binds the workflow's variables (--jx-args, --jx-define), over
	// its "define".
	Vars *jx.Scope
	// Dir is where listdir() and fetch() find relative paths: the
	// directory the workflow runs in. "" is the current directory.
	Dir string
}

// ParseJXFile reads and evaluates a workflow in CCTools' JX form from the
// file at path.
func ParseJXFile(ctx context.Context, path string, opts JXOptions) (*Workflow, error) {
	src, err := readWorkflow(path)
	if err != nil {
		return nil, err
	}
	return ParseJX(ctx, path, src, opts)
}

// ParseJX evaluates a workflow in CCTools' JX form. Errors carry the
// file:line:column of the expression, rule or key they concern.
func ParseJX(ctx context.Context, name string, src []byte, opts JXOptions) (*Workflow, error) {
	x, err := jx.Parse(name, src)
	if err != nil {
		return nil, jxErrors(err)
	}
	v, err := jx.EvalDocument(ctx, x, opts.Vars, &jx.Options{Dir: opts.Dir})
	if err != nil {
		return nil, jxErrors(err)
	}
	top, ok := v.(*jx.Object)
	if !ok {
		return nil, ErrorList{{Pos: jxPos(x.Pos()), Msg: fmt.Sprintf("a workflow is an object with \"rules\", not %s", jx.TypeName(v))}}
	}
	var (
		tw       jsonWorkflow
		rules    []jsonText
		errs     ErrorList
		hasRules bool
	)
	for _, p := range top.Pairs {
		switch p.Key {
		case "define":
		case "rules":
			list, ok := p.Value.(*jx.List)
			if !ok {
				errs = append(errs, &Error{Pos: jxPos(p.Pos), Msg: fmt.Sprintf("\"rules\" must be a list, not %s", jx.TypeName(p.Value))})
				continue
			}
			hasRules = true
			for i, item := range list.Items {
				pos := jxPos(p.Pos)
				if o, ok := item.(*jx.Object); ok && o.Pos.IsValid() {
					pos = jxPos(o.Pos)
				}
				raw, err := jx.MarshalJSON(item)
				if err != nil {
					errs = append(errs, &Error{Pos: pos, Msg: fmt.Sprintf("rule %d: %v", i, err)})
					continue
				}
				rules = append(rules, jxText(item, raw, pos))
			}
		case "environment", "categories", "default_category":
			one := &jx.Object{Pairs: []jx.Pair{p}}
			raw, err := jx.MarshalJSON(one)
			if err != nil {
				errs = append(errs, &Error{Pos: jxPos(p.Pos), Msg: fmt.Sprintf("%q: %v", p.Key, err)})
				continue
			}
			text := jxText(one, raw, jxPos(p.Pos))
			if err := decodeValue(raw, &tw, "a workflow"); err != nil {
				pos := text.pos
				var ve *jsonpos.ValueError
				if errors.As(err, &ve) {
					pos = text.at(ve.Path)
				}
				errs = append(errs, &Error{Pos: pos, Msg: err.Error()})
			}
		default:
			errs = append(errs, &Error{Pos: jxPos(p.Pos), Msg: fmt.Sprintf("unknown key %q: a workflow has \"rules\", \"environment\", \"categories\", \"default_category\" and \"define\"", p.Key)})
		}
	}
	if !hasRules && len(errs) == 0 {
		errs = append(errs, &Error{Pos: jxPos(top.Pos), Msg: "a workflow needs a \"rules\" list"})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return workflowFromJSON(name, &tw, rules, jxPos(top.Pos))
}

// jxErrors turns a JX error into the ErrorList of a workflow.
func jxErrors(err error) error {
	var e *jx.Error
	if errors.As(err, &e) {
		return ErrorList{{Pos: jxPos(e.Pos), Msg: e.Msg}}
	}
	return err
}

func jxPos(p jx.Pos) Pos { return Pos{File: p.File, Line: p.Line, Col: p.Col} }

// jxArgs returns the variables a JX sub-workflow is evaluated with, in
// their order: its "args".
func (n *Nested) jxArgs() (*jx.Object, error) {
	if n.Args == "" {
		return &jx.Object{}, nil
	}
	return jx.EvalObject(context.Background(), "args", []byte(n.Args), nil, nil)
}
