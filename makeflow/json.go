package makeflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/rightsize/rightsize/internal/jsonpos"
)

// The JSON form of a workflow, as CCTools' makeflow --json reads it:
//
//	{
//	  "environment": {"NAME": "value"},              exported to every rule
//	  "categories": {"big": {"resources": {...}, "environment": {...}}},
//	  "default_category": "default",
//	  "rules": [
//	    {"command": "sort in > out",
//	     "inputs": ["in", {"dag_name": "local", "task_name": "remote"}],
//	     "outputs": ["out"],
//	     "local_job": false, "category": "big", "allocation": "first",
//	     "environment": {"NAME": "value"},
//	     "resources": {"cores": 1, "memory": 100, "disk": 100, "gpus": 0, "wall-time": 60}},
//	    {"makeflow": {"path": "sub.json", "cwd": "dir"}, "outputs": [...]}
//	  ]
//	}
//
// A rule may instead run a sub-workflow written in JX, with variables:
//
//	{"workflow": "sub.jx", "args": {"n": 10}, "outputs": ["out.10"]}
//
// Memory and disk are in MB, wall time in seconds. JX expressions
// ("define", comprehensions) are not evaluated: this is plain JSON. The JX
// form (jx.go) evaluates them, to this form.

type jsonWorkflow struct {
	Rules           json.RawMessage         `json:"rules"`
	Environment     map[string]string       `json:"environment"`
	Categories      map[string]jsonCategory `json:"categories"`
	DefaultCategory string                  `json:"default_category"`
	Define          json.RawMessage         `json:"define"`
	Variables       json.RawMessage         `json:"variables"`
}

type jsonCategory struct {
	Resources   *jsonResources    `json:"resources"`
	Environment map[string]string `json:"environment"`
}

type jsonResources struct {
	Cores    int64 `json:"cores"`
	Memory   int64 `json:"memory"`
	Disk     int64 `json:"disk"`
	GPUs     int64 `json:"gpus"`
	WallTime int64 `json:"wall-time"`
}

type jsonRule struct {
	Command     *string           `json:"command"`
	Makeflow    *jsonNested       `json:"makeflow"`
	Workflow    *string           `json:"workflow"`
	Args        json.RawMessage   `json:"args"`
	Inputs      []json.RawMessage `json:"inputs"`
	Outputs     []json.RawMessage `json:"outputs"`
	LocalJob    bool              `json:"local_job"`
	Category    string            `json:"category"`
	Allocation  string            `json:"allocation"`
	Environment map[string]string `json:"environment"`
	Resources   *jsonResources    `json:"resources"`
}

type jsonNested struct {
	Path string `json:"path"`
	Cwd  string `json:"cwd"`
}

type jsonFile struct {
	DagName  string `json:"dag_name"`
	TaskName string `json:"task_name"`
}

// ParseJSONFile reads a workflow in CCTools' JSON form from the file at
// path.
func ParseJSONFile(path string) (*Workflow, error) {
	src, err := readWorkflow(path)
	if err != nil {
		return nil, err
	}
	return ParseJSON(path, src)
}

// ParseJSON reads a workflow in CCTools' JSON form. Errors carry the
// file:line:column of the value (or JSON syntax error) they concern, and
// the rule's index in the "rules" list.
func ParseJSON(name string, src []byte) (*Workflow, error) {
	at := func(off int64) Pos { return offsetPos(name, src, off) }
	fail := func(off int64, format string, args ...any) error {
		return ErrorList{{Pos: at(off), Msg: fmt.Sprintf(format, args...)}}
	}
	var top jsonWorkflow
	whole := jsonFileText(name, src, 0, src)
	if err := decodeValue(src, &top, "a workflow"); err != nil {
		var ve *jsonpos.ValueError
		if errors.As(err, &ve) {
			return nil, ErrorList{{Pos: whole.at(ve.Path), Msg: ve.Msg}}
		}
		return nil, jsonError(name, src, 0, err)
	}
	if top.Define != nil || top.Variables != nil {
		return nil, fail(0, "JX \"define\" and \"variables\" are not supported in JSON: write the workflow in JX (a *.jx file, or --jx)")
	}

	// Find the rules one by one, to know where each starts.
	if len(bytes.TrimSpace(top.Rules)) == 0 {
		return nil, fail(0, "a JSON workflow needs a \"rules\" list")
	}
	base := int64(bytes.Index(src, top.Rules))
	dec := json.NewDecoder(bytes.NewReader(top.Rules))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, ErrorList{{Pos: whole.at([]string{"rules"}), Msg: "\"rules\" must be a list"}}
	}
	var rules []jsonText
	for dec.More() {
		var raw json.RawMessage
		off := base + dec.InputOffset()
		if err := dec.Decode(&raw); err != nil {
			return nil, jsonError(name, src, base, err)
		}
		// InputOffset is before the separator and any white space.
		off += int64(len(src[off:]) - len(bytes.TrimLeft(src[off:], ", \t\r\n")))
		rules = append(rules, jsonFileText(name, src, off, raw))
	}
	return workflowFromJSON(name, &top, rules, at(0))
}

