//go:build cgo

package funcs

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

// A crash in the user's function cannot be contained in this process: the
// function may have corrupted the C heap or died holding one of libc's
// locks. So a fatal signal raised by the function itself (SIGSEGV, SIGBUS,
// SIGFPE, SIGILL, SIGABRT from abort) makes the process write one line
// naming the function and the call, and exit with status 1, instead of Go's
// stack dump and status 2. Every signal handled here that is not such a
// crash (a fault in Go code, a signal sent by another process) goes to the
// handler it replaced, Go's.
//
// The call in progress on a thread is marked by a thread-local pointer,
// set around the call to the user's function: two stores per call. Its
// strings are the caller's and outlive the call.
struct call {
	const char *name, *in0, *in1;
	size_t name_len, in0_len, in1_len;
	int has_cell;
	long long x, y;
};
static __thread struct call *current_call;

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define NFATAL (sizeof fatal_signals / sizeof fatal_signals[0])
static struct sigaction replaced[NFATAL];
static char prog[128];
static size_t prog_len;
static int stderr_tty; // erase a progress bar's line first

// msg builds the crash line with async-signal-safe functions only.
struct msg { char buf[4096]; size_t n; };
static void add(struct msg *m, const char *s, size_t len) {
	if (len > sizeof m->buf - 1 - m->n) len = sizeof m->buf - 1 - m->n;
	memcpy(m->buf + m->n, s, len);
	m->n += len;
}
static void adds(struct msg *m, const char *s) { add(m, s, strlen(s)); }
static void adddec(struct msg *m, long long v) {
	char b[24];
	int i = sizeof b;
	unsigned long long u = v < 0 ? -(unsigned long long)v : (unsigned long long)v;
	do { b[--i] = '0' + u % 10; u /= 10; } while (u);
	if (v < 0) b[--i] = '-';
	add(m, b + i, sizeof b - i);
}
static void addhex(struct msg *m, uintptr_t v) {
	char b[2 + 2 * sizeof v];
	int i = sizeof b;
	do { b[--i] = "0123456789abcdef"[v & 15]; v >>= 4; } while (v);
	b[--i] = 'x';
	b[--i] = '0';
	add(m, b + i, sizeof b - i);
}

static void on_fatal_signal(int sig, siginfo_t *si, void *uc) {
	struct call *c = current_call;
	// A fault the function caused, or a signal it sent itself (abort, raise).
	int own = si->si_code > 0 || (si->si_code == SI_TKILL && si->si_pid == getpid());
	if (c != NULL && own) {
		current_call = NULL;
		struct msg m = {.n = 0};
		if (stderr_tty)
			adds(&m, "\r\033[K");
		add(&m, prog, prog_len);
		adds(&m, ": the function ");
		add(&m, c->name, c->name_len);
		adds(&m, " crashed with ");
		switch (sig) {
		case SIGSEGV: adds(&m, "SIGSEGV (a bad memory access"); break;
		case SIGBUS: adds(&m, "SIGBUS (a bad memory access"); break;
		case SIGFPE: adds(&m, "SIGFPE (an arithmetic error, such as a division by zero"); break;
		case SIGILL: adds(&m, "SIGILL (an illegal instruction"); break;
		default: adds(&m, "SIGABRT (it called abort, or a check in the C library failed"); break;
		}
		if ((sig == SIGSEGV || sig == SIGBUS) && si->si_code > 0) {
			adds(&m, " at ");
			addhex(&m, (uintptr_t)si->si_addr);
		}
		adds(&m, ")");
		if (c->has_cell) {
			adds(&m, " computing cell (");
			adddec(&m, c->x);
			adds(&m, ",");
			adddec(&m, c->y);
			adds(&m, ")");
		} else if (c->in0_len > 0) {
			adds(&m, " on ");
			add(&m, c->in0, c->in0_len);
			if (c->in1_len > 0) {
				adds(&m, " and ");
				add(&m, c->in1, c->in1_len);
			}
		}
		m.buf[m.n++] = '\n';
		for (size_t off = 0; off < m.n;) {
			ssize_t w = write(2, m.buf + off, m.n - off);
			if (w < 0 && errno == EINTR) continue;
			if (w <= 0) break;
			off += w;
		}
		_exit(1);
	}
	for (size_t i = 0; i < NFATAL; i++) {
		if (fatal_signals[i] != sig) continue;
		struct sigaction *old = &replaced[i];
		if (old->sa_flags & SA_SIGINFO) {
			old->sa_sigaction(sig, si, uc);
		} else if (old->sa_handler == SIG_DFL) {
			// The default action, once this handler returns.
			struct sigaction dfl;
			memset(&dfl, 0, sizeof dfl);
			dfl.sa_handler = SIG_DFL;
			sigaction(sig, &dfl, NULL);
			raise(sig);
		} else if (old->sa_handler != SIG_IGN) {
			old->sa_handler(sig);
		}
		return;
	}
}

