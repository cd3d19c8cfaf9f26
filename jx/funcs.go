package jx

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rightsize/rightsize/internal/suggest"
)

// MaxRangeLen is the longest list range may make.
const MaxRangeLen = 1 << 22

// FetchTimeout bounds how long fetch waits for a URL, as CCTools' 30
// seconds of curl do.
const FetchTimeout = 30 * time.Second

// A function takes its evaluated arguments. c is the call, for the
// position of errors.
type function func(e *evaluator, c *Call, args []Value, s *Scope) (Value, error)

// builtin returns JX's built-in function name, other than select and
// project, which evaluate their first argument themselves (query).
func builtin(name string) function {
	switch name {
	case "range":
		return fnRange
	case "format":
		return fnFormat
	case "join":
		return fnJoin
	case "ceil":
		return fnRound(math.Ceil)
	case "floor":
		return fnRound(math.Floor)
	case "basename":
		return fnBasename
	case "dirname":
		return fnDirname
	case "listdir":
		return fnListdir
	case "escape":
		return fnEscape
	case "template":
		return fnTemplate
	case "len":
		return fnLen
	case "keys":
		return fnKeys
	case "values":
		return fnValues
	case "items":
		return fnItems
	case "fetch":
		return fnFetch
	case "schema":
		return fnSchema
	case "like":
		return fnLike
	}
	return nil
}

// functionNames are the names of JX's functions: builtin's, select and
// project.
func functionNames() []string {
	return []string{"range", "format", "join", "ceil", "floor", "basename", "dirname", "listdir", "escape",
		"template", "len", "keys", "values", "items", "fetch", "schema", "like", "select", "project"}
}

func (e *evaluator) call(c *Call, s *Scope) (Value, error) {
	if c.Func == "select" || c.Func == "project" {
		return e.query(c, s)
	}
	f := builtin(c.Func)
	if f == nil {
		if near := suggest.Nearest(c.Func, functionNames()); near != "" {
			return nil, errorf(c.At, "unknown function %s (did you mean %s?)", c.Func, near)
		}
		return nil, errorf(c.At, "unknown function %s", c.Func)
	}
	args, err := e.items(c.Args, s)
	if err != nil {
		return nil, err
	}
	return f(e, c, args, s)
}

func fail(c *Call, format string, args ...any) error {
	return errorf(c.At, "%s: %s", c.Func, fmt.Sprintf(format, args...))
}

// nargs checks that there are between lo and hi arguments.
func nargs(c *Call, args []Value, lo, hi int) error {
	switch {
	case len(args) >= lo && len(args) <= hi:
		return nil
	case lo == hi:
		return fail(c, "takes %s, not %d", plural(lo, "argument"), len(args))
	}
	return fail(c, "takes %d to %d arguments, not %d", lo, hi, len(args))
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// str returns argument i, which must be a string.
func str(c *Call, args []Value, i int, what string) (string, error) {
	s, ok := args[i].(string)
	if !ok {
		return "", fail(c, "the %s must be a string, not %s", what, TypeName(args[i]))
	}
	return s, nil
}

func fnRange(_ *evaluator, c *Call, args []Value, _ *Scope) (Value, error) {
	if err := nargs(c, args, 1, 3); err != nil {
		return nil, err
	}
	n := make([]int64, len(args))
	for i, a := range args {
		v, ok := a.(int64)
		if !ok {
			return nil, fail(c, "takes integers, not %s", TypeName(a))
		}
		n[i] = v
	}
	start, stop, step := int64(0), n[0], int64(1)
	if len(n) > 1 {
		start, stop = n[0], n[1]
	}
	if len(n) > 2 {
		step = n[2]
	}
	if step == 0 {
		return nil, fail(c, "the step must not be zero")
	}
	var count int64
	if step > 0 && stop > start {
		count = (stop - start + step - 1) / step
	} else if step < 0 && stop < start {
		count = (start - stop - step - 1) / -step
	}
	if count < 0 || count > MaxRangeLen {
		return nil, fail(c, "more than %d items", MaxRangeLen)
	}
	items := make([]Value, count)
	for i := range items {
		items[i] = start + int64(i)*step
	}
	return &List{Items: items}, nil
}

// fnFormat is C's printf with one value per conversion and no flags,
// width or precision, as in CCTools: %d and %i take integers, %e %E %f
// %F %g %G floats, %s strings.
func fnFormat(_ *evaluator, c *Call, args []Value, _ *Scope) (Value, error) {
	if len(args) == 0 {
		return nil, fail(c, "needs a format string")
	}
	f, err := str(c, args, 0, "format")
	if err != nil {
		return nil, err
	}
	args = args[1:]
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			b.WriteByte(f[i])
			continue
		}
		i++
		if i == len(f) {
			return nil, fail(c, "the format ends with a lone %%")
		}
		spec := f[i]
		if spec == '%' {
			b.WriteByte('%')
			continue
		}
		if len(args) == 0 {
			return nil, fail(c, "too few arguments for the format %q", f)
		}
		a := args[0]
		args = args[1:]
		text, ok := "", false
		switch spec {
		case 'd', 'i':
			var n int64
			if n, ok = a.(int64); ok {
				text = strconv.FormatInt(n, 10)
			}
		case 'e', 'E', 'f', 'F', 'g', 'G':
			var x float64
			if x, ok = a.(float64); ok {
				text = cFloat(spec, x)
			}
		case 's':
			text, ok = a.(string)
		default:
			return nil, fail(c, "unknown conversion %%%c (JX has %%d %%i %%e %%E %%f %%F %%g %%G %%s %%%%, without flags or widths)", spec)
		}
		if !ok {
			return nil, fail(c, "%%%c does not take %s %s", spec, TypeName(a), Format(a))
		}
		b.WriteString(text)
	}
	if len(args) > 0 {
		return nil, fail(c, "%s more than the format %q uses", plural(len(args), "argument"), f)
	}
	return b.String(), nil
}

