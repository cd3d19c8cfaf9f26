package pool

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rightsize/rightsize/internal/testutil"
)

// secret is what a file holding secrets says; no error may quote it.
const secret = "root:$6$SECRETHASH:19000:0:99999:7:::\nSECRETLINE-----BEGIN PRIVATE KEY-----\nsecretkey_that_is_long_enough: x\n"

// quotesSecret reports whether err quotes any of secret.
func quotesSecret(err error) bool {
	return strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "secretkey")
}

// TestReadPolicyHostile: what a peer with write access to the policy's
// directory may put in its place. Each is refused at once — no wait for a
// FIFO's writer, no read without end — and no error quotes a secret.
func TestReadPolicyHostile(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "shadow")
	if err := os.WriteFile(secretFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge")
	if err := os.WriteFile(huge, []byte("max_workers: 1\ndistribution: a=1\n"+strings.Repeat("#\n", MaxPolicySize)), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, target string
		wantErr      string
	}{
		{"link to a secret", secretFile, "unknown setting"},
		{"link to a FIFO", fifo, "not a regular file"},
		{"link to /dev/zero", "/dev/zero", "not a regular file"},
		{"link to a directory", dir, "not a regular file"},
		{"link to a file past the size", huge, "more than a policy's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "pool.conf")
			if err := os.Symlink(tc.target, path); err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				_, err := ReadPolicy(path)
				got <- err
			}()
			var err error
			testutil.WaitFor(t, "ReadPolicy to return", 10*time.Second, func() bool {
				select {
				case err = <-got:
					return true
				default:
					return false
				}
			})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ReadPolicy: %v, want an error saying %q", err, tc.wantErr)
			}
			if err != nil && quotesSecret(err) {
				t.Errorf("the error quotes the file: %v", err)
			}
		})
	}
	// Each line of the secret on its own, as the first line of a file.
	for _, line := range strings.Split(strings.TrimSpace(secret), "\n") {
		path := filepath.Join(t.TempDir(), "pool.conf")
		if err := os.WriteFile(path, []byte(line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadPolicy(path); err == nil || quotesSecret(err) {
			t.Errorf("a policy of %q: %v; want an error not quoting it", line, err)
		}
	}
}

// TestWatchPolicyHostile: the watched policy swapped, by a rename as an
// editor would, for a link to a FIFO then to a growing file, then its
// directory renamed. Each swap is said and the last good policy kept
// (the watcher does not hang on the FIFO: a good edit after it is read),
// and the loss of the watch is said.
func TestWatchPolicyHostile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "conf")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "pool.conf")
	renameText(t, path, "max_workers: 1\ndistribution: a=1\n")
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	watched := watchReadings(t, path)
	// next waits for the reading that satisfies ok; every policy read
	// meanwhile must be the last good one, max_workers 2.
	next := func(what string, ok func(reading) bool) {
		t.Helper()
		watched(what, func(r reading) bool {
			if ok(r) {
				return true
			}
			if r.p != nil && r.p.MaxWorkers != 2 {
				t.Errorf("waiting for %s, read a policy of max_workers %d", what, r.p.MaxWorkers)
			}
			return false
		})
	}
	failing := func(want string) func(reading) bool {
		return func(r reading) bool { return r.err != nil && strings.Contains(r.err.Error(), want) }
	}

	rename(t, path, func(tmp string) error { return os.Symlink(fifo, tmp) })
	next("the FIFO refused", failing("not a regular file"))
	renameText(t, path, "max_workers: 2\ndistribution: a=1\n")
	next("max_workers 2 after the FIFO", func(r reading) bool { return r.p != nil && r.p.MaxWorkers == 2 })

	// A file that grows past the size while it is watched.
	renameText(t, path, "max_workers: 3\ndistribution: a=1\n"+strings.Repeat("#\n", MaxPolicySize))
	next("the grown file refused", failing("more than a policy's"))

	if err := os.Rename(dir, dir+".moved"); err != nil {
		t.Fatal(err)
	}
	next("the loss of the watch said", failing("no longer read again"))
}