// workflowFromJSON builds the workflow of the JSON form (or of a JX
// document evaluated to it) from its top-level keys and its rules; errors
// that concern no rule are at topPos.
func workflowFromJSON(name string, top *jsonWorkflow, rules []jsonText, topPos Pos) (*Workflow, error) {
	w := &Workflow{Path: name, Sizes: map[string]int64{}}
	defCat := top.DefaultCategory
	if defCat == "" {
		defCat = defaultCategory
	}
	for cat, c := range top.Categories {
		if c.Resources != nil {
			if err := c.Resources.check(); err != nil {
				return nil, ErrorList{{Pos: topPos, Msg: fmt.Sprintf("category %q: %v", cat, err)}}
			}
		}
	}
	var errs ErrorList
	envs := map[string][]string{}
	for i, jr := range rules {
		r, err := ruleFromJSON(jr, top, defCat, i, envs)
		if err != nil {
			pos := jr.pos
			var ve *jsonpos.ValueError
			if errors.As(err, &ve) {
				pos = jr.at(ve.Path)
			}
			errs = append(errs, &Error{Pos: pos, Msg: fmt.Sprintf("rule %d: %v", i, err)})
			continue
		}
		w.Rules = append(w.Rules, r)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return w, nil
}

// ruleFromJSON builds rule id, the one of the workflow's "rules" that t
// holds. Its errors about one of the rule's values are *valueErrors.
func ruleFromJSON(t jsonText, top *jsonWorkflow, defCat string, id int, envs map[string][]string) (*Rule, error) {
	var jr jsonRule
	if err := decodeValue(t.raw, &jr, "a rule"); err != nil {
		return nil, err
	}
	pos := t.pos
	r := &Rule{ID: id, Pos: pos, CommandPos: pos, Local: jr.LocalJob, Category: jr.Category}
	switch {
	case jr.Command != nil && (jr.Makeflow != nil || jr.Workflow != nil) || jr.Makeflow != nil && jr.Workflow != nil:
		return nil, errors.New("a rule has one of \"command\", \"workflow\" or \"makeflow\", not two")
	case jr.Args != nil && jr.Workflow == nil:
		return nil, valueErrorf([]string{"args"}, "\"args\" go with a sub-workflow's \"workflow\"")
	case jr.Command != nil:
		if strings.TrimSpace(*jr.Command) == "" {
			return nil, valueErrorf([]string{"command"}, "\"command\" is empty")
		}
		r.Command = *jr.Command
	case jr.Makeflow != nil:
		if jr.Makeflow.Path == "" {
			return nil, valueErrorf([]string{"makeflow"}, "\"makeflow\" needs a \"path\"")
		}
		r.Nested = &Nested{File: filepath.Clean(jr.Makeflow.Path), JSON: true}
		if jr.Makeflow.Cwd != "" {
			r.Nested.Dir = filepath.Clean(jr.Makeflow.Cwd)
		}
	case jr.Workflow != nil:
		// A sub-workflow in JX, as CCTools runs it: its args are bound
		// as JX variables.
		if *jr.Workflow == "" {
			return nil, valueErrorf([]string{"workflow"}, "\"workflow\" needs a file name")
		}
		r.Nested = &Nested{File: filepath.Clean(*jr.Workflow), JX: true}
		if args := bytes.TrimSpace(jr.Args); len(args) > 0 && !bytes.Equal(args, []byte("null")) {
			if args[0] != '{' {
				return nil, valueErrorf([]string{"args"}, "\"args\" must be an object of the sub-workflow's variables")
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, args); err != nil {
				return nil, valueErrorf([]string{"args"}, "\"args\": %v", err)
			}
			r.Nested.Args = compact.String()
			if _, err := r.Nested.jxArgs(); err != nil {
				return nil, valueErrorf([]string{"args"}, "\"args\": %v", err)
			}
		}
	default:
		return nil, errors.New("a rule needs a \"command\" (or a sub-workflow's \"workflow\")")
	}
	switch jr.Allocation {
	case "", "first", "max", "error":
	default:
		return nil, valueErrorf([]string{"allocation"}, "\"allocation\" must be first, max or error, not %q", jr.Allocation)
	}
	for _, list := range []struct {
		key   string
		items []json.RawMessage
		dst   *[]File
	}{{"inputs", jr.Inputs, &r.Sources}, {"outputs", jr.Outputs, &r.Targets}} {
		for i, item := range list.items {
			f, err := fileFromJSON(t, item, []string{list.key, strconv.Itoa(i)}, pos)
			if err != nil {
				return nil, err
			}
			*list.dst = appendFile(*list.dst, f)
		}
	}
	if r.Nested != nil {
		r.Sources = appendFile(r.Sources, File{Name: r.Nested.File, Pos: pos})
	}
	if r.Category == "" {
		r.Category = defCat
	}
	cat := top.Categories[r.Category]
	if cat.Resources != nil {
		cat.Resources.apply(&r.Resources) // checked with the categories
	}
	if jr.Resources != nil {
		if err := jr.Resources.check(); err != nil {
			return nil, valueErrorf([]string{"resources"}, "\"resources\": %v", err)
		}
		jr.Resources.apply(&r.Resources)
	}

	// The environment: resources, then the workflow's, the category's and
	// the rule's own variables, later ones winning.
	env := map[string]string{}
	if c := r.Resources.Cores; c > 0 {
		env["CORES"] = fmt.Sprint(c)
		env["OMP_NUM_THREADS"] = fmt.Sprint(c)
	} else {
		env["CORES"], env["OMP_NUM_THREADS"] = "1", "1"
	}
	if r.Category != defaultCategory {
		env["CATEGORY"] = r.Category
	}
	for _, m := range []map[string]string{top.Environment, cat.Environment, jr.Environment} {
		for k, v := range m {
			env[k] = v
		}
	}
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	list := make([]string, len(names))
	for i, k := range names {
		list[i] = k + "=" + env[k]
	}
	key := strings.Join(list, "\x00")
	if shared, ok := envs[key]; ok {
		list = shared
	} else {
		envs[key] = list
	}
	r.Env = list
	return r, nil
}

// fileWords says what a file of a rule's "inputs" or "outputs" is.
const fileWords = `a file name or {"dag_name": ..., "task_name": ...}`

// fileFromJSON reads the file raw, the value at path within the rule t.
func fileFromJSON(t jsonText, raw json.RawMessage, path []string, pos Pos) (File, error) {
	var f File
	var name string
	if err := json.Unmarshal(raw, &name); err == nil {
		f = File{Name: name}
	} else {
		var jf jsonFile
		err := jsonpos.Decode(raw, &jf)
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) && typ.Field == "" {
			// Neither a name nor an object.
			return f, valueErrorf(path, "%s must be %s, not %s", jsonpos.PathName(path), fileWords, jsonpos.ValueWords(typ.Value))
		}
		if err != nil {
			return f, jsonpos.Explain(err, raw, &jf, path, "")
		}
		f = File{Name: jf.DagName, Remote: jf.TaskName}
	}
	f.Pos = pos
	if f.Name == "" || strings.ContainsRune(f.Name, '\n') {
		return f, valueErrorf(path, "%s: bad file name %q", jsonpos.PathName(path), f.Name)
	}
	f.Name = filepath.Clean(f.Name)
	if f.Remote != "" {
		remote := filepath.Clean(f.Remote)
		if filepath.IsAbs(remote) || remote == ".." || strings.HasPrefix(remote, "../") {
			return f, valueErrorf(append(path, "task_name"), "%s: remote name %q must be a relative path inside the task's sandbox", jsonpos.PathName(path), f.Remote)
		}
		f.Remote = remote
		if remote == f.Name {
			f.Remote = ""
		}
	}
	return f, nil
}

