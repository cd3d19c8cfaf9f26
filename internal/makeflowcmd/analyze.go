package makeflowcmd

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/makeflow"
)

// AnalyzeMain runs makeflow_analyze, CCTools' companion of makeflow that
// checks and describes a workflow without running it, with args, and
// returns its exit code.
func AnalyzeMain(ctx context.Context, args []string, s cmdutil.Streams) int {
	return cmdutil.Execute(ctx, AnalyzeCommand(s), args, s)
}

// AnalyzeCommand returns the makeflow_analyze command, for AnalyzeMain and
// for its manual page.
func AnalyzeCommand(s cmdutil.Streams) *cobra.Command {
	var o analyzeOptions
	cmd := &cobra.Command{
		Use:   "makeflow_analyze [flags] [WORKFLOW]",
		Short: "check and describe a workflow without running it",
		Long: `makeflow_analyze reads a workflow (./Makeflow unless one is given), in the
Makeflow language or CCTools' JSON or JX form, and without running it:

  -k  checks its syntax, and says "WORKFLOW: Syntax OK." (makeflow --check
      also checks that its inputs exist and that no rule depends on itself)
  -I  lists its input files: those no rule makes
  -O  lists the files its rules make
  -i  prints its size and shape, as CCTools' makeflow_analyze does:
      num_of_tasks (rules), depth (rules on the longest chain),
      width_uniform_task (the most rules at one depth, were every rule to
      take as long) and width_guaranteed_max (the most rules that depend on
      one rule alone)

With none of them it only reads the workflow: the exit status says whether
it could. Files are listed sorted by name. An error in the workflow is reported at
its file:line:column and makes the exit status 1. CCTools' -b (a portable
bundle of the workflow) is not provided.`,
		Example: `  makeflow_analyze -k blast.mf
  makeflow_analyze -I blast.mf | xargs ls -l`,
		Args: cmdutil.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.version {
				fmt.Fprintf(s.Out, "makeflow_analyze version %s (Makeflow language of CCTools 9.9)\n", cmdutil.Version())
				return nil
			}
			modes := 0
			for _, on := range []bool{o.syntax, o.inputs, o.outputs, o.shape} {
				if on {
					modes++
				}
			}
			if modes > 1 {
				return cmdutil.Usagef("-k, -I, -O and -i ask different questions: give one")
			}
			path := "Makeflow"
			if len(args) == 1 {
				path = args[0]
			} else if _, err := os.Stat(path); err != nil {
				return cmdutil.Usagef("no workflow given, and ./Makeflow does not exist")
			}
			return o.run(cmd.Context(), path, s)
		},
	}
	f := cmd.Flags()
	f.SortFlags = false
	f.BoolVarP(&o.syntax, "syntax-check", "k", false, "check the workflow's syntax")
	f.BoolVarP(&o.inputs, "show-input", "I", false, "list the input files: those no rule makes")
	f.BoolVarP(&o.outputs, "show-output", "O", false, "list the files the rules make")
	f.BoolVarP(&o.shape, "analyze-exec", "i", false, "print the workflow's size and shape")
	f.BoolVar(&o.json, "json", false, "the workflow is in CCTools' JSON form (the default for *.json files)")
	f.BoolVar(&o.jx.jx, "jx", false, "the workflow is in CCTools' JX form (the default for *.jx files)")
	o.jx.addVarFlags(f)
	f.BoolVarP(&o.version, "version", "v", false, "print the version and exit")
	return cmd
}

type analyzeOptions struct {
	syntax, inputs, outputs, shape bool
	json, version                  bool
	jx                             jxOptions
}

func (o *analyzeOptions) run(ctx context.Context, path string, s cmdutil.Streams) error {
	wf, err := o.jx.readWorkflow(ctx, path, ".", o.json)
	if err == nil && (o.shape || o.inputs || o.outputs) {
		// Cycles and doubly made files would make the answers wrong.
		err = wf.Check(nil)
	}
	if err != nil {
		return inputErrors(err, path, s.Err)
	}
	switch {
	case o.syntax:
		fmt.Fprintf(s.Out, "%s: Syntax OK.\n", path)
	case o.inputs:
		printLines(s.Out, workflowFiles(wf, false))
	case o.outputs:
		printLines(s.Out, workflowFiles(wf, true))
	case o.shape:
		sh := shapeOf(wf)
		fmt.Fprintf(s.Out, "num_of_tasks\t%d\ndepth\t%d\nwidth_uniform_task\t%d\nwidth_guaranteed_max\t%d\n",
			len(wf.Rules), sh.depth, sh.widthUniform, sh.widthGuaranteed)
	}
	return nil
}

func printLines(w io.Writer, lines []string) {
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// workflowFiles returns the names of the files the rules make (made), or
// of those they read and no rule makes, sorted.
func workflowFiles(wf *makeflow.Workflow, made bool) []string {
	targets := map[string]bool{}
	for _, r := range wf.Rules {
		for _, f := range r.Targets {
			targets[f.Name] = true
		}
	}
	if made {
		return slices.Sorted(maps.Keys(targets))
	}
	inputs := map[string]bool{}
	for _, r := range wf.Rules {
		for _, f := range r.Sources {
			if !targets[f.Name] {
				inputs[f.Name] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(inputs))
}

// workflowShape is what makeflow_analyze -i says of a workflow.
type workflowShape struct {
	// depth is the number of rules on the longest chain of rules each
	// reading what the one before makes.
	depth int
	// widthUniform is the most rules at one level, a rule's level being
	// the length of the longest chain that leads to it.
	widthUniform int
	// widthGuaranteed is the most rules that read the files of one rule
	// and of no other.
	widthGuaranteed int
}

// shapeOf measures wf, whose rules depend on no cycle.
func shapeOf(wf *makeflow.Workflow) workflowShape {
	parents := wf.Parents()
	level := make([]int, len(wf.Rules))
	done := make([]bool, len(wf.Rules))
	var levelOf func(int) int
	levelOf = func(id int) int {
		if !done[id] {
			for _, p := range parents[id] {
				level[id] = max(level[id], levelOf(p)+1)
			}
			done[id] = true
		}
		return level[id]
	}
	var sh workflowShape
	perLevel := map[int]int{}
	onlyChildren := make([]int, len(wf.Rules))
	for id := range wf.Rules {
		l := levelOf(id)
		sh.depth = max(sh.depth, l+1)
		perLevel[l]++
		sh.widthUniform = max(sh.widthUniform, perLevel[l])
		if len(parents[id]) == 1 {
			onlyChildren[parents[id][0]]++
		}
	}
	for _, n := range onlyChildren {
		sh.widthGuaranteed = max(sh.widthGuaranteed, n)
	}
	if len(wf.Rules) == 0 {
		sh.depth = 1 // as CCTools says of an empty workflow
	}
	return sh
}
