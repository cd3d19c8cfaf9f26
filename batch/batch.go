// Package batch runs jobs on batch systems — local processes, SLURM, Grid
// Engine and HTCondor — behind one interface, Driver, so that the Makeflow
// runner, the distributed All-Pairs and Wavefront masters and the Work Queue
// worker factory can submit a job, follow it and remove it without knowing
// which system runs it. It is the batch layer of all of them and imports
// none: the Work Queue driver is in package batch/wq, so that a user of the
// other drivers does not link the Work Queue master.
//
// A job is a shell command line with the files it reads and writes, the
// resources it needs and its environment. Once submitted (queued), every
// driver reports each job's life as events on one channel (running, then
// done with an exit status or failed with a reason), so a caller drives all
// its jobs from a single event loop.
//
// Drivers for batch systems with a shared filesystem (SLURM, Grid Engine,
// HTCondor here) wrap the command in a small /bin/sh script that records its
// exit status and keeps its output in a spool directory on that filesystem;
// the exit status the caller sees is the command's own, read from there, not
// the batch system's idea of it. They poll the batch system with one query
// for all their jobs (one squeue, one qstat, one condor_q per interval).
//
// The package does not decide what to run or when (that is the caller's
// scheduler), does not retry failed jobs, and its drivers do not transfer
// files. The Work Queue driver, package batch/wq, does: it ships inputs and
// fetches outputs, so the Job type has files with remote names and a cache
// flag, and nothing in the Driver contract assumes a shared filesystem. What
// only some drivers can do is asked through small optional interfaces
// (FileShipper, StragglerAborter, Listener, CapacityReporter,
// FreeReporter), as net/http
// does with http.Flusher. Package batchtest checks a driver against the
// contract.
//
// Hybrid combines two drivers into one: this machine's local driver takes
// jobs while it has free slots, a batch system the rest, and a job still
// waiting in the batch system's queue moves here when a slot frees. The
// local driver's DispatchDelay makes it stand for a cluster with a queue,
// for benchmarks and tests of placement; with InProcess it does a job that
// carries its work as a Go function (Job.Do) in this process, so that the
// local share of a hybrid run pays no process start. With Hold, a Hybrid
// keeps a job here until this machine is not expected to start it within
// half the batch system's dispatch, so that short jobs never pay a
// submission and a removal.
//
// The HTCondor driver has been tested only against fakes of the condor_*
// commands (HTCondor is not packaged for Debian bookworm); the SLURM and Grid
// Engine drivers are tested against the real systems (scripts/slurm.sh,
// scripts/sge.sh).
package batch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// A Driver submits jobs to one batch system and follows them.
//
// The contract, which every implementation keeps and callers rely on:
//
//   - Submit hands the job to the batch system and returns the system's ID
//     for it. If it returns an error the job was not submitted and no event
//     will come for it; the error carries the batch system's own message
//     (see CommandError) or says what is wrong with the job (a missing
//     input, an invalid environment entry, an unsupported feature wrapping
//     errors.ErrUnsupported). On success the job is Queued.
//   - Every submitted job then produces events on Events, in order: at most
//     one Running event, then exactly one final event, Done or Failed.
//     Running may be skipped when the job started and ended between two
//     looks at the batch system. Done means the command ran to its end and
//     exited with Status.ExitCode (non-zero included: that is the command's
//     failure, not the driver's). Failed means the command did not run to an
//     exit status, or its outputs are missing; Status.Err says why and wraps
//     one of ErrRejected, ErrVanished, ErrTimeLimit, ErrRemoved,
//     ErrMissingOutput or a CommandError, or says why the command could not
//     be started.
//   - Status returns what the driver last saw of a job, without asking the
//     batch system; ErrUnknownJob for an ID this driver did not return.
//   - Remove asks the batch system to stop a job and returns once it has
//     accepted the request. The job's final event, which comes once the job
//     no longer runs, is then Failed with ErrRemoved, even if the command
//     happened to finish meanwhile. Removing a job whose final event has
//     already been queued does nothing and returns nil. Removing an unknown
//     ID returns ErrUnknownJob.
//   - Events returns the same channel every time. The driver never blocks on
//     it: events queue up inside the driver until they are received.
//   - Close removes every job that has not ended (with one batch command),
//     stops following the batch system, closes the Events channel (events
//     not yet received are dropped) and releases the driver's files. Submit
//     after Close returns ErrClosed.
//
// Submit, Status and Remove may be called from any goroutine, including the
// one that receives the events.
type Driver interface {
	Submit(ctx context.Context, job *Job) (id string, err error)
	Status(id string) (Status, error)
	Remove(ctx context.Context, id string) error
	Events() <-chan Event
	Close(ctx context.Context) error
}

