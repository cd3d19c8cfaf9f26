// Package multicore holds rightsize's local engines: the ways one machine's
// cores are kept busy on an abstraction's cells.
//
// AllPairs walks an All-Pairs problem in blocks of A's rows and, within a
// block, in tiles of B's items that fit in the processor's cache: every core
// works on the same tile, whose items are read once into memory the cores
// share, while each core passes its rows of A over it, so that an input is
// read once per tile rather than once per cell (seed 000, Fig. 3.3–3.5). It
// never splits the problem into independent sub-problems per core; that
// thrashes the cache. Items are read into buffers the run uses again, not
// mapped one by one: unmapping memory in a process running on several cores
// costs every core a TLB flush. The exception is a function that computes
// blocks of cells (funcs.BlockPair): it compares a few big rows of A with
// the tile section by section, straight from the page cache, where a copy
// of the rows would cost more than the flush.
// It skips the cells a checkpoint already holds, and hands each finished cell
// over as soon as it is computed, so that a caller writing them out loses
// few to a crash.
//
// RunWavefront computes a Wavefront rectangle on this machine: a fixed
// number of goroutines take blocks from a blocks.Scheduler (wavefront/blocks) the moment
// their inputs exist, each with one in-process call or one child process in
// flight, keeping in memory only the values that cells still to run will
// read.
//
// The package does not choose between local and distributed execution, read
// command lines or format results; the abstraction packages (allpairs,
// wavefront) do that and call in here.
package multicore
