// Package makeflow reads workflows written in the Makeflow language of
// CCTools and runs them: any DAG of shell commands whose rules name the files
// they read and write.
//
// The pieces, in the order a run uses them:
//
//   - ParseFile and Parse read the Make-like language (rules, variables,
//     export, categories and resources, LOCAL, remote renaming, nested
//     MAKEFLOW rules) into a Workflow; every syntax error carries
//     file:line:column.
//   - Workflow.Check reports, before anything runs, dependency cycles, files
//     made by two rules and inputs that neither exist nor are made by a rule.
//   - Scheduler is the DAG runner: a state machine with no I/O that is told
//     which rules finished and answers which rules to start, within job and
//     resource limits.
//   - Run is the thin driver around it: it recovers from the transaction log
//     (<file>.makeflowlog, in CCTools' line format), hands jobs to an
//     Executor, verifies outputs, logs every transition and keeps running
//     whatever can still run when a rule fails.
//   - Clean removes what a workflow made; WriteDot draws the DAG.
//
// The package runs jobs on this machine (Local) or only prints them
// (DryRun). It does not talk to batch systems or Work Queue itself: those are
// other Executor implementations, which plug into Run without changing it.
// It has no notion of pattern rules, phony targets or timestamps-only
// rebuilds as in GNU make; what is done is what the log says was done.
package makeflow