// A Job is one command to run on a batch system.
type Job struct {
	// Name labels the job in the batch system's listings (squeue, qstat,
	// condor_q). Characters the batch systems do not accept are replaced;
	// empty means "rightsize".
	Name string

	// Command is a shell command line, run as /bin/sh -c Command on the
	// execution host, in Dir.
	Command string

	// Dir is the directory the command runs in and the one relative file
	// paths are relative to; empty means the caller's working directory.
	// Drivers that ship files resolve Inputs and Outputs against Dir on the
	// submitting host and run the command in a sandbox instead.
	Dir string

	// Inputs are the files the command reads; Outputs the files it writes.
	// On a shared filesystem every input must exist when the job is
	// submitted, each output's directory is created before, and an output
	// still missing after the command exits 0 fails the job
	// (ErrMissingOutput). A driver that ships files copies the inputs to the
	// execution host and the outputs back.
	Inputs, Outputs []File

	// Env holds NAME=value entries added to the command's environment, which
	// otherwise is the submitting process's (SLURM, Grid Engine and HTCondor
	// are asked to pass it on).
	Env []string

	// Resources are what the job asks the batch system for.
	Resources Resources

	// Category groups jobs of one kind, for a driver that keeps statistics
	// per kind (the Work Queue driver's fast abort); others ignore it.
	Category string

	// Do, if set, does what Command does, in this process: a local driver
	// opened with Options.InProcess calls it instead of starting a
	// process, which saves the start of a program and its loading of
	// what the caller already holds (the function of an All-Pairs or
	// Wavefront master). It runs in Dir's place (it must use Dir's path
	// itself) and returns nil for an exit status of 0, or an error, which
	// becomes exit status 1 with the error's text as standard error; its
	// context ends when the job is removed or reaches its wall time. The
	// other drivers run Command.
	Do func(ctx context.Context) error
}

// A File is one file a job reads or writes.
type File struct {
	// Path is the file's name on the submitting host, relative to Job.Dir
	// unless absolute.
	Path string
	// Remote is the file's name in the execution sandbox of a driver that
	// ships files; empty means Path. Drivers that run on a shared
	// filesystem cannot rename files and refuse a Remote that differs from
	// Path (errors.ErrUnsupported).
	Remote string
	// Cache says the file is shared by many jobs, so a driver that ships
	// files may keep it on the execution host for the next job. Drivers on a
	// shared filesystem ignore it.
	Cache bool
}

// Resources are what a job asks for. A zero field asks for the batch
// system's default. How each driver maps them is in its documentation.
type Resources struct {
	Cores    int           // CPU cores
	MemoryMB int64         // memory, in MB
	DiskMB   int64         // local scratch disk, in MB
	WallTime time.Duration // wall-clock limit; the job is stopped after it
}

// State is where a job is in its life.
type State int

// The states of a job. Done and Failed are final.
const (
	Queued  State = iota // submitted, waiting for the batch system to start it
	Running              // started
	Done                 // the command exited; Status.ExitCode says how
	Failed               // the command did not run to an exit status; Status.Err says why
)

