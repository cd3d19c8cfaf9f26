package makeflow

import (
	"fmt"
	"time"
)

// An Executor runs the jobs of a workflow somewhere: on this machine
// (Local), nowhere (DryRun), or on a batch system.
//
// The contract, which Run relies on:
//   - Submit starts a job and returns without waiting for it to finish. If
//     it returns an error the job did not start and no Result will come for
//     it; otherwise exactly one Result comes for it on the Results channel,
//     whatever happens (success, failure, cancellation, lost worker).
//   - Results returns the same channel every time. Run reads it until every
//     submitted job has reported, so an executor may block sending on it.
//   - Cancel asks for a submitted job to be stopped; it may be called more
//     than once, and for a job that has already ended. The job's Result
//     still comes, with Canceled set if it was stopped.
//   - Close is called once, after the last Result has been read.
//
// An executor is called from one goroutine at a time.
type Executor interface {
	Submit(job *Job) (jobID int64, err error)
	Results() <-chan *Result
	Cancel(job *Job)
	Close() error
}

// A Job is one attempt at running one rule.
type Job struct {
	Rule    *Rule
	Attempt int // 1 for the first try

	// Command is the shell command to run. It is Rule.Command, or for a
	// nested workflow the command that runs it.
	Command string

	// Dir is the workflow's directory: the command runs there, and relative
	// file names in Rule.Sources and Rule.Targets are relative to it. An
	// executor that runs commands elsewhere ships Rule.Sources there (under
	// File.RemoteName) and brings Rule.Targets back.
	Dir string
}

// A Result is how a job ended.
type Result struct {
	Job *Job

	// ExitCode is the command's exit status, or -1 if it did not exit
	// normally (killed by a signal, or never ran; see Signal and Err).
	ExitCode int
	// Signal names the signal that killed the command, if one did.
	Signal string
	// Err is set when the job could not be run or its outputs could not be
	// brought back, as opposed to a command that ran and failed.
	Err error
	// Canceled is set when the job ended because of Cancel.
	Canceled bool
	// Stderr is the end of what the command wrote to its standard error,
	// at most a few kilobytes.
	Stderr []byte

	Started, Ended time.Time

	// CPU is the user and system time the command and the children it
	// waited for used, and MaxRSS the largest resident set among them, in
	// bytes; zero where the executor cannot tell (a batch system).
	CPU    time.Duration
	MaxRSS int64

	archived bool // the outputs came from Options.Archive; nothing ran
}

// OK reports whether the command ran and exited with status 0.
func (r *Result) OK() bool {
	return r.Err == nil && !r.Canceled && r.ExitCode == 0 && r.Signal == ""
}

// Status describes how the job ended, for messages: "exit status 1",
// "killed by signal SIGKILL", or the error.
func (r *Result) Status() string {
	switch {
	case r.Canceled:
		return "cancelled"
	case r.Err != nil:
		return r.Err.Error()
	case r.Signal != "":
		return "killed by signal " + r.Signal
	default:
		return fmt.Sprintf("exit status %d", r.ExitCode)
	}
}
