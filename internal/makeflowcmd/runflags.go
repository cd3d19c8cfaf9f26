package makeflowcmd

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rightsize/rightsize/internal/cmdutil"
	"github.com/rightsize/rightsize/makeflow"
)

// runFlags are CCTools' flags that change how a run goes about its rules:
// the batch log, the master's priority, submission retries, the resource
// monitor, the archive, containers and the storage limit. They are kept
// apart from cmd.go's, with what they mean.
type runFlags struct {
	batchLog      string
	priority      int
	submitTimeout time.Duration
	monitor       string
	archive       string // --archive, with or without a directory
	archiveDir    string
	archiveRead   bool
	archiveWrite  bool
	storageType   string
	storageLimit  string
	storagePrint  string
	storage       *makeflow.Storage // from storageType and storageLimit
}

func (r *runFlags) define(f *pflag.FlagSet) {
	f.StringVarP(&r.batchLog, "batch-log", "L", "", "write the batch system's log to `FILE`: -T wq, the Work Queue master's statistics in CCTools' columns (a line every 5 s); -T dryrun, the shell script (instead of standard output); nothing for other types, as in CCTools")
	f.IntVarP(&r.priority, "priority", "P", 0, "-T wq: the master's priority `N`, advertised with -N: a worker serving several projects prefers the highest (ignored with another -T, as CCTools does)")
	r.submitTimeout = makeflow.DefaultSubmitTimeout
	f.StringVar(&r.monitor, "monitor", "", "write what each rule used (peak memory, CPU and wall time, the size of its outputs) to `DIR`/resource-rule-N.summary as CCTools' resource monitor does, and sum it up at the end")
	f.Var(archiveValue{&r.archive}, "archive", "reuse a rule's outputs from the archive when its command, the contents of its inputs and its outputs' names are the same, and keep there what rules make (CCTools' layout), in --archive-dir's directory, or in DIR given as --archive=DIR or as --archive DIR WORKFLOW")
	f.Lookup("archive").NoOptDefVal = "true"
	f.StringVar(&r.archiveDir, "archive-dir", "", "the archive's directory (default /tmp/makeflow.archive.UID)")
	f.BoolVar(&r.archiveRead, "archive-read", false, "reuse outputs from the archive, but keep nothing there")
	f.BoolVar(&r.archiveWrite, "archive-write", false, "keep outputs in the archive, but reuse nothing from it")
	f.StringVar(&r.storageType, "storage-type", "", "hold the run to --storage-limit: 0 (max: rules run concurrently while their declared outputs fit), 1 (min: one at a time, depth first, the least storage), 2 (output: only running rules' outputs count), 3 (off: only measure the peak); intermediate files go as soon as no rule needs them (default 0 with a limit)")
	f.StringVar(&r.storageLimit, "storage-limit", "", "the disk budget in `BYTES` (e.g. 10G) for the files the workflow makes, sized by .SIZE and then on disk")
	f.StringVar(&r.storagePrint, "storage-print", "", "write the storage the workflow needs to `FILE` (at least: one rule at a time, depth first; at most: every rule as soon as it is ready; what remains) as CCTools' footprint line, and exit without running")
	f.VarP(cmdutil.Seconds(&r.submitTimeout), "submission-timeout", "S", "keep trying to submit a job the batch system refuses for `SECONDS`, pausing 1 s, 2 s, 4 s... (a job that is itself wrong fails at once); 0: do not retry")
	f.Lookup("submission-timeout").DefValue = "3600"
}

// archiveBare is the value of --archive given without a directory.
const archiveBare = " "

// archiveValue is --archive's value: a directory, or archiveBare for the
// flag given without one. Its type is "bool", with "true" given bare, so
// that the help shows "--archive" and its usage says how a directory is
// given, rather than pflag's "--archive DIR[=" "]" for a string whose
// value may be left out; --archive=false turns it off again.
type archiveValue struct{ dir *string }

func (v archiveValue) String() string {
	if v.dir == nil {
		return ""
	}
	return *v.dir
}

func (v archiveValue) Set(s string) error {
	switch s {
	case "true":
		*v.dir = archiveBare
	case "false":
		*v.dir = ""
	default:
		*v.dir = s
	}
	return nil
}

func (v archiveValue) Type() string { return "bool" }

// checkWorkflowArg reports a workflow argument that is the directory a
// bare --archive was meant to take ("makeflow --archive DIR", with no
// workflow after DIR, which stays the workflow as in CCTools), saying how
// to write what was meant.
func (r *runFlags) checkWorkflowArg(file, path string) error {
	if r.archive != archiveBare || file == "" {
		return nil
	}
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		return cmdutil.Usagef("%s is a directory, not a workflow: to keep the archive there, write --archive %s WORKFLOW, or --archive-dir %s", file, file, file)
	}
	return nil
}