func (s State) String() string {
	switch s {
	case Queued:
		return "queued"
	case Running:
		return "running"
	case Done:
		return "done"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Final reports whether s is the last state of a job.
func (s State) Final() bool { return s == Done || s == Failed }

// Status is what a driver knows of one job.
type Status struct {
	State State
	// ExitCode is the command's exit status when State is Done: what
	// /bin/sh reports, so 128+n when the command was killed by signal n
	// (by every driver alike: batch systems report no more than that).
	ExitCode int
	// Err says why the job failed when State is Failed.
	Err error

	// When the job was submitted, seen running, and seen ending; a zero
	// time when the driver did not see that moment.
	Submitted, Started, Ended time.Time
}

// An Event is a change in one job's status.
type Event struct {
	ID string
	Status

	// Stdout and Stderr are the last few kilobytes the command wrote to its
	// standard output and error, in the final event only. A batch system's
	// own complaints about the job (a wall-time kill, a failed start) are in
	// Stderr too where the system writes them to the job's error file.
	Stdout, Stderr []byte
}

// The reasons a job fails. Status.Err wraps one of them; the message around
// it carries the details, in the batch system's own words where it gave any.
var (
	// ErrRejected: the batch system will not run the job: it holds it, put
	// it in an error state, or keeps it pending for a reason that cannot
	// resolve by waiting (its request does not fit any node). The driver
	// removes such a job from the queue.
	ErrRejected = errors.New("rejected by the batch system")
	// ErrVanished: the batch system ended the job, or lost it, before the
	// command ended on its own: cancelled by someone else, lost with its
	// node, or forgotten by the batch system.
	ErrVanished = errors.New("job ended without an exit status")
	// ErrTimeLimit: the batch system stopped the job at its wall-time limit.
	ErrTimeLimit = errors.New("wall-time limit reached")
	// ErrRemoved: the job was removed through Driver.Remove or Close.
	ErrRemoved = errors.New("job removed")
	// ErrMissingOutput: the command exited 0 but did not create an output.
	ErrMissingOutput = errors.New("output not created")

	// ErrUnknownJob is returned for an ID the driver did not hand out.
	ErrUnknownJob = errors.New("unknown job")
	// ErrClosed is returned by Submit after Close.
	ErrClosed = errors.New("batch driver closed")
)

// A CommandError is a batch-system command that failed, with what it said.
type CommandError struct {
	Args   []string // the command line
	Err    error    // how it failed (*exec.ExitError, or why it did not start)
	Output string   // what it printed (standard error, else standard output), trimmed
}

func (e *CommandError) Error() string {
	msg := strings.Join(e.Args, " ") + ": " + e.Err.Error()
	if e.Output != "" {
		msg += ": " + e.Output
	}
	return msg
}

func (e *CommandError) Unwrap() error { return e.Err }

// A FileShipper is a Driver that sends a job's inputs to where the job runs
// and brings its outputs back, so that jobs need no shared filesystem and
// may rename files (File.Remote). Drivers that are not FileShippers run
// jobs in place on a filesystem the hosts share.
type FileShipper interface {
	Driver
	ShipsFiles() bool
}

// A StragglerAborter is a Driver whose system aborts straggling jobs and
// runs them again by itself (Work Queue's fast abort); its caller should
// not abort them too. FastAborts counts the stragglers aborted so far.
type StragglerAborter interface {
	Driver
	AbortsStragglers() bool
	FastAborts() int
}

// A Listener is a Driver that workers connect to, on Port.
type Listener interface {
	Driver
	Port() int
}

// A CapacityReporter is a Driver that can say how many jobs at once the
// system it feeds could keep running (a Work Queue master's capacity, seed
// 000 Eq. 4.5), or 0 while it does not know.
type CapacityReporter interface {
	Driver
	Capacity() float64
}

// A FreeReporter is a Driver that can say how many cores its system has
// free now, for a caller that sizes its requests by what would start at
// once (the factory's Optimal strategy).
type FreeReporter interface {
	Driver
	FreeCores(ctx context.Context) (int, error)
}

// ShipsFiles reports whether d sends jobs' files to where they run.
func ShipsFiles(d Driver) bool {
	s, ok := d.(FileShipper)
	return ok && s.ShipsFiles()
}

// AbortsStragglers reports whether d's system aborts stragglers itself.
func AbortsStragglers(d Driver) bool {
	a, ok := d.(StragglerAborter)
	return ok && a.AbortsStragglers()
}
