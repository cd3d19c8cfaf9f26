package makeflow

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/rightsize/rightsize/internal/jsonpos"
	"github.com/rightsize/rightsize/jx"
)

// The errors of a workflow's JSON form (and of a JX workflow evaluated to
// it) say, in a user's words, which value is wrong and why, at the place
// it is written: `rule 3: "command" must be a string, not a number` at the
// value's file:line:column, rather than encoding/json's "cannot unmarshal
// number into Go struct field jsonRule.command of type string" at the
// rule.

// A jsonText is one decoded JSON value of a workflow, a rule or the whole
// workflow, with what it takes to place its errors.
type jsonText struct {
	raw json.RawMessage
	pos Pos // where the value starts
	// find returns where the value that path (object keys, list indexes
	// in decimal) leads to within raw is written: its key, for a member
	// of an object. ok is false where path leads nowhere.
	find func(path []string) (pos Pos, ok bool)
}

// at returns where the value at path is written, or the whole value's
// position.
func (t jsonText) at(path []string) Pos {
	if t.find != nil {
		if p, ok := t.find(path); ok {
			return p
		}
	}
	return t.pos
}

// jsonFileText is a value that is a slice of a JSON file's text src,
// starting at offset base.
func jsonFileText(name string, src []byte, base int64, raw json.RawMessage) jsonText {
	find := func(path []string) (Pos, bool) {
		off, ok := jsonpos.Locate(raw, path)
		return offsetPos(name, src, base+off), ok
	}
	return jsonText{raw: raw, pos: offsetPos(name, src, base), find: find}
}

// jxText is a value of a JX workflow, v, marshalled to raw; its paths are
// found in v, at the keys' positions (a JX string or number has none of
// its own).
func jxText(v jx.Value, raw json.RawMessage, pos Pos) jsonText {
	find := func(path []string) (Pos, bool) {
		at, found := pos, false
		cur := v
		for _, k := range path {
			var where jx.Pos
			switch x := cur.(type) {
			case *jx.Object:
				i := slices.IndexFunc(x.Pairs, func(p jx.Pair) bool { return p.Key == k })
				if i < 0 {
					return at, found
				}
				cur, where = x.Pairs[i].Value, x.Pairs[i].Pos
			case *jx.List:
				n, err := strconv.Atoi(k)
				if err != nil || n < 0 || n >= len(x.Items) {
					return at, found
				}
				cur = x.Items[n]
				if l, ok := cur.(*jx.List); ok {
					where = l.Pos
				} else if o, ok := cur.(*jx.Object); ok {
					where = o.Pos
				}
			default:
				return at, found
			}
			if where.IsValid() {
				at, found = jxPos(where), true
			}
		}
		return at, found
	}
	return jsonText{raw: raw, pos: pos, find: find}
}

// valueErrorf returns a *jsonpos.ValueError at path: a problem with the
// value there (within a rule, or the workflow), its message naming it.
func valueErrorf(path []string, format string, args ...any) error {
	return &jsonpos.ValueError{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// decodeValue decodes raw into v as jsonpos.Decode does, its error a
// *jsonpos.ValueError in a user's words where it concerns a value. what
// names the whole value ("a rule") where the error is about it.
func decodeValue(raw []byte, v any, what string) error {
	if err := jsonpos.Decode(raw, v); err != nil {
		return jsonpos.Explain(err, raw, v, nil, what)
	}
	return nil
}
