package cmdutil

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// Seconds returns a duration flag that also takes a bare number of
// seconds, as CCTools' tools do ("-t 900").
func Seconds(d *time.Duration) pflag.Value { return seconds{d} }

type seconds struct{ d *time.Duration }

func (s seconds) String() string {
	if s.d == nil || *s.d == 0 {
		// "0", which --help takes for no default, so that the usage
		// text can say what zero means.
		return "0"
	}
	return s.d.String()
}

func (s seconds) Set(v string) error {
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		if n < 0 {
			return fmt.Errorf("negative duration %q", v)
		}
		*s.d = time.Duration(n * float64(time.Second))
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("bad duration %q (want seconds or e.g. 90s, 5m)", v)
	}
	if d < 0 {
		return fmt.Errorf("negative duration %q", v)
	}
	*s.d = d
	return nil
}

func (s seconds) Type() string { return "duration" }
