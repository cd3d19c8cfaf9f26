package makeflow

import (
	"strconv"
	"strings"
)

// A Wrapper wraps the command of every rule (CCTools' --wrapper,
// --wrapper-input and --wrapper-output). In Command, "{}" stands for the
// rule's command as it is and "[]" for it quoted for /bin/sh; with
// neither, "/bin/sh -c" and the quoted command are appended. "%%" stands
// for the rule's number, in Command and in the file names. Inputs and
// Outputs are files every rule then reads and writes too (a wrapper's
// script, its logs).
type Wrapper struct {
	Command         string
	Inputs, Outputs []string
}

// Wrap applies wrappers to every rule of w but nested workflows, in order:
// each wraps what the one before made. Call it before Check, so that the
// files it adds are checked like the others.
func (w *Workflow) Wrap(wrappers ...Wrapper) {
	for _, r := range w.Rules {
		if r.Nested != nil {
			continue
		}
		id := strconv.Itoa(r.ID)
		for _, wr := range wrappers {
			if wr.Command != "" {
				r.Command = wrapCommand(strings.ReplaceAll(wr.Command, "%%", id), r.Command)
			}
			// The rule's position, so that a problem with them is
			// reported where the rule is.
			for _, name := range wr.Inputs {
				r.Sources = append(r.Sources, File{Name: strings.ReplaceAll(name, "%%", id), Pos: r.Pos})
			}
			for _, name := range wr.Outputs {
				r.Targets = append(r.Targets, File{Name: strings.ReplaceAll(name, "%%", id), Pos: r.Pos})
			}
		}
	}
}

func wrapCommand(wrapper, command string) string {
	switch {
	case strings.Contains(wrapper, "{}"):
		return strings.ReplaceAll(wrapper, "{}", command)
	case strings.Contains(wrapper, "[]"):
		return strings.ReplaceAll(wrapper, "[]", shellQuote(command))
	}
	return wrapper + " /bin/sh -c " + shellQuote(command)
}