// cFloat formats x as C's printf does with the conversion spec.
func cFloat(spec byte, x float64) string {
	upper := spec == 'E' || spec == 'F' || spec == 'G'
	if math.IsInf(x, 0) || math.IsNaN(x) {
		s := formatFloat(x)
		if upper {
			s = strings.ToUpper(s)
		}
		return s
	}
	switch spec {
	case 'e', 'E':
		return fmt.Sprintf("%"+string(spec), x)
	case 'f', 'F':
		return fmt.Sprintf("%f", x)
	}
	s := strconv.FormatFloat(x, 'g', 6, 64)
	if upper {
		s = strings.ToUpper(s)
	}
	return s
}

func fnJoin(_ *evaluator, c *Call, args []Value, _ *Scope) (Value, error) {
	if err := nargs(c, args, 1, 2); err != nil {
		return nil, err
	}
	list, ok := args[0].(*List)
	if !ok {
		return nil, fail(c, "the first argument must be a list, not %s", TypeName(args[0]))
	}
	sep := " "
	if len(args) == 2 {
		var err error
		if sep, err = str(c, args, 1, "separator"); err != nil {
			return nil, err
		}
	}
	parts := make([]string, len(list.Items))
	for i, v := range list.Items {
		s, ok := v.(string)
		if !ok {
			return nil, fail(c, "the list must hold strings only, not %s %s", TypeName(v), Format(v))
		}
		parts[i] = s
	}
	return strings.Join(parts, sep), nil
}

func fnRound(round func(float64) float64) function {
	return func(_ *evaluator, c *Call, args []Value, _ *Scope) (Value, error) {
		if err := nargs(c, args, 1, 1); err != nil {
			return nil, err
		}
		switch v := args[0].(type) {
		case int64:
			return v, nil
		case float64:
			return round(v), nil
		}
		return nil, fail(c, "takes a number, not %s", TypeName(args[0]))
	}
}

// fnBasename is POSIX basename(3), and removes a suffix given as the
// second argument, as basename(1) does.
func fnBasename(_ *evaluator, c *Call, args []Value, _ *Scope) (Value, error) {
	if err := nargs(c, args, 1, 2); err != nil {
		return nil, err
	}
	path, err := str(c, args, 0, "path")
	if err != nil {
		return nil, err
	}
	suffix := ""
	if len(args) == 2 {
		if suffix, err = str(c, args, 1, "suffix"); err != nil {
			return nil, err
		}
	}
	return strings.TrimSuffix(posixBasename(path), suffix), nil
}

func posixBasename(p string) string {
	if p == "" {
		return "."
	}
	p = strings.TrimRight(p, "/")
	if p == "" {
		return "/"
	}
	return p[strings.LastIndexByte(p, '/')+1:]
}

func fnDirname(_ *evaluator, c *Call, args []Value, _ *Scope) (Value, error) {
	if err := nargs(c, args, 1, 1); err != nil {
		return nil, err
	}
	path, err := str(c, args, 0, "path")
	if err != nil {
		return nil, err
	}
	return posixDirname(path), nil
}

