package distcmd

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/rightsize/rightsize/batch"
	"github.com/rightsize/rightsize/batch/shape"
	"github.com/rightsize/rightsize/internal/cmdutil"
)

// TestShapesFlag: --shapes reaches the distributed master with the batch
// system's chooser, and a bad list or one without -T is a usage error.
func TestShapesFlag(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		want  []shape.Shape
		usage bool
	}{
		{"slurm", []string{"-T", "slurm", "--shapes", "8x1h,32x20m"},
			[]shape.Shape{{Cores: 8, Wall: time.Hour}, {Cores: 32, Wall: 20 * time.Minute}}, false},
		{"none", []string{"-T", "local"}, nil, false},
		{"bad", []string{"-T", "local", "--shapes", "8xsoon"}, nil, true},
		{"without -T", []string{"--shapes", "8x1h"}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f Flags
			fs := pflag.NewFlagSet("allpairs", pflag.ContinueOnError)
			f.Add(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := f.Check(fs)
			var usage *cmdutil.UsageError
			if isUsage := errors.As(err, &usage); isUsage != tc.usage {
				t.Fatalf("Check: %v; want a usage error: %v", err, tc.usage)
			}
			if tc.usage {
				return
			}
			d := batch.NewLocal(batch.Options{})
			t.Cleanup(func() { d.Close(context.Background()) })
			cfg := f.Config(d, t.TempDir(), io.Discard)
			if !slices.Equal(cfg.Shapes, tc.want) {
				t.Errorf("shapes %v, want %v", cfg.Shapes, tc.want)
			}
			if _, slurm := cfg.Chooser.(shape.Slurm); slurm != (f.BatchType == "slurm") {
				t.Errorf("-T %s: chooser %T", f.BatchType, cfg.Chooser)
			}
		})
	}
}
