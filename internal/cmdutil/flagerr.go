package cmdutil

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rightsize/rightsize/internal/suggest"
)

// flagError says what is wrong with a flag in its user's words: "-j x:
// not a whole number" rather than pflag's "invalid argument "x" for "-j,
// --max-local" flag: strconv.ParseInt: parsing "x": invalid syntax", and
// "unknown flag --chekc (did you mean --check?)". It is a usage error.
func flagError(cmd *cobra.Command, err error) error {
	var invalid *pflag.InvalidValueError
	var unknown *pflag.NotExistError
	switch {
	case errors.As(err, &invalid):
		f := invalid.GetFlag()
		return Usagef("%s %s: %s", flagNames(f), invalid.GetValue(), valueProblem(f, errors.Unwrap(invalid)))
	case errors.As(err, &unknown) && unknown.GetSpecifiedShortnames() == "":
		name := unknown.GetSpecifiedName()
		var names []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				names = append(names, f.Name)
			}
		})
		if near := suggest.Nearest(name, names); near != "" {
			return Usagef("unknown flag --%s (did you mean --%s?)", name, near)
		}
	}
	return &UsageError{Err: err}
}

// flagNames is how a flag is written: "-j/--max-local", "--check".
func flagNames(f *pflag.Flag) string {
	if f.Shorthand != "" && f.ShorthandDeprecated == "" {
		return "-" + f.Shorthand + "/--" + f.Name
	}
	return "--" + f.Name
}

// valueProblem says why a flag's value was refused: what the flag takes,
// for a number or a boolean; the flag's own words otherwise.
func valueProblem(f *pflag.Flag, cause error) string {
	var num *strconv.NumError
	if !errors.As(cause, &num) {
		return cause.Error()
	}
	if errors.Is(num.Err, strconv.ErrRange) {
		return "out of range"
	}
	typ := f.Value.Type()
	switch {
	case typ == "bool":
		return "not true or false"
	case strings.HasPrefix(typ, "float"):
		return "not a number"
	case strings.HasPrefix(typ, "int"), strings.HasPrefix(typ, "uint"), typ == "count":
		return "not a whole number"
	}
	return fmt.Sprintf("not a valid %s", typ)
}
