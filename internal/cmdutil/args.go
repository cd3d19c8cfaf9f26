package cmdutil

import (
	"strings"

	"github.com/spf13/pflag"
)

// An ArgKind is what one command-line argument is to the flags that parse
// it.
type ArgKind int

const (
	ArgFlag       ArgKind = iota // a flag (or a group of short ones), with its value if attached: --name=v, -j8
	ArgFlagValue                 // the value of the flag before it: the 8 of -j 8, whatever it looks like
	ArgPositional                // an argument of the command's own
	ArgTerminator                // "--": every argument after it is positional
)

// ClassifyArgs says what each of args is to flags, as pflag's parser
// reads them: a flag that takes a value and has none attached takes the
// next argument, even one that starts with a dash, and a flag with a
// default for no value (a boolean, -c of makeflow) takes none. It lets a
// command look at one flag in its arguments before they are parsed
// without mistaking another flag's value, or a file after "--", for it.
// An unknown flag is taken to have no value (parsing it fails anyway).
func ClassifyArgs(flags *pflag.FlagSet, args []string) []ArgKind {
	kinds := make([]ArgKind, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			kinds[i] = ArgTerminator
			for j := i + 1; j < len(args); j++ {
				kinds[j] = ArgPositional
			}
			return kinds
		case len(a) < 2 || a[0] != '-':
			kinds[i] = ArgPositional
			continue
		}
		kinds[i] = ArgFlag
		if takesNext(flags, a) && i+1 < len(args) {
			i++
			kinds[i] = ArgFlagValue
		}
	}
	return kinds
}

// takesNext reports whether the flag argument a (--name, -abc) takes the
// argument after it as its value.
func takesNext(flags *pflag.FlagSet, a string) bool {
	if name, ok := strings.CutPrefix(a, "--"); ok {
		if strings.Contains(name, "=") {
			return false
		}
		f := flags.Lookup(name)
		return f != nil && f.NoOptDefVal == ""
	}
	// A group of short flags: the first that takes a value takes the rest
	// of the group, or the next argument when it ends the group.
	group := a[1:]
	for j := 0; j < len(group); j++ {
		f := flags.ShorthandLookup(group[j : j+1])
		if f == nil {
			return false
		}
		if f.NoOptDefVal == "" {
			return j == len(group)-1
		}
	}
	return false
}
