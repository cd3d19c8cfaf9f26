package wire

import (
	"bytes"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// Protocol is the Work Queue protocol version spoken: the one announced by
// the work_queue_worker of Debian's coop-computing-tools.
const Protocol = 9

// Message is one protocol line, parsed. Messages that are followed by a body
// (Put, Result, File, Symlink) carry its length; the body itself is read
// separately from the Conn.
type Message interface {
	// AppendTo appends the message's line, newline included.
	AppendTo(b []byte) []byte
}

// Messages a worker sends.
type (
	// Hello opens a worker's session: "workqueue 9 HOST OS ARCH VERSION".
	Hello struct {
		Protocol                int
		Host, OS, Arch, Version string
	}
	// Info is "info KEY VALUE"; VALUE may be empty or hold spaces.
	Info struct{ Key, Value string }
	// Alive answers Check, and is also part of a worker's first report.
	Alive struct{}
	// Resource is "resource NAME TOTAL SMALLEST LARGEST", or
	// "resource tag N", which ends a resource report.
	Resource struct {
		Name                     string
		Total, Smallest, Largest float64
	}
	// Feature is a user-defined feature the worker offers.
	Feature struct{ Name string }
	// AvailableResults says finished tasks are waiting to be collected.
	AvailableResults struct{}
	// Result is one finished task: "result STATUS EXIT SIZE USEC TASKID"
	// followed by SIZE bytes of its output.
	Result struct {
		Status   int   // a result code, 0 for a task that ran
		Exit     int   // the command's exit status
		Size     int64 // bytes of output that follow
		ExecUsec int64 // execution time in microseconds
		TaskID   int
	}
	// File is "file NAME SIZE" followed by SIZE bytes, in answer to Get.
	File struct {
		Name string
		Size int64
	}
	// Missing is "missing NAME ERRNO", in answer to Get: NAME, or an
	// entry of the directory NAME, could not be sent.
	Missing struct {
		Name  string
		Errno int
	}
)

// Messages a master sends.
type (
	// Put is "put NAME SIZE MODE" followed by SIZE bytes to store in the
	// worker's cache (or, inside Dir, in the directory being built).
	Put struct {
		Name string
		Size int64
		Mode fs.FileMode
	}
	// Symlink is "symlink NAME SIZE" followed by SIZE bytes of link target.
	Symlink struct {
		Name string
		Size int64
	}
	// Task starts a task description, which runs up to End.
	Task struct{ ID int }
	// Get asks for a cached file or directory: "get NAME 1".
	Get struct {
		Name      string
		Recursive bool
	}
	// Kill stops a task and removes its sandbox; ID -1 means every task.
	Kill struct{ ID int }
	// Unlink removes a file from the worker's cache.
	Unlink struct{ Name string }
	// InvalidateFile is unlink under another name, sent by newer masters.
	InvalidateFile struct{ Name string }
	// SendResults asks for finished tasks; N is -1 for all of them.
	SendResults struct{ N int }
	// Check asks the worker to say it is alive.
	Check struct{}
	// Release ends the session; the worker may reconnect at once.
	Release struct{}
	// Exit tells the worker to exit.
	Exit struct{}
)

// Messages either side sends.
type (
	// Dir opens a directory. From a master it is "dir NAME", and the entries
	// that follow, up to End, are relative to it. From a worker answering
	// Get it is "dir NAME 0", with entries that follow named in full.
	Dir struct {
		Name  string
		Reply bool // the worker's form, with the trailing 0
	}
	// End closes a task description, a directory, or a reply.
	End struct{}
	// Auth is "auth password sha1", which opens password authentication.
	Auth struct{ Method string }
	// StatusQuery is a status client's request, e.g. "queue_status"; the
	// master answers with a JSON array and closes the connection.
	StatusQuery struct{ Kind string }
)

// StatusKinds are the status queries a master answers.
var statusKinds = map[string]bool{
	"queue": true, "task": true, "worker": true, "wable": true, "resources": true,
}

// ParseError says why a line is not a valid message.
type ParseError struct {
	Line string // the offending line, truncated to 200 bytes
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("bad message %q: %s", e.Line, e.Msg) }

func parseErr(line []byte, format string, args ...any) error {
	if len(line) > 200 {
		line = line[:200]
	}
	return &ParseError{Line: string(line), Msg: fmt.Sprintf(format, args...)}
}

// lastApart takes args of a line "KW NAME N" whose NAME a CCTools worker
// sent unencoded, spaces and all: NAME is everything between the keyword
// and the last field, as it was written.
func lastApart(line []byte, kw string, args [][]byte) [][]byte {
	if len(args) <= 2 {
		return args
	}
	rest := line[bytes.Index(line, []byte(kw))+len(kw)+1:]
	i := bytes.LastIndexByte(rest, ' ')
	return [][]byte{rest[:i], rest[i+1:]}
}

// Parse parses one line (without its newline) into a Message. It never
// panics, and a Message it returns prints back (AppendTo) to an equivalent
// line.
func Parse(line []byte) (Message, error) {
	var buf [8][]byte
	f := fields(line, buf[:0])
	if len(f) == 0 {
		return nil, parseErr(line, "empty line")
	}
	kw := string(f[0])
	args := f[1:]
	want := func(n ...int) error {
		for _, k := range n {
			if len(args) == k {
				return nil
			}
		}
		return parseErr(line, "%s takes %v arguments, got %d", kw, n, len(args))
	}
	var err error
	name := func(i int) string {
		if err != nil {
			return ""
		}
		var s string
		s, err = DecodeName(string(args[i]))
		if err == nil && s == "" {
			err = parseErr(line, "empty name")
		}
		return s
	}
	num := func(i int) int64 {
		if err != nil {
			return 0
		}
		var n int64
		n, err = atoi(args[i])
		if err != nil {
			err = parseErr(line, "bad number %q", args[i])
		}
		return n
	}
	size := func(i int) int64 {
		n := num(i)
		if err == nil && n < 0 {
			err = parseErr(line, "negative size")
		}
		return n
	}
	id := func(i int) int {
		n := num(i)
		if err == nil && (n < -1 || n > 1<<31-1) {
			err = parseErr(line, "task id %d out of range", n)
		}
		return int(n)
	}
	var m Message
	switch kw {
	case "workqueue":
		if len(args) != 5 {
			return nil, want(5)
		}
		p := num(0)
		if err == nil && (p < 0 || p > 1000) {
			err = parseErr(line, "protocol %d out of range", p)
		}
		m = Hello{Protocol: int(p), Host: string(args[1]), OS: string(args[2]), Arch: string(args[3]), Version: string(args[4])}
	case "info":
		if len(args) < 1 {
			return nil, want(1, 2)
		}
		rest := line[len("info ")+len(args[0]):]
		if len(rest) > 0 {
			rest = rest[1:]
		}
		m = Info{Key: string(args[0]), Value: string(rest)}
	case "alive":
		err = want(0)
		m = Alive{}
	case "resource":
		if len(args) != 2 && len(args) != 4 {
			return nil, want(2, 4)
		}
		r := Resource{Name: string(args[0])}
		vals := []*float64{&r.Total, &r.Smallest, &r.Largest}
		for i, a := range args[1:] {
			v, perr := strconv.ParseFloat(string(a), 64)
			if perr != nil || v != v || v < 0 || v > 1e15 {
				return nil, parseErr(line, "bad resource value %q", a)
			}
			*vals[i] = v
		}
		if len(args) == 2 {
			r.Smallest, r.Largest = r.Total, r.Total
		}
		m = r
	case "feature":
		if err = want(1); err == nil {
			m = Feature{Name: name(0)}
		}
	case "available_results":
		err = want(0)
		m = AvailableResults{}
	case "result":
		if err = want(5); err == nil {
			r := Result{Status: int(num(0)), Exit: int(num(1)), Size: size(2), ExecUsec: num(3), TaskID: id(4)}
			if err == nil && (r.Status < -1<<31 || r.Status > 1<<31-1 || r.Exit < -1<<31 || r.Exit > 1<<31-1) {
				err = parseErr(line, "status out of range")
			}
			m = r
		}
	case "file":
		args = lastApart(line, kw, args)
		if err = want(2); err == nil {
			m = File{Name: name(0), Size: size(1)}
		}
	case "missing":
		// CCTools workers print the name here without encoding it, so a
		// name with spaces arrives split: the errno is the last field.
		if len(args) > 2 {
			joined := bytes.Join(args[:len(args)-1], []byte(" "))
			args = [][]byte{joined, args[len(args)-1]}
		}
		if err = want(2); err == nil {
			m = Missing{Name: name(0), Errno: int(num(1))}
			if err == nil && (m.(Missing).Errno < 0 || m.(Missing).Errno > 1<<16) {
				err = parseErr(line, "errno out of range")
			}
		}
	case "put":
		// Protocol 8 masters add a flags field; it carries nothing we use.
		if err = want(3, 4); err == nil {
			p := Put{Name: name(0), Size: size(1)}
			mode, perr := strconv.ParseUint(string(args[2]), 8, 32)
			if perr != nil {
				return nil, parseErr(line, "bad mode %q", args[2])
			}
			p.Mode = fs.FileMode(mode) & fs.ModePerm
			if len(args) == 4 {
				num(3)
			}
			m = p
		}
	case "symlink":
		if err = want(2); err == nil {
			m = Symlink{Name: name(0), Size: size(1)}
		}
	case "task":
		if err = want(1); err == nil {
			m = Task{ID: id(0)}
			if err == nil && m.(Task).ID < 0 {
				err = parseErr(line, "negative task id")
			}
		}
	case "get":
		if err = want(1, 2); err == nil {
			g := Get{Name: name(0)}
			if len(args) == 2 {
				g.Recursive = num(1) != 0
			}
			m = g
		}
	case "kill":
		if err = want(1); err == nil {
			m = Kill{ID: id(0)}
		}
	case "unlink":
		if err = want(1); err == nil {
			m = Unlink{Name: name(0)}
		}
	case "invalidate-file":
		if err = want(1); err == nil {
			m = InvalidateFile{Name: name(0)}
		}
	case "send_results":
		if err = want(1); err == nil {
			m = SendResults{N: id(0)}
		}
	case "check":
		err = want(0)
		m = Check{}
	case "release":
		err = want(0)
		m = Release{}
	case "exit":
		err = want(0)
		m = Exit{}
	case "dir":
		args = lastApart(line, kw, args)
		if err = want(1, 2); err == nil {
			d := Dir{Name: name(0)}
			if len(args) == 2 {
				d.Reply = true
				num(1)
			}
			m = d
		}
	case "end":
		err = want(0)
		m = End{}
	case "auth":
		if err = want(2); err == nil {
			if string(args[0]) != "password" {
				return nil, parseErr(line, "unknown authentication %q", args[0])
			}
			m = Auth{Method: string(args[1])}
		}
	default:
		if kind, ok := statusQuery(kw); ok && len(args) == 0 {
			return StatusQuery{Kind: kind}, nil
		}
		return nil, parseErr(line, "unknown message")
	}
	if err != nil {
		if _, ok := err.(*ParseError); !ok {
			err = parseErr(line, "%v", err)
		}
		return nil, err
	}
	return m, nil
}

func statusQuery(kw string) (string, bool) {
	const suffix = "_status"
	if len(kw) > len(suffix) && kw[len(kw)-len(suffix):] == suffix {
		kind := kw[:len(kw)-len(suffix)]
		return kind, statusKinds[kind]
	}
	return "", false
}

func appendName(b []byte, s string) []byte { return append(b, EncodeName(s)...) }

func appendInt(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }

func appendFloat(b []byte, v float64) []byte { return strconv.AppendFloat(b, v, 'g', -1, 64) }

func (m Hello) AppendTo(b []byte) []byte {
	b = append(b, "workqueue "...)
	b = appendInt(b, int64(m.Protocol))
	for _, s := range []string{m.Host, m.OS, m.Arch, m.Version} {
		b = append(b, ' ')
		b = append(b, token(s)...)
	}
	return append(b, '\n')
}

// token makes s fit in one space-separated field. Fields that are not file
// names are not URL-encoded by CCTools, so they are only kept from splitting.
func token(s string) string {
	if s == "" {
		return "unknown"
	}
	if strings.ContainsAny(s, " \n") {
		return strings.NewReplacer(" ", "_", "\n", "_").Replace(s)
	}
	return s
}

func (m Info) AppendTo(b []byte) []byte {
	b = append(b, "info "...)
	b = append(b, token(m.Key)...)
	if m.Value != "" {
		b = append(b, ' ')
		for i := 0; i < len(m.Value); i++ {
			if c := m.Value[i]; c != '\n' {
				b = append(b, c)
			}
		}
	}
	return append(b, '\n')
}

func (Alive) AppendTo(b []byte) []byte { return append(b, "alive\n"...) }

func (m Resource) AppendTo(b []byte) []byte {
	b = append(b, "resource "...)
	b = append(b, token(m.Name)...)
	b = append(b, ' ')
	b = appendFloat(b, m.Total)
	if m.Name == "tag" {
		return append(b, '\n')
	}
	b = append(b, ' ')
	b = appendFloat(b, m.Smallest)
	b = append(b, ' ')
	b = appendFloat(b, m.Largest)
	return append(b, '\n')
}

func (m Feature) AppendTo(b []byte) []byte {
	return append(appendName(append(b, "feature "...), m.Name), '\n')
}

func (AvailableResults) AppendTo(b []byte) []byte { return append(b, "available_results\n"...) }

func (m Result) AppendTo(b []byte) []byte {
	b = append(b, "result "...)
	b = appendInt(b, int64(m.Status))
	b = append(b, ' ')
	b = appendInt(b, int64(m.Exit))
	b = append(b, ' ')
	b = appendInt(b, m.Size)
	b = append(b, ' ')
	b = appendInt(b, m.ExecUsec)
	b = append(b, ' ')
	b = appendInt(b, int64(m.TaskID))
	return append(b, '\n')
}

func (m File) AppendTo(b []byte) []byte {
	b = appendName(append(b, "file "...), m.Name)
	b = append(b, ' ')
	return append(appendInt(b, m.Size), '\n')
}

func (m Missing) AppendTo(b []byte) []byte {
	b = appendName(append(b, "missing "...), m.Name)
	b = append(b, ' ')
	return append(appendInt(b, int64(m.Errno)), '\n')
}

func (m Put) AppendTo(b []byte) []byte {
	b = appendName(append(b, "put "...), m.Name)
	b = append(b, ' ')
	b = appendInt(b, m.Size)
	b = append(b, ' ', '0')
	return append(strconv.AppendUint(b, uint64(m.Mode&fs.ModePerm), 8), '\n')
}

func (m Symlink) AppendTo(b []byte) []byte {
	b = appendName(append(b, "symlink "...), m.Name)
	b = append(b, ' ')
	return append(appendInt(b, m.Size), '\n')
}

func (m Task) AppendTo(b []byte) []byte {
	return append(appendInt(append(b, "task "...), int64(m.ID)), '\n')
}

func (m Get) AppendTo(b []byte) []byte {
	b = appendName(append(b, "get "...), m.Name)
	if m.Recursive {
		return append(b, " 1\n"...)
	}
	return append(b, " 0\n"...)
}

func (m Kill) AppendTo(b []byte) []byte {
	return append(appendInt(append(b, "kill "...), int64(m.ID)), '\n')
}

func (m Unlink) AppendTo(b []byte) []byte {
	return append(appendName(append(b, "unlink "...), m.Name), '\n')
}

func (m InvalidateFile) AppendTo(b []byte) []byte {
	return append(appendName(append(b, "invalidate-file "...), m.Name), '\n')
}

func (m SendResults) AppendTo(b []byte) []byte {
	return append(appendInt(append(b, "send_results "...), int64(m.N)), '\n')
}

func (Check) AppendTo(b []byte) []byte   { return append(b, "check\n"...) }
func (Release) AppendTo(b []byte) []byte { return append(b, "release\n"...) }
func (Exit) AppendTo(b []byte) []byte    { return append(b, "exit\n"...) }
func (End) AppendTo(b []byte) []byte     { return append(b, "end\n"...) }

func (m Dir) AppendTo(b []byte) []byte {
	b = appendName(append(b, "dir "...), m.Name)
	if m.Reply {
		b = append(b, " 0"...)
	}
	return append(b, '\n')
}

func (m Auth) AppendTo(b []byte) []byte {
	return append(append(append(b, "auth password "...), token(m.Method)...), '\n')
}

func (m StatusQuery) AppendTo(b []byte) []byte {
	return append(append(b, m.Kind...), "_status\n"...)
}
