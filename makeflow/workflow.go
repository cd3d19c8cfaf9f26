package makeflow

import (
	"fmt"
	"strings"
)

// A Workflow is a parsed Makeflow: its rules in file order and what the file
// declared about the workflow as a whole.
type Workflow struct {
	// Path is the file the workflow was read from, as given to ParseFile
	// (or the name given to Parse). Error positions and the default log
	// name derive from it.
	Path string

	// Rules are the rules in file order; Rules[i].ID == i.
	Rules []*Rule

	// Inputs and Outputs are the files named by MAKEFLOW_INPUTS and
	// MAKEFLOW_OUTPUTS, or nil if the workflow did not set them. Clean uses
	// Outputs to tell final results from intermediate files.
	Inputs  []string
	Outputs []string

	// Sizes holds the estimated sizes in bytes declared with .SIZE.
	Sizes map[string]int64
}

// A Rule is one step of a workflow: a command that reads its Sources and
// writes its Targets.
type Rule struct {
	ID  int // position in Workflow.Rules, 0-based; the log's node id
	Pos Pos // where the rule's "targets: sources" line starts

	Targets []File
	Sources []File

	// Command is the shell command after variable substitution, with the
	// LOCAL and MAKEFLOW prefixes removed. For a nested workflow it is
	// empty and Nested is set.
	Command    string
	CommandPos Pos

	// Nested is set for a "MAKEFLOW sub.mf [dir]" rule, which runs another
	// workflow as one step of this one.
	Nested *Nested

	// Local forces the rule to run on this machine even when the workflow
	// runs on a batch system (the LOCAL prefix or BATCH_LOCAL=true).
	Local bool

	Category  string    // the rule's category; "default" unless set
	Resources Resources // what the rule declared it needs

	// Env holds the NAME=value pairs the command gets on top of the
	// environment it runs in: exported variables as the rule sees them,
	// CATEGORY and the resource variables if set, and OMP_NUM_THREADS/CORES.
	// Rules with the same environment share one slice; do not modify it.
	Env []string

	// BatchOptions is the BATCH_OPTIONS variable as the rule sees it, for
	// batch-system executors.
	BatchOptions string

	// key is RuleKey's answer for the category and command it was made
	// from.
	key, keyCategory, keyCommand string
}

// onThisMachine reports whether the rule runs on this machine even when
// the workflow runs on a batch system: LOCAL rules, and nested workflows,
// which run this program with -T local.
func (r *Rule) onThisMachine() bool { return r.Local || r.Nested != nil }

// Remote reports whether any rule of w runs on the batch system: one that
// is neither LOCAL nor a nested workflow (which runs here, its own rules
// deciding for themselves).
func (w *Workflow) Remote() bool {
	for _, r := range w.Rules {
		if !r.onThisMachine() {
			return true
		}
	}
	return false
}

// A File is a file named by a rule.
type File struct {
	// Name is the file's path relative to the workflow's directory (or
	// absolute), cleaned so that "./a" and "a" are the same file.
	Name string
	// Remote is the name the file has in the task's sandbox when the rule
	// renames it ("local->remote"); empty when it keeps its own name.
	Remote string
	// Pos is where the name appears in the file.
	Pos Pos
}

// RemoteName returns the name the file has where the command runs.
func (f File) RemoteName() string {
	if f.Remote != "" {
		return f.Remote
	}
	return f.Name
}

// Nested describes a rule that runs another workflow.
type Nested struct {
	File string // the sub-workflow's file, relative to the workflow directory
	Dir  string // directory to run it in; "" for the workflow directory
	JSON bool   // the sub-workflow is in the JSON form
	JX   bool   // the sub-workflow is in the JX form
	// Args is, for JX, a JSON object of the variables the sub-workflow
	// is evaluated with; "" for none.
	Args string
}

// Resources is what a rule declares it needs. Zero means "not declared":
// an undeclared resource is not counted against the machine's capacity.
type Resources struct {
	Cores    int64
	MemoryMB int64
	DiskMB   int64
	GPUs     int64
	// WallTimeS is the declared run time limit in seconds: passed to batch
	// systems, and enforced by the Local executor.
	WallTimeS int64
}

// IsZero reports whether nothing was declared.
func (r Resources) IsZero() bool { return r == Resources{} }

func (r Resources) String() string {
	var parts []string
	add := func(name string, v int64, unit string) {
		if v > 0 {
			parts = append(parts, fmt.Sprintf("%s %d%s", name, v, unit))
		}
	}
	add("cores", r.Cores, "")
	add("memory", r.MemoryMB, " MB")
	add("disk", r.DiskMB, " MB")
	add("gpus", r.GPUs, "")
	add("wall time", r.WallTimeS, " s")
	if len(parts) == 0 {
		return "no declared resources"
	}
	return strings.Join(parts, ", ")
}

// Pos is a position in a workflow file. Line and Col count from 1; Col
// counts bytes.
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string {
	switch {
	case p.Line == 0:
		return p.File
	case p.Col == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	default:
		return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
	}
}

// An Error is a problem with the workflow's text or structure, found before
// anything runs.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// ErrorList is every Error found in one pass, sorted by position. Its Error
// method prints one per line.
type ErrorList []*Error

func (l ErrorList) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Error()
	}
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Sort orders the errors by position, as every ErrorList this package
// returns is ordered; for lists joined from several checks.
func (l ErrorList) Sort() { sortErrors(l) }

// Unwrap lets errors.As find the individual errors.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// err returns l as an error, or nil if it is empty.
func (l ErrorList) err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}