func (r *jsonResources) check() error {
	if r.Cores < 0 || r.Memory < 0 || r.Disk < 0 || r.GPUs < 0 || r.WallTime < 0 {
		return errors.New("resources must not be negative")
	}
	return nil
}

// apply sets the resources r declares (non-zero) in res.
func (r *jsonResources) apply(res *Resources) {
	for _, f := range []struct {
		v   int64
		dst *int64
	}{{r.Cores, &res.Cores}, {r.Memory, &res.MemoryMB}, {r.Disk, &res.DiskMB}, {r.GPUs, &res.GPUs}, {r.WallTime, &res.WallTimeS}} {
		if f.v > 0 {
			*f.dst = f.v
		}
	}
}

// jsonError positions a decoding error: base is where the decoded text
// starts in src.
func jsonError(name string, src []byte, base int64, err error) error {
	end := int64(len(bytes.TrimRight(src, " \t\r\n")))
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		// At the end of the text, where the missing ] or } would be.
		return ErrorList{{Pos: offsetPos(name, src, end), Msg: "the file ends inside the JSON value: a \"]\" or \"}\" (or a string's closing quote) is missing"}}
	case errors.Is(err, io.EOF):
		return ErrorList{{Pos: offsetPos(name, src, 0), Msg: "the file is empty: a JSON workflow is an object with \"rules\""}}
	}
	off, _ := jsonpos.Offset(err)
	return ErrorList{{Pos: offsetPos(name, src, base+off), Msg: err.Error()}}
}

// offsetPos turns a byte offset into a position.
func offsetPos(name string, src []byte, off int64) Pos {
	line, col := jsonpos.LineCol(src, off)
	return Pos{File: name, Line: line, Col: col}
}
