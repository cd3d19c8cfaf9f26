package proc

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// lockName is the file in a MkdirTemp directory that its owner keeps
// locked (flock) for as long as it uses the directory.
const lockName = ".lock"

// MkdirTemp creates a directory in root as os.MkdirTemp does (root ""
// means os.TempDir()), which the keeper removes if the program dies before
// RemoveDir. While in use, the directory holds a file, .lock, that the
// program keeps locked. Before creating it, MkdirTemp removes the
// directories of the same pattern, owned by this user, that dead programs
// left in root: those whose .lock exists and nothing holds. A directory
// without .lock, or whose lock cannot be taken, is left alone.
func (k *Keeper) MkdirTemp(root, pattern string) (string, error) {
	if root == "" {
		root = os.TempDir()
	}
	sweepTemp(root, pattern)
	dir, err := os.MkdirTemp(root, pattern)
	if err != nil {
		return "", err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		if err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			err = k.addDir(dir, lock)
		}
		if err != nil {
			lock.Close()
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("temporary directory in %s: %w", root, err)
	}
	return dir, nil
}

// sweepTemp removes the directories that MkdirTemp made in root with
// pattern for programs that have died: those owned by this user whose
// .lock exists and is not held. It reports nothing: what it cannot
// remove, or cannot prove abandoned, it leaves.
func sweepTemp(root, pattern string) {
	prefix, _, _ := strings.Cut(pattern, "*")
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if lock := lockAbandoned(dir); lock != nil {
			// Holding the lock until the directory is gone keeps other
			// sweeps out meanwhile.
			os.RemoveAll(dir)
			lock.Close()
		}
	}
}

// lockAbandoned returns dir's lock file, locked, if dir is a MkdirTemp
// directory of this user whose owner is gone, and nil otherwise.
func lockAbandoned(dir string) *os.File {
	st, err := os.Lstat(dir)
	if err != nil || !st.IsDir() {
		return nil
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Getuid() {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		f.Close()
		return nil
	}
	return f
}

// AddDir registers an existing directory for the keeper to remove, with
// everything in it, if the program dies before RemoveDir. The name must not
// contain a newline.
func (k *Keeper) AddDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	return k.addDir(abs, nil)
}

func (k *Keeper) addDir(dir string, lock *os.File) error {
	if strings.ContainsRune(dir, '\n') {
		return fmt.Errorf("process keeper: directory name %q contains a newline", dir)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.startLocked(); err != nil {
		return err
	}
	if _, err := io.WriteString(k.kp.w, "+"+dir+"\n"); err != nil {
		return fmt.Errorf("process keeper: %w", err)
	}
	if k.dirs == nil {
		k.dirs = map[string]*os.File{}
	}
	k.dirs[dir] = lock
	return nil
}

// RemoveDir removes a directory registered by MkdirTemp or AddDir, with
// everything in it, and forgets it.
func (k *Keeper) RemoveDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	err = os.RemoveAll(abs)
	k.mu.Lock()
	defer k.mu.Unlock()
	lock, ok := k.dirs[abs]
	if !ok {
		return err
	}
	delete(k.dirs, abs)
	if k.kp != nil {
		io.WriteString(k.kp.w, "-"+abs+"\n")
	}
	if lock != nil {
		lock.Close()
	}
	return err
}