// check reports flags that cannot work, before anything is read.
func (r *runFlags) check() error {
	if r.submitTimeout < 0 {
		return cmdutil.Usagef("-S must not be negative")
	}
	if r.storageType == "" && r.storageLimit == "" {
		return nil
	}
	st := &makeflow.Storage{}
	if r.storageType != "" {
		t, err := makeflow.ParseStorageType(r.storageType)
		if err != nil {
			return cmdutil.Usagef("--storage-type: %v", err)
		}
		st.Type = t
	}
	if r.storageLimit != "" {
		n, err := makeflow.ParseSize(r.storageLimit)
		if err != nil {
			return cmdutil.Usagef("--storage-limit: %v", err)
		}
		st.Limit = n
	} else if st.Type != makeflow.StorageOff {
		return cmdutil.Usagef("--storage-type %s needs --storage-limit", st.Type)
	}
	r.storage = st
	return nil
}

// apply sets what the flags mean in the run's options.
func (r *runFlags) apply(o *makeflow.Options, wf *makeflow.Workflow, dir string) error {
	o.MonitorDir = r.monitor
	o.Storage = r.storage
	if a := r.archiveOptions(dir); a != nil {
		o.Archive = a
	}
	o.SubmitTimeout = r.submitTimeout
	if r.submitTimeout == 0 {
		o.SubmitTimeout = -1
	}
	return nil
}

// dryRunScript returns where -T dryrun writes its script: -L's file, or
// out.
func (r *runFlags) dryRunScript(dir string, out io.Writer) (io.Writer, func() error, error) {
	if r.batchLog == "" {
		return out, func() error { return nil }, nil
	}
	f, err := os.Create(inDir(dir, r.batchLog))
	if err != nil {
		return nil, nil, cmdutil.Usagef("-L: %v", err)
	}
	return f, f.Close, nil
}

// finish says, at the end of a run, what the flags have to say of it.
func (r *runFlags) finish(w io.Writer, rep *makeflow.Report) {
	if st := r.storage; st != nil {
		limit := fmt.Sprintf("limit %d bytes, ", st.Limit)
		if st.Type == makeflow.StorageOff {
			limit = ""
		}
		fmt.Fprintf(w, "storage: peak %d bytes (%s--storage-type %s)\n", rep.StoragePeak, limit, st.Type)
	}
	if r.monitor != "" && len(rep.Usage) > 0 {
		fmt.Fprintf(w, "resources: %s; summaries in %s\n", rep.TotalUsage(), r.monitor)
	}
}

// archiveOptions returns the archive the flags ask for, or nil.
func (r *runFlags) archiveOptions(dir string) *makeflow.Archive {
	explicit := strings.TrimSpace(r.archive)
	if r.archive == "" && r.archiveDir == "" && !r.archiveRead && !r.archiveWrite {
		return nil
	}
	a := &makeflow.Archive{Dir: cmp.Or(explicit, r.archiveDir, makeflow.DefaultArchiveDir(os.Getuid())),
		Read: r.archiveRead, Write: r.archiveWrite}
	if r.archive != "" || (!a.Read && !a.Write) {
		a.Read, a.Write = true, true
	}
	a.Dir = inDir(dir, a.Dir)
	return a
}

// printStorage writes --storage-print's file: the workflow's footprint in
// the columns of CCTools' (its "Base" line: least, most, remaining).
func (r *runFlags) printStorage(wf *makeflow.Workflow, dir string, out io.Writer) error {
	minimum, maximum, residual, err := makeflow.StorageFootprint(wf)
	if err != nil {
		return err
	}
	text := fmt.Sprintf("Node\tFoot-Min\tFoot-Max\tResidual\nBase \t %d \t %d \t %d\t\t\t\t\n", minimum, maximum, residual)
	if err := os.WriteFile(inDir(dir, r.storagePrint), []byte(text), 0o666); err != nil {
		return fmt.Errorf("--storage-print: %w", err)
	}
	fmt.Fprintf(out, "storage needed: at least %d bytes, at most %d; %d remain at the end (written to %s)\n", minimum, maximum, residual, r.storagePrint)
	return nil
}

// archiveDirArg returns args with "--archive DIR" written
// "--archive=DIR" when DIR is not the only argument left to name the
// workflow: "makeflow --archive DIR wf.mf". CCTools' --archive takes no
// value (its directory is --archive-dir's), so that there DIR would be a
// second workflow; "makeflow --archive wf.mf" keeps the default
// directory, as there. A clean mode after a bare -c ("-c intermediates
// wf.mf") does not name the workflow.
func archiveDirArg(flags *pflag.FlagSet, args []string) []string {
	kinds := cmdutil.ClassifyArgs(flags, args)
	dirAt, words := -1, 0
	for i, k := range kinds {
		if k != cmdutil.ArgPositional {
			continue
		}
		prev := ""
		if i > 0 && kinds[i-1] == cmdutil.ArgFlag {
			prev = args[i-1]
		}
		if prev == "--archive" {
			dirAt = i
		} else if _, err := cleanMode(args[i]); err == nil && (prev == "-c" || prev == "--clean") {
			continue
		}
		words++
	}
	if dirAt < 0 || words < 2 {
		return args
	}
	out := slices.Clone(args[:dirAt-1])
	out = append(out, "--archive="+args[dirAt])
	return append(out, args[dirAt+1:]...)
}
