package makeflow

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// WriteDot writes the workflow's DAG in Graphviz's dot language: a box for
// each rule (labelled with its command), an ellipse for each file, an edge
// from each file to the rules that read it and from each rule to the files
// it makes. Files that no rule makes (the workflow's inputs) are shaded.
func WriteDot(w io.Writer, wf *Workflow) error {
	b := bufio.NewWriter(w)
	files := map[string]int{}
	made := map[string]bool{}
	var order []string
	fileID := func(name string) int {
		id, ok := files[name]
		if !ok {
			id = len(order)
			files[name] = id
			order = append(order, name)
		}
		return id
	}
	for _, r := range wf.Rules {
		for _, f := range r.Targets {
			made[f.Name] = true
			fileID(f.Name)
		}
		for _, f := range r.Sources {
			fileID(f.Name)
		}
	}
	fmt.Fprintf(b, "digraph %s {\n", dotQuote(wf.Path))
	b.WriteString("\tnode [fontname=\"Helvetica\", fontsize=10];\n")
	for id, name := range order {
		style := ""
		if !made[name] {
			style = ", style=filled, fillcolor=\"#dddddd\""
		}
		fmt.Fprintf(b, "\tF%d [label=%s, shape=ellipse%s];\n", id, dotQuote(name), style)
	}
	for _, r := range wf.Rules {
		label := r.Command
		if r.Nested != nil {
			label = "MAKEFLOW " + r.Nested.File
		}
		if r.Local {
			label = "LOCAL " + label
		}
		const maxLabel = 40
		if len(label) > maxLabel {
			label = label[:maxLabel-3] + "..."
		}
		fmt.Fprintf(b, "\tR%d [label=%s, shape=box];\n", r.ID, dotQuote(fmt.Sprintf("%d: %s", r.ID, label)))
		for _, f := range r.Sources {
			fmt.Fprintf(b, "\tF%d -> R%d;\n", files[f.Name], r.ID)
		}
		for _, f := range r.Targets {
			fmt.Fprintf(b, "\tR%d -> F%d;\n", r.ID, files[f.Name])
		}
	}
	b.WriteString("}\n")
	return b.Flush()
}

// dotEscaper escapes a dot string's contents. A Replacer is safe for
// concurrent use and builds its tables on first use: one serves every call.
var dotEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// dotQuote quotes s as a dot string.
func dotQuote(s string) string {
	return `"` + dotEscaper.Replace(s) + `"`
}
