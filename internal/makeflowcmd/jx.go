package makeflowcmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/jx"
	"github.com/rightsize/rightsize/makeflow"
)

// jxOptions are the flags of the JX form.
type jxOptions struct {
	jx       bool
	vars     []jxVar // --jx-args, --jx-context and --jx-define, in command-line order
	argvFile string  // --argv, expanded before the flags are parsed
}

// A jxVar is one --jx-args FILE (or --jx-context FILE, CCTools' old name
// of it) or --jx-define VAR=EXPR.
type jxVar struct {
	arg    string // FILE or VAR=EXPR
	define bool   // --jx-define
}

// jxVarFlag is the value of --jx-args, --jx-context or --jx-define: each
// appends to the one list, so that they apply in the order given.
type jxVarFlag struct {
	vars   *[]jxVar
	define bool
}

func (f jxVarFlag) Set(s string) error {
	*f.vars = append(*f.vars, jxVar{arg: s, define: f.define})
	return nil
}

func (f jxVarFlag) String() string { return "" }
func (f jxVarFlag) Type() string   { return "stringArray" }

func (o *jxOptions) addFlags(f *pflag.FlagSet) {
	f.BoolVar(&o.jx, "jx", false, "the workflow is in CCTools' JX form, JSON with expressions (the default for *.jx files)")
	o.addVarFlags(f)
	f.Var(jxVarFlag{vars: &o.vars}, "jx-context", "old name of --jx-args")
	f.MarkHidden("jx-context")
	f.StringVar(&o.argvFile, "argv", "", "read options from the object in `FILE`, as CCTools does: {\"OPTION\": VALUE, ...} with long option names, null for an option without a value, \"MAKEFLOW\": the workflow, \"argv\": another such file")
}

// addVarFlags defines --jx-args and --jx-define, for makeflow and
// makeflow_analyze.
func (o *jxOptions) addVarFlags(f *pflag.FlagSet) {
	f.Var(jxVarFlag{vars: &o.vars}, "jx-args", "JX: bind the variables of the object that `FILE` holds (a JX expression; repeatable; with --jx-define, in the order given: a later one wins)")
	f.Var(jxVarFlag{vars: &o.vars, define: true}, "jx-define", "JX: bind VAR to the value of the JX expression EXPR, given as `VAR=EXPR` (repeatable; with --jx-args, in the order given: a later one wins)")
}

// readWorkflow reads the workflow at path in its form: JX for --jx,
// --jx-args, --jx-define or a *.jx file; JSON for --json or a *.json file;
// the Makeflow language otherwise. dir is where it runs; asJSON is --json.
// The --jx-args files and --jx-defines bind their variables in the order
// they were given, each evaluated with the variables bound before it, as
// CCTools' makeflow does.
func (o *jxOptions) readWorkflow(ctx context.Context, path, dir string, asJSON bool) (*makeflow.Workflow, error) {
	isJX := o.jx || len(o.vars) > 0
	if isJX && asJSON {
		return nil, cmdutil.Usagef("--json and JX (--jx, --jx-args, --jx-define) exclude each other: JX reads JSON too")
	}
	switch {
	case isJX || strings.HasSuffix(path, ".jx") && !asJSON:
		var vars *jx.Scope
		var err error
		for _, v := range o.vars {
			if v.define {
				if vars, err = jx.DefineArg(ctx, vars, v.arg, &jx.Options{Dir: dir}); err != nil {
					return nil, cmdutil.Usagef("--jx-define %v", err)
				}
				continue
			}
			if vars, err = jx.ArgsFile(ctx, vars, inDir(dir, v.arg), &jx.Options{Dir: dir}); err != nil {
				return nil, fmt.Errorf("--jx-args: %w", err)
			}
		}
		return makeflow.ParseJXFile(ctx, path, makeflow.JXOptions{Vars: vars, Dir: dir})
	case asJSON || strings.HasSuffix(path, ".json"):
		return makeflow.ParseJSONFile(path)
	}
	return makeflow.ParseFile(path, nil)
}

// maxArgvDepth bounds --argv files that name --argv files, against a
// file that names itself.
const maxArgvDepth = 32

// expandArgv replaces each --argv FILE of args with the options FILE
// holds, as CCTools' makeflow reads them: a JX object whose keys are long
// option names and whose values are their arguments (null for an option
// without one); "MAKEFLOW" names the workflow; "argv" names another such
// file, expanded in its turn. flags says which options exist.
func expandArgv(flags *pflag.FlagSet, args []string) ([]string, error) {
	return expandArgvDepth(flags, args, 0)
}

func expandArgvDepth(flags *pflag.FlagSet, args []string, depth int) ([]string, error) {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...), nil
		}
		var file string
		switch {
		case a == "--argv" && i+1 < len(args):
			file = args[i+1]
			i++
		case strings.HasPrefix(a, "--argv="):
			file = strings.TrimPrefix(a, "--argv=")
		default:
			out = append(out, a)
			continue
		}
		if depth == maxArgvDepth {
			return nil, fmt.Errorf("--argv %s: more than %d --argv files within each other", file, maxArgvDepth)
		}
		more, err := argvFile(flags, file)
		if err != nil {
			return nil, fmt.Errorf("--argv %s: %w", file, err)
		}
		if more, err = expandArgvDepth(flags, more, depth+1); err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// argvFile returns the options of one --argv file as command-line
// arguments.
func argvFile(flags *pflag.FlagSet, file string) ([]string, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the caller names the file
		}
		return nil, err
	}
	obj, err := jx.EvalObject(context.Background(), file, src, nil, nil)
	if err != nil {
		return nil, err
	}
	var args []string
	for _, p := range obj.Pairs {
		if p.Key == "MAKEFLOW" {
			s, ok := p.Value.(string)
			if !ok {
				return nil, fmt.Errorf("%s: \"MAKEFLOW\" is the workflow's file name, not %s", p.Pos, jx.TypeName(p.Value))
			}
			args = append(args, s)
			continue
		}
		f := flags.Lookup(p.Key)
		if f == nil {
			return nil, fmt.Errorf("%s: unknown option %q", p.Pos, p.Key)
		}
		var val string
		switch v := p.Value.(type) {
		case nil:
			if f.NoOptDefVal == "" {
				return nil, fmt.Errorf("%s: --%s needs a value, not null", p.Pos, p.Key)
			}
			args = append(args, "--"+p.Key)
			continue
		case bool:
			val = strconv.FormatBool(v)
		case int64:
			val = strconv.FormatInt(v, 10)
		case float64:
			val = strconv.FormatFloat(v, 'g', -1, 64)
		case string:
			val = v
		default:
			return nil, fmt.Errorf("%s: the value of %q must be null, a boolean, a number or a string, not %s", p.Pos, p.Key, jx.TypeName(p.Value))
		}
		args = append(args, "--"+p.Key+"="+val)
	}
	return args, nil
}
