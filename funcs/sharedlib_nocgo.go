//go:build !cgo

package funcs

func openLibPair(name, path string, opts Options) (Pair, error) { return nil, ErrNoCgo }
func openLibCell(name, path string, opts Options) (Cell, error) { return nil, ErrNoCgo }
