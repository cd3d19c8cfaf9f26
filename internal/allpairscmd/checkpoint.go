package allpairscmd

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/rightsize/rightsize/allpairs"
	"github.com/rightsize/rightsize/distmaster"
	"github.com/rightsize/rightsize/funcs"
	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/multicore"
	"github.com/rightsize/rightsize/sparsematrix"
)

// checkpoint is where a run keeps its finished cells.
type checkpoint struct {
	*allpairs.Checkpoint
	where location
}

// location says where a checkpoint is.
type location int

const (
	named  location = iota // --matrix FILE: the user's, kept
	beside                 // -o FILE.matrix: removed once FILE is written whole
	cached                 // in the cache directory: removed likewise
)

// checkpointPath says where the run keeps its cells: --matrix FILE; beside
// -o FILE, as FILE.matrix; or, when the results go to standard output (or
// to something that is not a regular file, such as /dev/null), in the
// user's cache directory under a name made from the command's arguments, so
// that the same command finds it again. It returns "" when there is no
// cache directory.
func (o *options) checkpointPath(args []string, fn funcs.Info, region *multicore.Region) (string, location) {
	switch {
	case o.matrix != "":
		return o.matrix, named
	case o.output != "":
		if st, err := os.Stat(o.output); err != nil || st.Mode().IsRegular() {
			return o.output + ".matrix", beside
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", cached
	}
	h := sha256.New()
	for _, arg := range []string{args[1], args[2], fn.Path} {
		if arg != "" {
			arg, _ = filepath.Abs(arg)
		}
		fmt.Fprintf(h, "%q ", arg)
	}
	fmt.Fprintf(h, "%q %q %v %v", fn.Name, o.extraArgs, o.symmetric, region)
	return filepath.Join(cache, "rightsize", "allpairs", hex.EncodeToString(h.Sum(nil))[:20]+".matrix"), cached
}

// openCheckpoint opens the run's checkpoint, saying on msgs what changed
// since its cells were computed and what it resumes. It returns nil, and
// says why, when the run can keep none: no cache directory, or another
// allpairs running the same command on standard output.
func (o *options) openCheckpoint(msgs io.Writer, args []string, a, b *allpairs.Set, fn funcs.Info, region *multicore.Region) (*checkpoint, error) {
	path, where := o.checkpointPath(args, fn, region)
	if path == "" {
		fmt.Fprintf(msgs, "allpairs: no cache directory for a checkpoint ($HOME and $XDG_CACHE_HOME are unset): this run cannot be resumed; give -o FILE or --matrix FILE to keep one\n")
		return nil, nil
	}
	if where == cached {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
	}
	ck, err := allpairs.OpenCheckpoint(path, allpairs.CheckpointOf{
		A: a, B: b, Symmetric: o.symmetric, Func: fn, Args: o.extraArgs, TrustCheckpoint: o.trust,
	})
	switch {
	case errors.Is(err, sparsematrix.ErrLocked) && where == cached:
		fmt.Fprintf(msgs, "allpairs: another allpairs is running the same command (%s is in use): this run keeps no checkpoint\n", path)
		return nil, nil
	case errors.Is(err, sparsematrix.ErrLocked):
		return nil, fmt.Errorf("checkpoint %v: another allpairs is writing it", err)
	case err != nil:
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	for _, c := range ck.Changes() {
		fmt.Fprintf(msgs, "allpairs: %s\n", c)
	}
	if ck.Torn() > 0 {
		fmt.Fprintf(msgs, "allpairs: ignored a torn last record of %d bytes in %s (cut short by a crash)\n", ck.Torn(), path)
	}
	if n := ck.Resumed(); n > 0 {
		fmt.Fprintf(msgs, "allpairs: resuming: %d cells are already in %s\n", n, path)
	}
	return &checkpoint{ck, where}, nil
}

// finish closes the checkpoint once the run is over, removing a default one
// (and the plan of a distributed run) when the result was written whole.
func (c *checkpoint) finish(complete bool) error {
	if c == nil {
		return nil
	}
	if !complete || c.where == named {
		return c.Close()
	}
	os.Remove(c.Path() + distmaster.PlanSuffix)
	return c.Remove()
}

// kept says, for messages, where the n finished cells are kept and that
// the same command again will do what: "the 1 finished cell is kept in
// F: run the same command again to resume". With pronoun it calls them
// "it" or "they", having named them before.
func (c *checkpoint) kept(n int64, pronoun bool, again string) string {
	what, verb, them := fmt.Sprintf("the %d finished cells", n), "are", "them"
	switch {
	case pronoun && n == 1:
		what, verb, them = "it", "is", "it"
	case pronoun:
		what = "they"
	case n == 1:
		what, verb, them = "the 1 finished cell", "is", "it"
	}
	switch {
	case n == 0:
		return "no cell finished: run the same command again to " + again
	case c == nil:
		return fmt.Sprintf("%s %s kept nowhere (no checkpoint), so a re-run computes %s again", what, verb, them)
	}
	return fmt.Sprintf("%s %s kept in %s: run the same command again to %s", what, verb, c.Path(), again)
}

// output is where the result lines go: standard output, -o FILE (written
// beside it and renamed into place by commit), or nowhere (--matrix without
// -o on this machine: the cells are in the checkpoint).
type output struct {
	w    io.Writer
	file *cmdutil.OutputFile
}

func (o *options) openOutput(s cmdutil.Streams) (*output, error) {
	if o.output == "" {
		return &output{w: s.Out}, nil
	}
	f, err := cmdutil.CreateOutput(o.output)
	if err != nil {
		return nil, err
	}
	return &output{w: f, file: f}, nil
}

// commit makes -o FILE the result, or abort leaves the previous one.
func (out *output) commit() error {
	if out.file == nil {
		return nil
	}
	return out.file.Commit()
}

func (out *output) abort() {
	if out.file != nil {
		out.file.Abort()
	}
}
