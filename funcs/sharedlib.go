//go:build cgo

package funcs

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

typedef void *(*allpairs_fn)(const void *, int, const void *, int);
typedef void *(*wavefront_fn)(const void *, int, const void *, int, const void *, int);

// Each helper reads dlerror in the same C call as the failing dl function:
// the error string is per-thread, and a goroutine may change threads between
// two cgo calls.
// open_lib returns the handle, or NULL with *err set if the file cannot be
// loaded, or NULL with *err unset if it lacks the symbol.
static void *open_lib(const char *path, const char *symbol, void **fn, const char **err) {
	*err = NULL;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) { *err = dlerror(); return NULL; }
	*fn = dlsym(h, symbol);
	if (!*fn) { dlclose(h); return NULL; }
	return h;
}
static const char *close_lib(void *h) {
	return dlclose(h) == 0 ? NULL : dlerror();
}

static void *call_allpairs(void *f, const void *a, int al, const void *b, int bl) {
	return ((allpairs_fn)f)(a, al, b, bl);
}
static void *call_wavefront(void *f, const void *x, int xl, const void *y, int yl, const void *d, int dl) {
	return ((wavefront_fn)f)(x, xl, y, yl, d, dl);
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"unsafe"
)

// sharedLib is a loaded .so and the one symbol the engine calls.
type sharedLib struct {
	inProcess
	handle unsafe.Pointer
	fn     unsafe.Pointer

	mu        sync.Mutex
	abandoned bool // a timed-out call may still be running inside the library
	closed    bool
}

func openSharedLib(name, path, symbol string, opts Options) (*sharedLib, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	cpath := C.CString(abs)
	defer C.free(unsafe.Pointer(cpath))
	csym := C.CString(symbol)
	defer C.free(unsafe.Pointer(csym))

	var fn unsafe.Pointer
	var cerr *C.char
	h := C.open_lib(cpath, csym, &fn, &cerr)
	if h == nil {
		if cerr == nil {
			return nil, fmt.Errorf("cannot use %s: it does not export %s", path, symbol)
		}
		return nil, fmt.Errorf("cannot load %s: %s", path, C.GoString(cerr))
	}
	return &sharedLib{
		inProcess: inProcess{Info{Kind: SharedLibrary, Name: name, Path: path}, opts.Timeout},
		handle:    h,
		fn:        fn,
	}, nil
}

func (l *sharedLib) Info() Info { return l.info }

// Close unloads the library, unless a timed-out call may still be running in
// it: unloading code that is executing would crash the process.
func (l *sharedLib) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.abandoned {
		l.closed = true
		return nil
	}
	l.closed = true
	if cerr := C.close_lib(l.handle); cerr != nil {
		return fmt.Errorf("unload %s: %s", l.info.Path, C.GoString(cerr))
	}
	return nil
}

// invoke calls the library on args and copies the malloc'd, NUL-terminated
// result into Go memory before freeing it.
func (l *sharedLib) invoke(args [][]byte) ([]byte, error) {
	var ptrs [3]unsafe.Pointer
	var lens [3]C.int
	for i, a := range args {
		if len(a) > math.MaxInt32 {
			return nil, fmt.Errorf("input of %d bytes: %w for the library's int length", len(a), ErrTooLarge)
		}
		if len(a) > 0 {
			ptrs[i] = unsafe.Pointer(&a[0])
		}
		lens[i] = C.int(len(a))
	}
	var res unsafe.Pointer
	if len(args) == 2 {
		res = C.call_allpairs(l.fn, ptrs[0], lens[0], ptrs[1], lens[1])
	} else {
		res = C.call_wavefront(l.fn, ptrs[0], lens[0], ptrs[1], lens[1], ptrs[2], lens[2])
	}
	if res == nil {
		return nil, errors.New("returned NULL")
	}
	defer C.free(res)
	return []byte(C.GoString((*C.char)(res))), nil
}

func (l *sharedLib) callLib(ctx context.Context, inputs []Input) ([]byte, error) {
	out, err := l.call(ctx, inputs, l.invoke)
	var ce *CallError
	if errors.As(err, &ce) && ce.TimedOut {
		l.mu.Lock()
		l.abandoned = true
		l.mu.Unlock()
	}
	return out, err
}

type libPair struct{ *sharedLib }

func (l libPair) Call(ctx context.Context, a, b Input) ([]byte, error) {
	return l.callLib(ctx, []Input{a, b})
}

type libCell struct{ *sharedLib }

func (l libCell) Call(ctx context.Context, x, y, d Input) ([]byte, error) {
	return l.callLib(ctx, []Input{x, y, d})
}

func openLibPair(name, path string, opts Options) (Pair, error) {
	l, err := openSharedLib(name, path, "allpairs_function", opts)
	if err != nil {
		return nil, err
	}
	return libPair{l}, nil
}

func openLibCell(name, path string, opts Options) (Cell, error) {
	l, err := openSharedLib(name, path, "wavefront_function", opts)
	if err != nil {
		return nil, err
	}
	return libCell{l}, nil
}
