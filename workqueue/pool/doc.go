// Package pool is a Work Queue worker pool (seed 000 §4.4–4.5): it keeps
// workers submitted to a batch system for every master whose project its
// policy file names, as many as each can use and no more, shares them by
// the policy's proportions when they are scarce, and publishes its
// decision to the catalog.
//
// The decision is Plan's, a state machine without I/O driven with logical
// time (the distribution of Eqs. 4.6–4.15 under the pool decisions D1–D7
// of package factory); Run is the thin driver that reads the masters'
// records from the catalog, submits workers through a batch.Driver, follows
// their jobs and reloads the policy file when it changes.
//
// Each worker is submitted for one master, with the pool's name (it tells
// the master, which counts the workers of each pool in its
// workers_by_pool). The pool never removes a worker that runs a task: a
// master's workers beyond the decision leave when idle, at their idle
// timeout or, with a billing cycle, near the end of their cycle. Masters
// releasing a pool's excess workers, and workers choosing a master by the
// decision (seed 000 §4.5.1–4.5.2), are not done: the workers serve the
// master they were submitted for.
package pool
