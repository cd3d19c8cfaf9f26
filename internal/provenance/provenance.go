// Package provenance describes what a checkpoint's cells were computed from
// — the function (its file's digest and its arguments) and the inputs (a
// file's size and modification time, or a digest of its bytes) — and says
// what changed since, so that a re-run refuses or recomputes instead of
// reusing stale cells.
//
// It only describes and compares. What a change makes stale (an All-Pairs
// row, every Wavefront cell downstream of a boundary cell) and whether to
// refuse or recompute is the engines' decision.
package provenance

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Function identifies a function as far as its results go: a built-in by
// its name, a program or shared library by its file's content (a file moved
// elsewhere is the same function), and the extra arguments a program is
// given.
type Function struct {
	Spec   string `json:"spec"`             // the name it was opened with: builtin:NAME or a path
	Path   string `json:"path,omitempty"`   // the program or library file, absolute; "" for a built-in
	SHA256 string `json:"sha256,omitempty"` // of that file
	Args   string `json:"args,omitempty"`   // a program's extra arguments (-e), as given
}

// FunctionOf describes the function opened as spec from the file at path
// ("" for a built-in) with extra arguments args, reading the file to
// digest it.
func FunctionOf(spec, path, args string) (Function, error) {
	f := Function{Spec: spec, Args: args}
	if path == "" {
		return f, nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return f, err
	}
	digest, err := FileDigest(abs)
	if err != nil {
		return f, fmt.Errorf("function %s: %w", spec, err)
	}
	f.Path, f.SHA256 = abs, digest
	return f, nil
}

// Diff says how f differs from old in what it computes, or returns "" if
// it computes the same.
func (f Function) Diff(old Function) string {
	switch {
	case f.Path == "" && f.Spec != old.Spec, (f.Path == "") != (old.Path == ""),
		f.SHA256 != old.SHA256 && f.Path != old.Path:
		return fmt.Sprintf("they were computed by %s, not %s", old.Spec, f.Spec)
	case f.SHA256 != old.SHA256:
		return fmt.Sprintf("%s has changed since they were computed (sha256 %.12s… then, %.12s… now)", f.Spec, old.SHA256, f.SHA256)
	case f.Args != old.Args:
		return fmt.Sprintf("they were computed with the extra arguments %q, not %q", old.Args, f.Args)
	}
	return ""
}

// Check compares f, the function of a run, with old, the one that computed
// the cells of the checkpoint at path. The same function passes. Another is
// refused with an error that says what changed and how to go on, unless
// trust (the user vouches that the change does not alter the cells): then
// the note says the cells are kept.
func (f Function) Check(old Function, path string, trust bool) (note string, err error) {
	d := f.Diff(old)
	switch {
	case d == "":
		return "", nil
	case trust:
		return fmt.Sprintf("%s: %s; its cells are kept, as --trust-checkpoint asks", path, d), nil
	}
	hint := ""
	if f.Spec == old.Spec {
		hint = "; or, if the change does not alter the cells computed so far, keep them with --trust-checkpoint"
	}
	return "", fmt.Errorf("%s holds cells of another function: %s. To resume, give the function they were computed with; or remove %s to compute everything again%s",
		path, d, path, hint)
}

// Stamp is what tells that a file changed without reading it, as make and
// rsync tell: its size and modification time.
type Stamp struct {
	Size    int64 `json:"size"`
	ModTime int64 `json:"mtime_ns"` // nanoseconds since 1970
}

// StampOf returns the stamp of a file from its FileInfo.
func StampOf(fi fs.FileInfo) Stamp {
	return Stamp{Size: fi.Size(), ModTime: fi.ModTime().UnixNano()}
}

// Diff says how s differs from old, or returns "" if it does not.
func (s Stamp) Diff(old Stamp) string {
	switch {
	case s.Size != old.Size:
		return fmt.Sprintf("size %d → %d bytes", old.Size, s.Size)
	case s.ModTime != old.ModTime:
		const layout = "2006-01-02 15:04:05.000000000"
		return fmt.Sprintf("modified %s → %s", time.Unix(0, old.ModTime).Format(layout), time.Unix(0, s.ModTime).Format(layout))
	}
	return ""
}

// Digest returns the SHA-256 of b, in hexadecimal.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// FileDigest returns the SHA-256 of the file at path, in hexadecimal.
func FileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
