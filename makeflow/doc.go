// Package makeflow reads workflows written in the Makeflow language of
// CCTools and runs them: any DAG of shell commands whose rules name the files
// they read and write.
//
// The pieces, in the order a run uses them:
//
//   - ParseFile and Parse read the Make-like language (rules, variables,
//     export, categories and resources, LOCAL, remote renaming, nested
//     MAKEFLOW rules) into a Workflow; every syntax error carries
//     file:line:column. ParseJSONFile and ParseJXFile read the JSON form
//     and JX (evaluated to it), whose errors say which value is wrong and
//     why at that value's file:line:column (jsonerr.go).
//   - Workflow.Check reports, before anything runs, dependency cycles, files
//     made by two rules and inputs that neither exist nor are made by a rule.
//   - Scheduler is the DAG runner: a state machine with no I/O that is told
//     which rules ended (Ended) and answers which rules to start, within
//     job and resource limits, until nothing more can run (Finished);
//     ready rules start longest-path-first, in rules or (Cost) in
//     predicted seconds.
//   - RuleCosts learn each rule's time from the log of its runs (the last
//     completed run, from its Running and Complete lines; runs logged
//     before the workflow file last changed are ignored, since the log
//     names rules by position) and keep it, by category and command,
//     across cleans with the number of runs and when the last ended;
//     Estimate predicts the rules of a workflow from them (or their
//     category's, or the workflow's mean), and Workflow.Flow hands the DAG,
//     with each rule's input bytes and cores, to the makespan model of
//     package model, for placement (Options.Here keeps rules too short to
//     be worth a dispatch on this machine).
//   - Run is the thin driver around it: it recovers from the transaction log
//     (<file>.makeflowlog, in CCTools' line format), hands jobs to an
//     Executor, verifies outputs, logs every transition and keeps running
//     whatever can still run when a rule fails.
//   - Executors run the jobs: Local on this machine (every command waited
//     for by one proc.Loop; under Run, an exit is handled and the rules it
//     lets start are started on that loop's goroutine when the driver is
//     idle), DryRun nowhere (it only prints them), and Batch on a batch
//     system through a batch.Driver of the top-level batch package
//     (SLURM, Grid Engine, HTCondor, local processes) or on Work Queue
//     workers through batch/wq, shipping inputs and fetching outputs when
//     the hosts share no filesystem with this one.
//   - Options.GC deletes intermediate files once no rule that is left reads
//     them; Workflow.Wrap wraps every command (CCTools' --wrapper).
//   - Options.Storage holds a run to a disk budget, decided in the
//     Scheduler (storage.go; StorageFootprint simulates it); Options.Archive
//     reuses outputs keyed by command and input contents (archive.go);
//     Options.MonitorDir writes CCTools' resource summaries (monitor.go);
//     Options.SubmitTimeout retries refused submissions (submit.go).
//   - Clean removes what a workflow made; WriteDot draws the DAG.
//
// The package does not open batch drivers or start Work Queue masters or
// workers: the caller (the makeflow command, package internal/makeflowcmd)
// opens a driver and hands it to NewBatch; the package itself does not link
// the Work Queue master. It has no notion of pattern rules, phony targets
// or timestamps-only rebuilds as in GNU make; what is done is what the log
// says was done.
package makeflow