// posixDirname is glibc's dirname(3), "//" for "//a" included.
func posixDirname(p string) string {
	t := strings.TrimRight(p, "/")
	if t == "" {
		if p == "" {
			return "."
		}
		return "/"
	}
	slash := strings.LastIndexByte(t, '/')
	if slash < 0 {
		return "."
	}
	d := strings.TrimRight(t[:slash], "/")
	if d == "" {
		if slash == 1 {
			return "//"
		}
		return "/"
	}
	return d
}

func (e *evaluator) path(p string) string {
	if e.opts.Dir == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(e.opts.Dir, p)
}

func fnListdir(e *evaluator, c *Call, args []Value, _ *Scope) (Value, error) {
	if err := nargs(c, args, 1, 1); err != nil {
		return nil, err
	}
	dir, err := str(c, args, 0, "directory")
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(e.path(dir))
	if err != nil {
		return nil, fail(c, "%v", err)
	}
	items := make([]Value, len(entries))
	for i, ent := range entries {
		items[i] = ent.Name()
	}
	return &List{Items: items}, nil
}

// fnEscape quotes a string for the shell: in double quotes, with \
// before " \ $ and `.
func fnEscape(_ *evaluator, c *Call, args []Value, _ *Scope) (Value, error) {
	if err := nargs(c, args, 1, 1); err != nil {
		return nil, err
	}
	s, err := str(c, args, 0, "argument")
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if strings.IndexByte("\"\\$`", s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String(), nil
}

// fnTemplate replaces each {NAME} of a string with NAME's value, taken
// from the object of the second argument or else from the scope; {{ and }}
// stand for braces.
func fnTemplate(e *evaluator, c *Call, args []Value, s *Scope) (Value, error) {
	if err := nargs(c, args, 1, 2); err != nil {
		return nil, err
	}
	t, err := str(c, args, 0, "template")
	if err != nil {
		return nil, err
	}
	var overrides *Object
	if len(args) == 2 {
		var ok bool
		if overrides, ok = args[1].(*Object); !ok {
			return nil, fail(c, "the second argument must be an object, not %s", TypeName(args[1]))
		}
	}
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		ch := t[i]
		switch {
		case (ch == '{' || ch == '}') && i+1 < len(t) && t[i+1] == ch:
			b.WriteByte(ch)
			i++
			continue
		case ch == '}':
			return nil, fail(c, "a } without its {: write }} for a brace")
		case ch != '{':
			b.WriteByte(ch)
			continue
		}
		end := strings.IndexByte(t[i:], '}')
		if end < 0 {
			return nil, fail(c, "a { without its }: write {{ for a brace")
		}
		name := strings.TrimSpace(t[i+1 : i+end])
		if !isName(name) {
			return nil, fail(c, "{%s}: between braces goes one name", t[i+1:i+end])
		}
		i += end
		v, ok := Value(nil), false
		if overrides != nil {
			v, ok = overrides.Lookup(name)
		}
		if !ok {
			if s.lookup(name) == nil {
				return nil, fail(c, "undefined symbol %s", name)
			}
			if v, err = e.eval(&Symbol{At: c.At, Name: name}, s); err != nil {
				return nil, err
			}
		}
		switch v.(type) {
		case string, int64, float64:
			text, _ := atomString(v)
			b.WriteString(text)
		default:
			return nil, fail(c, "{%s} is %s: only strings and numbers go in a template", name, TypeName(v))
		}
	}
	return b.String(), nil
}

