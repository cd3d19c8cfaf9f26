// Package wire reads and writes the Work Queue wire protocol as Debian's
// CCTools speaks it (protocol 9): the line messages masters and workers
// exchange, the task description, length-prefixed bodies, URL-encoded file
// names, and the password challenge, run so that neither side is an answer
// oracle for a peer without the password. It also reads password files and
// builds the TLS configurations of masters and workers.
//
// Every length it reads from a peer is bounded by Limits, and every name is
// decoded and can be checked (CheckCacheName, CheckRelativePath) before it
// touches a file system, so that a hostile peer gets an error, never a panic
// or a write outside a workspace.
//
// It does not keep sessions, schedule tasks or run commands: the workqueue
// master and the worker do that on top of it.
package wire
