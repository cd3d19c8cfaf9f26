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
// workers_by_pool). The decision is enforced as seed 000 §4.5 says, by the
// masters and workers themselves (package enforce): the pool's record
// lists the workers it gives each master; a master gives its workers of
// the pool beyond that no new task and releases each once it holds none,
// and a released worker (or one whose master is gone) picks its next
// master among the pool's at random, weighted by the workers each may
// still take. The pool never removes a worker that runs a task: workers
// no master has room for leave at their idle timeout or, with a billing
// cycle, near the end of their cycle.
//
// A pool counts workers in one unit, a worker of Worker.Cores cores
// (Limits.WorkerCores): max_workers, the decision and the requests are in
// it. A request of k workers is one worker of k times the cores and
// counts as k; any other worker at a master, the pool's or one started by
// hand with more cores, counts as its cores over the unit, rounded up
// (enforce.Weigh). The masters advertise their workers both ways:
// workers_by_pool counts connections, as CCTools does, and cores_by_pool
// their cores, from which the pool, the masters enforcing its decision
// and the workers choosing a master all count the pool's workers in its
// unit, which the published decision states (each assignment's
// worker_cores, signed with it). A master's capacity (capacity_tasks) is
// in tasks, and its connected workers (cores_total) serve a task a core:
// the pool turns both into workers by Limits.TasksPerWorker. With workers
// that take a whole machine (Worker.Cores 0) the unit is not known, and
// the pool's workers count one each.
//
// With the masters' password (Config.PasswordFile) the published decision
// is signed with it (enforce.Sign), and the masters and workers that hold
// it honour no other record of the pool: the catalog authenticates no one.
// For the same reason the pool then gives workers only to the masters its
// policy serves that prove they hold the password, by the password
// exchange a worker runs (probed a few at a time, believed for ten
// minutes, a refusal for one): a peer's record of a master with many
// tasks waiting would otherwise draw the pool's share, and its workers,
// to the peer.
//
// The policy file is read only if it is a regular file (a link to one is
// followed) of at most MaxPolicySize bytes, so that what a peer with
// write access to its directory puts in its place — a FIFO, a device, a
// file that grows without end — is refused at once and the last good
// policy kept; errors quote no line of the file.
package pool
