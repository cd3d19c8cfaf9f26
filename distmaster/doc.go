// Package distmaster is the distributed master of seed 000 (Fig. 3.2): it
// runs an All-Pairs or Wavefront problem as blocks on a batch system — Work
// Queue workers, local processes, SLURM, Grid Engine or HTCondor, through
// package batch (Work Queue through batch/wq) — instead of on this machine's
// cores.
//
// RunAllPairs and RunWavefront take the block size automatic placement
// chose (package model/place, with the cluster's measured inputs in
// Config.Cluster), or else benchmark the user's function briefly
// (SampleAllPairs, SampleWavefront) and size the blocks with the models of
// package model (jobs long enough that dispatch is a small part of them,
// short and many enough that the last round, a lost worker or a straggler
// costs little); jobs take Config.JobCores cores each (a whole node's on a
// batch system, when placement says so). They submit each block
// as a job that runs this same program in sub-problem mode on the worker
// (allpairs -M -X -Y -W -H, wavefront -M -X -Y -W -H), with the program,
// the function and the block's inputs shipped to Work Queue workers (cached
// there when many blocks share them) or named by path on a shared
// filesystem. Each job also carries the same work to do in this process
// (batch.Job.Do, with the function the caller opened), which a local
// driver opened with batch.Options.InProcess does instead of starting the
// program: this machine's share of a hybrid run then costs no more than
// multicore. A hybrid Wavefront (Wavefront.HereCores), on a batch system
// or on Work Queue, goes further: this machine's cores take cells, not
// blocks, as the multicore engine does, and the cluster only the blocks
// that become ready while they are busy (the policy of wavefront/blocks'
// Hybrid, which model.WavefrontHybrid simulates for placement); a block
// still in the queue when the cores run out of cells is taken back, and
// one that fails there is computed here. On Work Queue the cells here give
// way to a worker connected from this machine by its cores (both would
// otherwise share them at half speed), and blocks cut before any worker
// was known are cut again, on the same model, for the first workers to
// join.
//
// Each block's cells come back as a sparse-matrix file and are appended to
// the run's checkpoint (package sparsematrix), so that a master killed at
// any moment resumes without recomputing a finished block. A Wavefront
// block is submitted the moment the blocks it reads from are done (package
// wavefront/blocks).
//
// Failures are the job tracker's (package distmaster/jobs, which the
// simulator model/sim drives too): a state machine, with no I/O and no clock,
// that retries a failing block a bounded number of times before giving it
// up with the end of its standard error, removes and resubmits stragglers
// (fast abort) on batch systems, where Work Queue does that itself, and
// halts the run when the batch system refuses submissions several times in
// a row. It keeps no more jobs out than the master can serve: its capacity
// (seed 000 Eq. 4.5), the jobs' running time over the master's own time on
// each, bounds them once ten have finished. Its retry count and fast-abort
// rule are package lifecycle's, the ones every scheduler in rightsize
// applies.
//
// The package does not parse command lines, read R directories or choose
// between running here and distributing: the allpairs and wavefront
// commands do (package model/place), and call it when -T is given or
// placement chooses the cluster or a hybrid run. It does not start workers
// either (see workqueue's worker and factory).
package distmaster