func isName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if r != '_' && !(r >= 'a' && r <= 'z') && !(r >= 'A' && r <= 'Z') && !(r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func fnLen(_ *evaluator, c *Call, args []Value, _ *Scope) (Value, error) {
	if err := nargs(c, args, 1, 1); err != nil {
		return nil, err
	}
	list, ok := args[0].(*List)
	if !ok {
		return nil, fail(c, "takes a list, not %s", TypeName(args[0]))
	}
	return int64(len(list.Items)), nil
}

// object returns the only argument, which must be an object.
func object(c *Call, args []Value) (*Object, error) {
	if err := nargs(c, args, 1, 1); err != nil {
		return nil, err
	}
	o, ok := args[0].(*Object)
	if !ok {
		return nil, fail(c, "takes an object, not %s", TypeName(args[0]))
	}
	return o, nil
}

// keys, values and items list an object's pairs last first, as CCTools
// does.
func fnKeys(_ *evaluator, c *Call, args []Value, _ *Scope) (Value, error) {
	return pairs(c, args, func(p Pair) Value { return p.Key })
}

func fnValues(_ *evaluator, c *Call, args []Value, _ *Scope) (Value, error) {
	return pairs(c, args, func(p Pair) Value { return p.Value })
}

func fnItems(_ *evaluator, c *Call, args []Value, _ *Scope) (Value, error) {
	return pairs(c, args, func(p Pair) Value { return &List{Items: []Value{p.Key, p.Value}} })
}

func pairs(c *Call, args []Value, f func(Pair) Value) (Value, error) {
	o, err := object(c, args)
	if err != nil {
		return nil, err
	}
	items := make([]Value, len(o.Pairs))
	for i, p := range o.Pairs {
		items[len(items)-1-i] = f(p)
	}
	return &List{Items: items}, nil
}

// fnFetch reads a JX document from a file or an http(s) URL and
// evaluates it with no names bound.
func fnFetch(e *evaluator, c *Call, args []Value, _ *Scope) (Value, error) {
	if err := nargs(c, args, 1, 1); err != nil {
		return nil, err
	}
	where, err := str(c, args, 0, "path or URL")
	if err != nil {
		return nil, err
	}
	var data []byte
	if strings.HasPrefix(where, "http://") || strings.HasPrefix(where, "https://") {
		data, err = e.get(where)
	} else {
		data, err = os.ReadFile(e.path(where))
	}
	if err != nil {
		return nil, fail(c, "%v", err)
	}
	x, err := Parse(where, data)
	if err != nil {
		return nil, fail(c, "%v", err)
	}
	v, err := Eval(e.ctx, x, nil, &e.opts)
	if err != nil {
		return nil, fail(c, "%v", err)
	}
	return v, nil
}

func (e *evaluator) get(url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(e.ctx, FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	client := e.opts.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// fnSchema names the type of each key of a list of objects, by the first
// object that has it; the keys come last seen first, as in CCTools.
func fnSchema(_ *evaluator, c *Call, args []Value, _ *Scope) (Value, error) {
	if err := nargs(c, args, 1, 1); err != nil {
		return nil, err
	}
	list, ok := args[0].(*List)
	if !ok {
		return nil, fail(c, "takes a list of objects, not %s", TypeName(args[0]))
	}
	var found []Pair
	seen := map[string]bool{}
	for _, item := range list.Items {
		o, ok := item.(*Object)
		if !ok {
			return nil, fail(c, "takes a list of objects, not of %s", TypeName(item))
		}
		for _, p := range o.Pairs {
			if !seen[p.Key] {
				seen[p.Key] = true
				found = append(found, Pair{Key: p.Key, Value: TypeName(p.Value)})
			}
		}
	}
	out := &Object{Pairs: make([]Pair, len(found))}
	for i, p := range found {
		out.Pairs[len(found)-1-i] = p
	}
	return out, nil
}

// fnLike reports whether a string matches a POSIX extended regular
// expression, anywhere in it.
func fnLike(_ *evaluator, c *Call, args []Value, _ *Scope) (Value, error) {
	if err := nargs(c, args, 2, 2); err != nil {
		return nil, err
	}
	s, err := str(c, args, 0, "first argument")
	if err != nil {
		return nil, err
	}
	pattern, err := str(c, args, 1, "regular expression")
	if err != nil {
		return nil, err
	}
	re, err := regexp.CompilePOSIX(pattern)
	if err != nil {
		return nil, fail(c, "%v", err)
	}
	return re.MatchString(s), nil
}

// query is select(COND, LIST) and project(EXPR, LIST): for each object of
// the list, COND or EXPR is evaluated with the object's keys bound.
func (e *evaluator) query(c *Call, s *Scope) (Value, error) {
	if len(c.Args) != 2 || c.Args[0].Comp != nil || c.Args[1].Comp != nil {
		return nil, fail(c, "takes 2 arguments: an expression and a list of objects")
	}
	lv, err := e.eval(c.Args[1].Value, s)
	if err != nil {
		return nil, err
	}
	list, ok := lv.(*List)
	if !ok {
		return nil, fail(c, "the second argument must be a list of objects, not %s", TypeName(lv))
	}
	out := &List{Items: []Value{}}
	for _, item := range list.Items {
		o, ok := item.(*Object)
		if !ok {
			return nil, fail(c, "the second argument must be a list of objects, not of %s", TypeName(item))
		}
		inner := s
		for _, p := range o.Pairs {
			inner = inner.Bind(p.Key, p.Value)
		}
		v, err := e.eval(c.Args[0].Value, inner)
		if err != nil {
			return nil, err
		}
		if c.Func == "project" {
			out.Items = append(out.Items, v)
			continue
		}
		keep, ok := v.(bool)
		if !ok {
			return nil, fail(c, "the condition must be true or false, not %s %s", TypeName(v), Format(v))
		}
		if keep {
			out.Items = append(out.Items, item)
		}
	}
	return out, nil
}
