//go:build !linux

package funcs

import "os"

// openOutput opens a file for a call's output: an unlinked temporary file
// in dir.
func openOutput(dir string) (*os.File, error) { return openAppendTemp(dir) }
