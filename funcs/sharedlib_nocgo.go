//go:build !cgo

package funcs

import "errors"

var errNoCgo = errors.New("shared-library functions need a build with cgo (CGO_ENABLED=1 and gcc)")

func openLibPair(name, path string, opts Options) (Pair, error) { return nil, errNoCgo }
func openLibCell(name, path string, opts Options) (Cell, error) { return nil, errNoCgo }