// install_crash_handler installs on_fatal_signal for the fatal signals,
// keeping the handlers it replaces. It returns 0 or an errno.
static int install_crash_handler(const char *name, size_t len) {
	if (len > sizeof prog) len = sizeof prog;
	memcpy(prog, name, len);
	prog_len = len;
	stderr_tty = isatty(2);
	for (size_t i = 0; i < NFATAL; i++) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = on_fatal_signal;
		// SA_ONSTACK as Go requires of every handler: it runs on the
		// thread's signal stack, which a stack overflow leaves usable.
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
		sigfillset(&sa.sa_mask);
		if (sigaction(fatal_signals[i], &sa, &replaced[i]) != 0)
			return errno;
	}
	return 0;
}

static void *call_allpairs(void *f, const void *a, int al, const void *b, int bl,
		const char *name, size_t name_len, int has_cell, long long x, long long y,
		const char *in0, size_t in0_len, const char *in1, size_t in1_len) {
	struct call c = {name, in0, in1, name_len, in0_len, in1_len, has_cell, x, y};
	current_call = &c;
	void *r = ((allpairs_fn)f)(a, al, b, bl);
	current_call = NULL;
	return r;
}
static void *call_wavefront(void *f, const void *x, int xl, const void *y, int yl, const void *d, int dl,
		const char *name, size_t name_len, int has_cell, long long cx, long long cy) {
	struct call c = {name, NULL, NULL, name_len, 0, 0, has_cell, cx, cy};
	current_call = &c;
	void *r = ((wavefront_fn)f)(x, xl, y, yl, d, dl);
	current_call = NULL;
	return r;
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
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

// installCrashHandler installs the handler that names a crashing call (see
// the C code above), once per process: signal handlers are the process's.
var installCrashHandler = sync.OnceValue(func() error {
	prog := filepath.Base(os.Args[0])
	cprog := C.CString(prog)
	defer C.free(unsafe.Pointer(cprog))
	if errno := C.install_crash_handler(cprog, C.size_t(len(prog))); errno != 0 {
		return fmt.Errorf("install the handler that reports a crashing function: %w", syscall.Errno(errno))
	}
	return nil
})

func openSharedLib(name, path, symbol string, opts Options) (*sharedLib, error) {
	if err := installCrashHandler(); err != nil {
		return nil, err
	}
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

// cstr returns s as a C pointer and length for the crash line, without
// copying: the C side only reads it during the call.
func cstr(s string) (*C.char, C.size_t) {
	if s == "" {
		return nil, 0
	}
	return (*C.char)(unsafe.Pointer(unsafe.StringData(s))), C.size_t(len(s))
}

// invoke calls the library on args and copies the malloc'd, NUL-terminated
// result into Go memory before freeing it. label and, for All-Pairs, the
// inputs' paths are what a crash names.
func (l *sharedLib) invoke(args [][]byte, inputs []Input, label Label) ([]byte, error) {
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
	name, nameLen := cstr(l.info.Name)
	var hasCell C.int
	if label.set {
		hasCell = 1
	}
	x, y := C.longlong(label.x), C.longlong(label.y)
	var res unsafe.Pointer
	if len(args) == 2 {
		in0, in0Len := cstr(inputs[0].Path)
		in1, in1Len := cstr(inputs[1].Path)
		res = C.call_allpairs(l.fn, ptrs[0], lens[0], ptrs[1], lens[1],
			name, nameLen, hasCell, x, y, in0, in0Len, in1, in1Len)
	} else {
		res = C.call_wavefront(l.fn, ptrs[0], lens[0], ptrs[1], lens[1], ptrs[2], lens[2],
			name, nameLen, hasCell, x, y)
	}
	if res == nil {
		return nil, errors.New("returned NULL")
	}
	defer C.free(res)
	return []byte(C.GoString((*C.char)(res))), nil
}

func (l *sharedLib) callLib(ctx context.Context, inputs []Input) ([]byte, error) {
	label := labelOf(ctx)
	if l.direct(ctx) {
		// The engines' path, without the closure below, which would cost
		// an allocation per call.
		args, err := l.args(inputs)
		if err != nil {
			return nil, err
		}
		out, err := l.invoke(args, inputs, label)
		if err != nil {
			return nil, &CallError{Func: l.info.Name, ExitCode: -1, Err: err}
		}
		return out, nil
	}
	// The closure may outlive the call (a timeout); capturing a copy keeps
	// the caller's inputs off the heap.
	in := slices.Clone(inputs)
	out, err := l.call(ctx, inputs, func(args [][]byte) ([]byte, error) { return l.invoke(args, in, label) })
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
